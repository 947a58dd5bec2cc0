// @ts-check
// The page's one state object and who redraws when it changes: no framework, just update() and watch().
//
// Everything the page shows is drawn from `store.state`; a change is a new value for a top-level key (objects and
// arrays are replaced, never changed in place), so a view can tell what changed by identity alone.

/** @import { Config, Painter, Progress, StyleInfo } from "./api.js" */
/** @import { CameraStats } from "./camera.js" */
/** @import { ClipKind } from "./clip.js" */
/** @import { DeviceRow } from "./device.js" */
/** @import { Lang } from "./i18n.js" */

/**
 * @template T
 * @typedef {object} Store
 * @property {T} state
 * @property {(patch: Partial<T> | ((state: T) => Partial<T>)) => void} update
 * @property {(pick: (state: T) => unknown[], draw: (state: T) => void) => void} watch
 */

/** @typedef {Store<State>} PageStore */

/**
 * @template T
 * @typedef {{pick: (state: T) => unknown[], draw: (state: T) => void, seen: unknown[] | null}} View
 */

/**
 * @template {object} T
 * @param {T} initial
 * @returns {Store<T>}
 */
export function createStore(initial) {
  const state = { ...initial };
  /** @type {View<T>[]} */
  const views = [];
  let drawing = false;
  let again = false;

  // Calls `draw(state)` now and whenever one of `pick(state)`'s values is no longer the same (===).
  /** @type {Store<T>["watch"]} */
  function watch(pick, draw) {
    /** @type {View<T>} */
    const view = { pick, draw, seen: null };
    views.push(view);
    run(view);
  }

  /** @param {View<T>} view */
  function run(view) {
    const now = view.pick(state);
    const seen = view.seen;
    if (seen && now.length === seen.length && now.every((v, i) => v === seen[i])) return;
    view.seen = now;
    view.draw(state);
  }

  // Merges `patch` (or what `patch(state)` returns) into the state and redraws the views it concerns, at once.
  /** @type {Store<T>["update"]} */
  function update(patch) {
    Object.assign(state, typeof patch === "function" ? patch(state) : patch);
    if (drawing) { again = true; return; } // an update from inside a view: drawn once this pass ends
    drawing = true;
    try {
      do {
        again = false;
        for (const view of views) run(view);
      } while (again);
    } finally {
      drawing = false;
    }
  }

  return { state, update, watch };
}

/** @typedef {{faces: boolean, size: string, portrait: boolean, background: string, temporal: boolean}} Options */

/**
 * Painting on this device (device-mode.js).
 * @typedef {object} DeviceState
 * @property {boolean} on  the switch
 * @property {string} support  why this browser cannot paint at all; "" when it can
 * @property {DeviceRow[] | null} rows  /api/device/styles, once read
 * @property {boolean} failed  the rows could not be read
 * @property {string | null} damaged  the style whose model failed its checksum while it was got ready
 * @property {string | null} ready  the last style got ready on this device (body[data-device-ready])
 */

/**
 * Camera mode (camera-mode.js).
 * @typedef {object} CameraState
 * @property {"off" | "starting" | "live" | "paused"} phase  body[data-camera]
 * @property {string | null} error  a DeviceError's reason (device.js) from starting or painting, said in one line
 * @property {CameraStats | null} stats  the live view's, redrawn twice a second
 * @property {"smoother" | "sharper"} quality
 * @property {boolean} recording
 * @property {{href: string, name: string} | null} clip  the last recording, to download
 */

/**
 * The paint in progress.
 * @typedef {object} Job
 * @property {File} file  what is uploaded (or handed to the device painter)
 * @property {Blob} photo  what the page shows and re-blends for it: the file, or the server's PNG of it
 * @property {string} beforeUrl  the object URL the photo is shown from
 * @property {string} name  the file's name, made safe for the download's
 * @property {boolean} portrait
 * @property {ClipKind | null} clip
 * @property {number} started  performance.now() when it started
 * @property {AbortController} controller
 */

/**
 * The full-strength picture and the photo at its size in L*a*b*, for the strength slider to mix (compare.js).
 * @typedef {{photoLab: Float32Array, paintedLab: Float32Array, painted: ImageData, out: ImageData}} Blend
 */

/**
 * @typedef {object} ResultBase
 * @property {string} url  the painted picture's or clip's object URL
 * @property {string} name  the download's name, less its suffix
 * @property {string} seconds  how long the paint took, "4.2"
 * @property {string} beforeUrl  the photo's object URL
 * @property {number} width
 * @property {number} height
 * @property {string} style
 * @property {boolean} portrait
 * @property {number} facesFound
 * @property {Painter["where"]} where
 * @property {string | null | undefined} engine
 */
/** @typedef {ResultBase & {clip?: undefined, blend: Blend}} PhotoResult */
/** @typedef {ResultBase & {clip: ClipKind, mediaType: string | undefined, frames: number | undefined}} ClipResult */
/** @typedef {PhotoResult | ClipResult} Result */

/** @typedef {{key: string, vars?: Record<string, string | number>}} Phrase  a string to translate, and its {names} */
/** @typedef {{kind: "error" | "busy", key: string, sub: string | Phrase}} Message  sub: plain text, or a Phrase */

/**
 * The page's state.
 * @typedef {object} State
 * @property {Lang} lang
 * @property {"starting" | "ready" | "down" | "empty"} server  the pill at the top
 * @property {Config | null} config  /api/config once read
 * @property {StyleInfo[]} styles  /api/styles
 * @property {boolean} stylesLoaded
 * @property {string | null} style  the chosen style's id
 * @property {Record<string, {url: string, pending: boolean}>} thumbs  style id → its thumbnail (a blob: URL)
 * @property {File | null} file  the chosen photo or clip, as uploaded to paint
 * @property {File | null} choosing  the file being read and checked: the last one chosen wins (photo.js)
 * @property {{size: string, blob: Blob} | null} preview  the server's PNG of `file`, at that size option, when this
 *   browser cannot decode it (photo.js)
 * @property {ClipKind | null} clip  what the chosen file is when it moves (clip.js); null for a photo
 * @property {string | null} fileUrl  the object URL it is shown from: its own, or its preview's
 * @property {boolean} dragging
 * @property {Options} options  temporal: "Steady video"
 * @property {DeviceState} device
 * @property {CameraState} camera
 * @property {Job | null} job
 * @property {Progress | null} progress  while a job runs
 * @property {Result | null} result  a painted clip has `clip` (and no `blend`)
 * @property {{href: string, name: string, type?: string} | null} download  follows the strength slider once let go
 * @property {number} split  the compare slider, 0…100
 * @property {number} strength  the strength slider, 0…100
 * @property {number} blendFrame  the animation frame due to repaint the strength blend, 0 when none (compare.js)
 * @property {Message | null} message
 * @property {"idle" | "ready" | "uploading" | "queued" | "running" | "done" | "error"} phase  body[data-state]
 * @property {Promise<ServiceWorker | null> | null} serviceWorker  the active service worker once it controls the
 *   page; null where there is none (offline.js)
 * @property {{handing: number, mark: "" | "keeping" | "kept" | "none"}} offline  hand-overs to the service worker
 *   not yet answered, and html[data-offline] ("": not set yet) (offline.js)
 */

/**
 * What the state starts as (app.js makes it; every other module reads it and changes it through update()).
 * @param {Lang} lang
 * @param {DeviceState} device
 * @returns {State}
 */
export function initialState(lang, device) {
  return {
    lang,
    server: "starting",
    config: null,
    styles: [],
    stylesLoaded: false,
    style: null,
    thumbs: {},
    file: null,
    choosing: null,
    preview: null,
    clip: null,
    fileUrl: null,
    dragging: false,
    options: { faces: true, size: "512", portrait: false, background: "", temporal: true },
    device,
    camera: { phase: "off", error: null, stats: null, quality: "smoother", recording: false, clip: null },
    job: null,
    progress: null,
    result: null,
    download: null,
    split: 50,
    strength: 100,
    blendFrame: 0,
    message: null,
    phase: "idle",
    serviceWorker: null,
    offline: { handing: 0, mark: "" },
  };
}
