// @ts-check
// A live anime view of a camera, painted on this device, for any page of the same origin:
//
//   import { startCamera } from "/static/camera.js";
//   const live = await startCamera({ style: "v3-cute", targetFps: 12, maxSide: 384, steady: true,
//                                    onFrame: ({ input, painted, time }) => {} });   // ImageData, ImageData, ms
//   document.body.append(live.canvas);        // the painted view, mirrored like a mirror for the front camera
//   live.setStyle("v3-hayao"); live.pause(); live.resume();
//   const png = await live.snapshot();        // the painted view now, a PNG Blob; live.still(): the camera's own
//   live.stats();                             // {fps, latencyMs, painted, dropped, side, width, height, ep,
//                                             //  slow, stages: where a frame's time goes}
//   live.stop();                              // every camera track ended: the light goes off
//
// `source` is the person's camera by default (asked for now: call this on a button press), or a MediaStream or a
// playing <video> the page already has (those are the caller's to stop). Frames go to device.js's worker one at a
// time: while one is painted, newer camera frames are dropped, never queued, so the view never lags behind. The
// working size (the long side, a multiple of the style's) adapts to hold `targetFps`, up to `maxSide`; steady.js
// holds still what is still. Nothing leaves the device. Errors are device.js's DeviceError: noCamera, refused,
// inUse from the camera; style, network, checksum, unsupported, failed from the painter.

import { DeviceError, deviceModel, deviceSupport, paintFrame, prepareOnDevice } from "./device.js";
import { createSteadier } from "./steady.js";

/** @import { Ep } from "./device.js" */

/**
 * @typedef {object} CameraFrame
 * @property {ImageData} input  what was painted: the camera's frame at the working size (mirrored when shown so)
 * @property {ImageData} painted  what is shown: the painting, steadied
 * @property {ImageData} raw  the painting before steadying (the frame painted on its own)
 * @property {number} time  when it was shown (performance.now())
 */

/**
 * @typedef {object} CameraStats
 * @property {number} fps  painted frames a second over the last two seconds
 * @property {number} latencyMs  from the frame's capture to its painting on the canvas, the last few frames' median
 * @property {number} painted
 * @property {number} dropped  camera frames that came while one was being painted
 * @property {number} side  the working size's long side
 * @property {number} width
 * @property {number} height
 * @property {Ep | null} ep
 * @property {string} style  the style of the frame last shown
 * @property {boolean} slow  under MIN_FPS at the smallest size: too slow to feel live in this style
 * @property {DeviceError | null} failure  why painting stopped (the camera is then stopped too)
 * @property {CameraStages} stages  where a frame's time goes
 */

/**
 * Medians over the last 30 frames, in ms: what this thread does per frame and the worker's round trip.
 * @typedef {object} CameraStages
 * @property {number} grabMs  the camera's frame drawn at the working size and read back
 * @property {number} paintMs  handed to the worker until its painting is back (the wait)
 * @property {number} runMs  of which the network's run alone
 * @property {number} steadyMs  steady.js
 * @property {number} drawMs  put on the canvas
 */

/**
 * @typedef {object} CameraOptions
 * @property {MediaStream | HTMLVideoElement} [source]
 * @property {string} style
 * @property {number} [targetFps]
 * @property {number} [maxSide]  the largest working size (long side)
 * @property {number} [minSide]  the smallest (equal to maxSide: a fixed size, as benchmarks use)
 * @property {boolean} [steady]
 * @property {boolean} [mirror]  default: true for the person's camera, false for a given source
 * @property {(frame: CameraFrame) => void} [onFrame]
 * @property {HTMLCanvasElement} [canvas]  where to paint (default: a new one, controller.canvas)
 */

/**
 * @typedef {object} CameraController
 * @property {HTMLCanvasElement} canvas
 * @property {HTMLVideoElement} video  the source as played
 * @property {() => void} stop
 * @property {(id: string) => void} setStyle
 * @property {(options: {targetFps?: number, maxSide?: number}) => void} setTarget  smoother or sharper
 * @property {() => void} pause
 * @property {() => void} resume
 * @property {() => Promise<Blob>} snapshot  the painted view, PNG
 * @property {() => Promise<Blob>} still  the camera's own frame at its full size (mirrored as shown), PNG
 * @property {() => CameraStats} stats
 */

export const MIN_FPS = 2; // under this at the smallest size, a live view is too slow to feel live
const SIDES = [128, 160, 192, 224, 256, 288, 320, 384, 448, 512]; // the long sides the working size steps along
const SETTLE = 4; // frames painted at a size before it is judged

// getUserMedia's refusals → device.js's reasons.
/**
 * @param {unknown} error
 * @returns {DeviceError}
 */
function cameraError(error) {
  const name = error instanceof Error || error instanceof DOMException ? error.name : "";
  const message = error instanceof Error || error instanceof DOMException ? error.message : String(error);
  if (name === "NotAllowedError" || name === "SecurityError") return new DeviceError("refused", "the camera was not allowed");
  if (name === "NotReadableError" || name === "AbortError") return new DeviceError("inUse", "the camera is in use or cannot start");
  if (name === "NotFoundError" || name === "OverconstrainedError") return new DeviceError("noCamera", "no camera was found");
  return new DeviceError("failed", `the camera did not start: ${message}`);
}

/** @returns {Promise<MediaStream>} */
async function openCamera() {
  if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
    throw new DeviceError("noCamera", "this browser offers no camera here (it needs https or localhost)");
  }
  try {
    return await navigator.mediaDevices.getUserMedia({
      video: { facingMode: "user", width: { ideal: 640 }, height: { ideal: 480 } }, audio: false,
    });
  } catch (error) {
    throw cameraError(error);
  }
}

// The working size for long side `side`: the source's shape, each side a multiple of the style's (so the network
// pads nothing), at least its minimum.
/**
 * @param {number} vw
 * @param {number} vh
 * @param {number} side
 * @param {{multiple: number, min_side: number}} model
 */
function workingSize(vw, vh, side, model) {
  const m = model.multiple || 1;
  const long = Math.max(vw, vh), short = Math.min(vw, vh);
  const a = Math.max(m, Math.round(side / m) * m);
  const b = Math.max(m, Math.ceil(model.min_side / m) * m, Math.round((side * short) / long / m) * m);
  return vw >= vh ? [a, b] : [b, a];
}

/** @param {number[]} values */
function median(values) {
  if (!values.length) return 0;
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[sorted.length >> 1];
}

/**
 * @param {CameraOptions} options
 * @returns {Promise<CameraController>}
 */
export async function startCamera({
  source, style, targetFps = 12, maxSide = 384, minSide = SIDES[0], steady = true, mirror, onFrame, canvas,
}) {
  const unsupported = deviceSupport();
  if (unsupported) throw new DeviceError("unsupported", `cannot paint on this device: ${unsupported}`);
  let model = await deviceModel(style); // refuses a style this browser cannot paint before the camera turns on
  // The runtime and the live model start while the camera does.
  prepareOnDevice(style, { live: true }).catch(() => { /* the first frame says why */ });
  /** @type {MediaStream | null} */
  const own = source ? null : await openCamera();
  const ended = () => { for (const track of own ? own.getTracks() : []) track.stop(); };
  /** @type {HTMLVideoElement} */
  let video;
  if (source instanceof HTMLVideoElement) {
    video = source;
  } else {
    video = document.createElement("video");
    video.muted = true;
    video.playsInline = true;
    video.srcObject = /** @type {MediaStream} */ (own || source);
    try { await video.play(); } catch (error) { ended(); throw cameraError(error); }
  }
  if (!video.videoWidth) {
    await new Promise((resolve) => video.addEventListener("loadedmetadata", resolve, { once: true }));
  }
  const flip = mirror ?? !source;
  const view = canvas || document.createElement("canvas");
  const shown = /** @type {CanvasRenderingContext2D} */ (view.getContext("2d"));
  const grab = document.createElement("canvas");
  const grabCtx = /** @type {CanvasRenderingContext2D} */ (grab.getContext("2d", { willReadFrequently: true }));
  const steadier = createSteadier();

  let target = targetFps, top = maxSide;
  const sides = () => SIDES.filter((s) => s >= Math.min(minSide, top) && s <= top);
  let sideAt = Math.max(0, sides().findIndex((s) => s >= 256)); // a middle size to start from
  if (sides()[sideAt] === undefined) sideAt = sides().length - 1;
  let atSize = 0; // frames painted at this size
  let stopped = false, paused = false, busy = false, fresh = false;
  let painted = 0, dropped = 0, shownStyle = style;
  /** @type {Ep | null} */
  let ep = null;
  /** @type {number[]} */
  const shownAt = [];
  /** @type {number[]} */
  const latencies = [];
  /** @type {number[]} */
  const cycles = [];
  /** @type {Record<keyof CameraStages, number[]>} */
  const stages = { grabMs: [], paintMs: [], runMs: [], steadyMs: [], drawMs: [] };
  /** @type {(name: keyof CameraStages, ms: number) => void} */
  const note = (name, ms) => { const list = stages[name]; list.push(ms); if (list.length > 30) list.shift(); };
  let size = [0, 0];
  /** @type {number | null} */
  let captured = null; // the capture time of the newest frame not yet painted

  const side = () => sides()[Math.min(sideAt, sides().length - 1)];

  // After each painted frame: a smaller size when the frame rate is under the target, a larger one when the larger
  // size (cost ∝ its area) would still hold it.
  function adapt() {
    if (++atSize < SETTLE) return;
    const cycle = median(cycles.slice(-SETTLE));
    const budget = 1000 / target;
    const list = sides();
    if (cycle > budget * 1.1 && sideAt > 0) { sideAt--; atSize = 0; steadier.reset(); return; }
    const bigger = list[sideAt + 1];
    if (bigger && cycle * (bigger / list[sideAt]) ** 2 < budget * 0.9) { sideAt++; atSize = 0; steadier.reset(); }
  }

  async function paintOne() {
    busy = true;
    fresh = false;
    const capturedAt = captured ?? performance.now();
    const started = performance.now();
    const [w, h] = workingSize(video.videoWidth, video.videoHeight, side(), model);
    if (w !== size[0] || h !== size[1]) { size = [w, h]; grab.width = w; grab.height = h; steadier.reset(); }
    // The centre of the frame in the working size's shape.
    const scale = Math.min(video.videoWidth / w, video.videoHeight / h);
    const sw = w * scale, sh = h * scale;
    grabCtx.setTransform(flip ? -1 : 1, 0, 0, 1, flip ? w : 0, 0);
    grabCtx.drawImage(video, (video.videoWidth - sw) / 2, (video.videoHeight - sh) / 2, sw, sh, 0, 0, w, h);
    const input = grabCtx.getImageData(0, 0, w, h);
    const wanted = style;
    const handed = performance.now();
    /** @type {Awaited<ReturnType<typeof paintFrame>>} */
    let answer;
    try {
      answer = await paintFrame(new ImageData(new Uint8ClampedArray(input.data), w, h), { style: wanted });
    } catch (error) {
      busy = false;
      if (stopped) return;
      failure = error instanceof DeviceError ? error : new DeviceError("failed", String(error));
      stop();
      return;
    }
    busy = false;
    const back = performance.now();
    // A frame that came meanwhile goes to the worker before this one is steadied and drawn: the worker paints
    // while this thread works (one frame in flight still, the newest).
    if (fresh && !paused && !stopped) paintOne();
    if (stopped) return;
    ep = answer.ep;
    if (wanted !== style) return; // painted in the style just left: dropped
    const steadyAt = performance.now();
    const out = steady ? steadier.next(input, answer.painted) : answer.painted;
    const drawAt = performance.now();
    if (view.width !== w || view.height !== h) { view.width = w; view.height = h; }
    shown.putImageData(out, 0, 0);
    shownStyle = wanted;
    const now = performance.now();
    note("grabMs", handed - started); note("paintMs", back - handed); note("runMs", answer.runMs);
    note("steadyMs", drawAt - steadyAt); note("drawMs", now - drawAt);
    painted++;
    shownAt.push(now);
    while (shownAt.length && shownAt[0] < now - 2000) shownAt.shift();
    latencies.push(now - capturedAt);
    if (latencies.length > 30) latencies.shift();
    cycles.push(now - started);
    if (cycles.length > 30) cycles.shift();
    adapt();
    onFrame?.({ input, painted: out, raw: answer.painted, time: now });
  }

  /** @type {DeviceError | null} */
  let failure = null;
  // Each new camera frame: painted now if none is in flight, else remembered as the newest (and one more dropped
  // when one was remembered already).
  /** @param {number} capture */
  function arrived(capture) {
    if (stopped) return;
    if (paused) return;
    if (busy) { if (fresh) dropped++; fresh = true; captured = capture; return; }
    captured = capture;
    paintOne();
  }
  const hasFrameCallback = "requestVideoFrameCallback" in HTMLVideoElement.prototype;
  /** @type {number | ReturnType<typeof setInterval>} */
  let ticking = 0;
  if (hasFrameCallback) {
    /** @type {VideoFrameRequestCallback} */
    const onVideoFrame = (now, meta) => {
      if (stopped) return;
      // A camera's frames carry their capture time; a file's do not: then when it was handed to the compositor.
      const at = meta.captureTime ?? meta.expectedDisplayTime ?? now;
      arrived(at);
      ticking = video.requestVideoFrameCallback(onVideoFrame);
    };
    ticking = video.requestVideoFrameCallback(onVideoFrame);
  } else {
    ticking = setInterval(() => arrived(performance.now()), 1000 / 30);
  }

  function stop() {
    if (stopped) return;
    stopped = true;
    if (hasFrameCallback) video.cancelVideoFrameCallback(/** @type {number} */ (ticking));
    else clearInterval(ticking);
    ended();
    if (own) { video.pause(); video.srcObject = null; }
  }

  /** @param {HTMLCanvasElement} c */
  const png = (c) => new Promise((resolve, reject) => {
    c.toBlob((blob) => (blob ? resolve(blob) : reject(new DeviceError("failed", "no picture to take"))), "image/png");
  });

  return {
    canvas: view,
    video,
    stop,
    setStyle(id) {
      if (id === style) return;
      deviceModel(id).then((m) => { model = m; style = id; steadier.reset(); }, () => { /* kept: the old style */ });
    },
    setTarget(next) {
      if (next.targetFps) target = next.targetFps;
      if (next.maxSide) { top = next.maxSide; sideAt = Math.min(sideAt, sides().length - 1); }
      atSize = 0;
    },
    pause() { paused = true; },
    resume() { paused = false; },
    snapshot: () => png(view),
    still() {
      const c = document.createElement("canvas");
      c.width = video.videoWidth;
      c.height = video.videoHeight;
      const ctx = /** @type {CanvasRenderingContext2D} */ (c.getContext("2d"));
      ctx.setTransform(flip ? -1 : 1, 0, 0, 1, flip ? c.width : 0, 0);
      ctx.drawImage(video, 0, 0);
      return png(c);
    },
    stats() {
      const span = shownAt.length > 1 ? shownAt[shownAt.length - 1] - shownAt[0] : 0;
      const fps = span > 0 ? ((shownAt.length - 1) * 1000) / span : 0;
      const slow = sideAt === 0 && atSize >= SETTLE && fps > 0 && fps < MIN_FPS;
      return {
        fps, latencyMs: median(latencies), painted, dropped, side: side(), width: size[0], height: size[1], ep,
        style: shownStyle, slow, failure,
        stages: /** @type {CameraStages} */ (
          Object.fromEntries(Object.entries(stages).map(([k, v]) => [k, median(v)]))),
      };
    },
  };
}
