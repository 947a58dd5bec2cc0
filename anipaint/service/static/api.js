// @ts-check
// The server's HTTP API, and nothing else here talks to it: readiness, config, styles and their thumbnails, the
// preview of a photo this browser cannot decode, and `serverPainter`, which paints through the job queue. A
// painter is any object with
//
//   paint(file, options, onProgress, signal) → Promise<{blob, width, height, style, facesFound, engine,
//                                                       mediaType, frames}>
//
// `options` as job.js's paintOptions() builds them; onProgress({stage, progress 0…1, position, waiting, frame,
// frames, eta}) as it goes (waiting: in a queue, not painting yet; a clip's frames painted, its frames (0: not
// known) and the seconds left); `frames` in the answer only for a video or animated picture, whose `blob` is
// the MP4 or animated picture of type `mediaType`. The promise rejects with a PaintError (its `reason` one of
// REASONS) and stops when `signal` aborts. device-painter.js paints on this device behind the same interface.

/**
 * /api/config (anipaint/service/schemas.py ConfigOut).
 * @typedef {object} Config
 * @property {number} max_upload_bytes
 * @property {number} max_pixels
 * @property {number} max_side
 * @property {number} video_max_bytes  a video's or animated picture's upload limit
 * @property {number} video_max_seconds
 * @property {string | null} default_style
 * @property {boolean} faces
 * @property {boolean} commercial_only  only styles whose licence allows commercial use are offered
 * @property {string} version
 */

/**
 * A row of /api/styles (StyleOut).
 * @typedef {object} StyleInfo
 * @property {string} id
 * @property {string} label  "Hayao (AnimeGANv3)"
 * @property {string} description
 * @property {string} licence  its id: Apache-2.0, CC-BY-NC-SA-4.0 or non-commercial
 * @property {string} licence_text
 * @property {string} licence_source
 * @property {boolean} commercial
 * @property {boolean} available
 * @property {string | null} reason  why it is not available here
 * @property {"ready" | "converting" | "optimising" | "download" | "unavailable"} state
 * @property {string | null} detail
 * @property {string | null} engine
 * @property {string | null} [download_error]  why its last download on first use failed
 * @property {string | null} [retry_at]  when a paint tries that download again (ISO 8601)
 * @property {string} thumbnail  its sample picture's URL
 * @property {boolean} default
 * @property {"style" | "face"} kind  face: an anime-face model for portraits
 */

/**
 * A job, as POST /api/jobs and GET /api/jobs/{id} answer (JobOut).
 * @typedef {object} JobInfo
 * @property {string} id
 * @property {"queued" | "running" | "done" | "failed"} status
 * @property {string} stage
 * @property {number} progress
 * @property {number} position
 * @property {string | null} [error]
 * @property {string | null} [error_kind]  image, style, download, busy or internal, when failed
 * @property {string} style
 * @property {number | null} [width]
 * @property {number | null} [height]
 * @property {number | null} [faces_found]
 * @property {string | null} [engine]
 * @property {number | null} [frame]
 * @property {number | null} [frames]
 * @property {number | null} [eta_seconds]
 * @property {string | null} [media_type]
 */

/**
 * What a paint asks for (job.js paintOptions).
 * @typedef {object} PaintOptions
 * @property {string} style
 * @property {number} maxSide  the long side's cap; 0 keeps the size
 * @property {boolean} faces
 * @property {string | null} faceStyle
 * @property {boolean} portrait
 * @property {string | null} background
 * @property {number} strength  0…1
 * @property {boolean | null} temporal  a clip only: keep it steady
 */

/**
 * How a paint is getting on.
 * @typedef {object} Progress
 * @property {string} stage  uploading, queued, starting, download, decode, paint, faces, encode…
 * @property {number} progress  0…1
 * @property {number} [position]  the place in the queue
 * @property {boolean} [waiting]  in a queue, not painting yet
 * @property {number} [frame]  a clip's frames painted
 * @property {number} [frames]  a clip's frames (0: not known)
 * @property {number | null} [eta]  the seconds left
 * @property {boolean} [unmeasured]  no fraction to show
 */

/**
 * What a paint answers; `mediaType` and `frames` for a clip only.
 * @typedef {object} Painted
 * @property {Blob} blob
 * @property {number} width
 * @property {number} height
 * @property {string} style
 * @property {number} facesFound
 * @property {string | null | undefined} engine
 * @property {string} [mediaType]
 * @property {number} [frames]
 */

/**
 * @typedef {object} Painter
 * @property {"server" | "device"} where
 * @property {(file: File, options: PaintOptions, onProgress: (p: Progress) => void, signal: AbortSignal)
 *   => Promise<Painted>} paint
 */

/**
 * @typedef {"network" | "gone" | "busy" | "tooBig" | "notImage" | "style" | "timeout" | "failed" | "cancelled"
 *   | "checksum" | "deviceDecode" | "device"} Reason
 */

const POLL_MS = 400;

/** @type {Reason[]} */
export const REASONS = ["network", "gone", "busy", "tooBig", "notImage", "style", "timeout", "failed", "cancelled",
  "checksum", "deviceDecode", "device"]; // the last three from the device painter

export class PaintError extends Error {
  /**
   * @param {Reason} reason
   * @param {string} [detail]  the server's reason, shown under the message
   * @param {number} [retryAfter]  seconds, when busy
   */
  constructor(reason, detail = "", retryAfter = 0) {
    super(detail || reason);
    this.reason = reason;
    this.detail = detail;
    this.retryAfter = retryAfter;
  }
}

const cancelled = () => new PaintError("cancelled");

// True once /readyz answers 200; false while it does not; throws when the server cannot be reached.
/** @returns {Promise<boolean>} */
export async function isReady() {
  return (await fetch("/readyz", { cache: "no-store" })).ok;
}

// The server's limits and defaults, or null (the page's own defaults then hold).
/** @returns {Promise<Config | null>} */
export async function getConfig() {
  const res = await fetch("/api/config");
  return res.ok ? res.json() : null;
}

/** @returns {Promise<StyleInfo[]>} */
export async function getStyles() {
  const res = await fetch("/api/styles");
  if (!res.ok) throw new Error(String(res.status));
  return res.json();
}

// A style's sample picture: {blob, pending} (pending: a placeholder until the real one is painted).
/**
 * @param {string} url
 * @param {boolean} fresh  past the HTTP cache
 * @returns {Promise<{pending: boolean, blob: Blob} | null>}
 */
export async function getThumbnail(url, fresh) {
  const res = await fetch(url, { cache: fresh ? "no-store" : "default" });
  if (!res.ok) return null;
  return { pending: res.headers.get("X-Thumbnail") === "pending", blob: await res.blob() };
}

// A refused request as a PaintError.
/**
 * @param {Response} res
 * @returns {Promise<PaintError>}
 */
async function httpError(res) {
  let detail = "";
  try { detail = (await res.json()).detail || ""; } catch (_) { /* not JSON */ }
  if (res.status === 503) return new PaintError("busy", detail, Number(res.headers.get("Retry-After")) || 5);
  if (res.status === 413) return new PaintError("tooBig", detail);
  if (res.status === 415) return new PaintError("notImage", detail);
  if (res.status === 504) return new PaintError("timeout", detail);
  if ((res.status === 400 || res.status === 422) && /style/i.test(detail)) return new PaintError("style", detail);
  return new PaintError("failed", detail || `HTTP ${res.status}`);
}

// A failed job (its error_kind) as a PaintError.
/** @param {JobInfo} info */
function jobError(info) {
  /** @type {Record<string, Reason>} */
  const reasons = { image: "notImage", style: "style", busy: "busy" };
  const reason = (info.error_kind && reasons[info.error_kind]) || "failed";
  return new PaintError(reason, reason === "busy" ? "" : info.error || "");
}

/** @param {File} file */
function imageForm(file) {
  const body = new FormData();
  body.append("image", file, file.name || "pasted.png");
  return body;
}

/**
 * @param {File} file
 * @param {PaintOptions} options
 */
function form(file, options) {
  const body = imageForm(file);
  body.append("style", options.style);
  body.append("faces", options.faces ? "true" : "false");
  if (options.faceStyle) body.append("face_style", options.faceStyle);
  body.append("max_side", String(options.maxSide));
  body.append("portrait", options.portrait ? "true" : "false");
  if (options.background) body.append("background", options.background);
  if (options.strength < 1) body.append("strength", String(options.strength));
  if (options.temporal != null) body.append("temporal", options.temporal ? "true" : "false");
  return body;
}

// The photo as the server decodes it, for a browser that cannot (HEIC on Chrome and Firefox): a PNG Blob, upright,
// without metadata, its long side capped at `maxSide` ("512", "original", …) as a paint at that size caps it, so
// it has the painted picture's size. Rejects with a PaintError.
/**
 * @param {File} file
 * @param {string} maxSide
 * @returns {Promise<Blob>}
 */
export async function getPreview(file, maxSide) {
  const body = imageForm(file);
  body.append("max_side", String(maxSide));
  let res;
  try {
    res = await fetch("/api/preview", { method: "POST", body });
  } catch (_) {
    throw new PaintError("network");
  }
  if (!res.ok) throw await httpError(res);
  return res.blob();
}

/**
 * @param {number} ms
 * @param {AbortSignal} [signal]
 * @returns {Promise<void>}
 */
const pause = (ms, signal) => new Promise((resolve, reject) => {
  const timer = setTimeout(resolve, ms);
  signal?.addEventListener("abort", () => { clearTimeout(timer); reject(cancelled()); }, { once: true });
});

// Paints on the server: queues a job, polls it, fetches the PNG. Abort deletes the job.
/** @type {Painter} */
export const serverPainter = {
  where: "server",
  async paint(file, options, onProgress, signal) {
    onProgress({ stage: "uploading", progress: 0, position: 0 });
    let res;
    try {
      res = await fetch("/api/jobs", { method: "POST", body: form(file, options), signal });
    } catch (_) {
      throw signal?.aborted ? cancelled() : new PaintError("network");
    }
    if (res.status !== 202) throw await httpError(res);
    /** @type {JobInfo} */
    let info = await res.json();
    const forget = () => fetch(`/api/jobs/${info.id}`, { method: "DELETE" }).catch(() => { /* gone anyway */ });
    if (signal?.aborted) { forget(); throw cancelled(); }
    signal?.addEventListener("abort", forget, { once: true });
    onProgress(progressOf(info));
    while (info.status !== "done") {
      await pause(POLL_MS, signal);
      let poll;
      try { poll = await fetch(`/api/jobs/${info.id}`, { cache: "no-store", signal }); } catch (_) {
        if (signal?.aborted) throw cancelled();
        continue; // a blip: keep trying
      }
      if (poll.status === 404) throw new PaintError("gone");
      if (!poll.ok) continue;
      info = { id: info.id, ...(await poll.json()) };
      onProgress(progressOf(info));
      if (info.status === "failed") throw jobError(info);
    }
    let png;
    try { png = await fetch(`/api/jobs/${info.id}/result`, { signal }); } catch (_) { png = null; }
    if (signal?.aborted) throw cancelled();
    if (!png || !png.ok) throw new PaintError(png && png.status === 404 ? "gone" : "network");
    // A job that is done has its size.
    const { width, height } = /** @type {JobInfo & {width: number, height: number}} */ (info);
    return {
      blob: await png.blob(), width, height, style: info.style,
      facesFound: info.faces_found || 0, engine: info.engine, mediaType: info.media_type || "image/png",
      frames: info.frames || 0,
    };
  },
};

// "done" still reads as running: the picture is fetched and decoded after the job reports done.
/**
 * @param {JobInfo} info
 * @returns {Progress}
 */
function progressOf(info) {
  const stage = info.status === "queued" ? "queued" : info.stage || info.status;
  return {
    stage, progress: info.progress || 0, position: info.position || 0, waiting: info.status === "queued",
    frame: info.frame || 0, frames: info.frames || 0, eta: info.eta_seconds ?? null,
  };
}
