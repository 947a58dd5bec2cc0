// @ts-check
/// <reference lib="webworker" />
// The device painter's Web Worker: fetches a style's ONNX file (checking its sha256), runs it with ONNX Runtime
// Web (WebGPU where the browser has it, else WebAssembly with SIMD and threads) and does the server's pre- and
// post-processing around it: EXIF orientation, the long-side cap (resize.js), the edge and reflect padding to
// the network's size multiple, the [-1, 1] normalisation, the L*a*b* strength blend (blend.js), alpha kept.
// Messages in: {id, model (a row of /api/device/styles), image (Blob or ImageBitmap), maxSide, strength, ep}, or
// {id, model, ep, warm: true} to get ready before a photo is there, or {id, model, ep, frame: {data, width,
// height}} for one frame of a live stream (camera.js: RGBA in, RGBA out, at the size it comes in); out: {id,
// progress} while it works, then {id, png, width, height, ep, loaded} (warm: {id, ep, loaded}; frame: {id, pixels,
// width, height, ep, runMs, loaded}) or {id, error: {reason, message}};
// `loaded` is every URL this worker fetched (its modules, the runtime, the model), for the page to hand to its
// service worker when this worker started before that one took control (offline.js).

import * as ort from "./vendor/ort/ort.min.mjs"; // its types: types/vendor/ort/ort.min.d.mts
import { mix, toLab } from "./blend.js";
import { fitLongSide, resizeLanczos } from "./resize.js";

/**
 * @import { DeviceModel, DeviceProgress, DeviceReason, Ep, FrameAnswer, FrameRequest, PaintAnswer, PaintRequest,
 *   WarmAnswer, WarmRequest } from "./device.js"
 */
/** @typedef {(p: DeviceProgress) => void} Hear */
/** @typedef {{session: ort.InferenceSession, ep: Ep}} Loaded */
/**
 * The part of WebGPU this worker asks for (TypeScript's lib has no WebGPU types).
 * @typedef {{requestAdapter(): Promise<{info?: {isFallbackAdapter?: boolean}} | null>}} GPU
 */

// This scope: a dedicated worker's (the program's `self` is typed as the page's window).
const scope = /** @type {DedicatedWorkerGlobalScope & {navigator: {gpu?: GPU}}} */ (/** @type {unknown} */ (self));

ort.env.wasm.wasmPaths = new URL("./vendor/ort/", import.meta.url).href;
// Threads need cross-origin isolation (SharedArrayBuffer); every core, as native ONNX Runtime uses them.
ort.env.wasm.numThreads = scope.crossOriginIsolated ? Math.min(8, navigator.hardwareConcurrency || 1) : 1;
ort.env.wasm.simd = true;
ort.env.logLevel = "error";

const MODELS = "anipaint-models"; // the service worker's cache of model files (sw.js)
/** @type {Map<string, Promise<Loaded>>} */
const sessions = new Map(); // sha256 + execution provider → Promise of {session, ep}, shared while it loads
/** @type {Map<Promise<Loaded>, Set<Hear>>} */
const loading = new Map(); // a session's Promise while it loads → the progress callbacks of everyone waiting for it
/** @type {Map<string, Promise<unknown>>} */
const runs = new Map(); // the same key → Promise of its latest run: one run at a time (a paint waits for a warm-up)
/** @type {Set<string>} */
const warmed = new Set(); // keys whose session has had its warm-up run

/**
 * @template T
 * @param {string} key
 * @param {() => Promise<T>} run
 * @returns {Promise<T>}
 */
function oneAtATime(key, run) {
  const next = (runs.get(key) || Promise.resolve()).then(run);
  runs.set(key, next.catch(() => {}));
  return next;
}

class Refused extends Error {
  /**
   * @param {DeviceReason} reason
   * @param {string} message
   */
  constructor(reason, message) { super(message); this.reason = reason; }
}

/** @param {ArrayBuffer} buf */
const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("");

// The model's bytes, reporting {stage: "download", loaded, total}; refused unless its sha256 is the manifest's.
/**
 * @param {DeviceModel} model
 * @param {Hear} progress
 * @returns {Promise<Uint8Array>}
 */
async function download(model, progress) {
  let res;
  try { res = await fetch(model.url); } catch (_) {
    throw new Refused("network", `the ${model.id} model could not be downloaded (offline, and not cached yet)`);
  }
  if (!res.ok) throw new Refused("network", `the ${model.id} model could not be downloaded (HTTP ${res.status})`);
  const total = model.bytes || Number(res.headers.get("Content-Length")) || 0;
  if (!res.body) throw new Refused("network", `the ${model.id} model came back empty`);
  const reader = res.body.getReader();
  const parts = [];
  let loaded = 0;
  progress({ stage: "download", loaded, total });
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    loaded += value.length;
    progress({ stage: "download", loaded, total });
  }
  const bytes = new Uint8Array(loaded);
  let at = 0;
  for (const part of parts) { bytes.set(part, at); at += part.length; }
  const got = hex(await crypto.subtle.digest("SHA-256", bytes));
  if (got !== model.sha256) {
    // Never use it, and never keep it: a reload fetches it again.
    try { await (await caches.open(MODELS)).delete(model.url); } catch (_) { /* no cache here */ }
    throw new Refused("checksum", `the ${model.id} model file failed its checksum (sha256 ${got.slice(0, 12)}…, `
      + `expected ${model.sha256.slice(0, 12)}…): refused, nothing was painted`);
  }
  return bytes;
}

// A GPU's WebGPU adapter, or null: a software one (SwiftShader, WebGPU emulated on the CPU) paints a hundred times
// slower than WebAssembly does.
async function hardwareAdapter() {
  const adapter = await scope.navigator.gpu?.requestAdapter();
  return adapter && !adapter.info?.isFallbackAdapter ? adapter : null;
}

// The style's session, made once; a second caller while it loads (a paint during the warm-up) shares that load and
// its refusal, and a failed load is forgotten so that the next paint tries again.
/**
 * @param {DeviceModel} model
 * @param {Ep | undefined} ep
 * @param {Hear} progress
 * @returns {Promise<Loaded>}
 */
async function session(model, ep, progress) {
  /** @type {Ep} */
  const wanted = ep || (scope.navigator.gpu ? "webgpu" : "wasm");
  for (const key of [`${model.sha256}|${wanted}`, `${model.sha256}|wasm`]) {
    const known = sessions.get(key);
    if (!known) continue;
    loading.get(known)?.add(progress); // still loading: this caller hears its progress too
    return known;
  }
  const key = `${model.sha256}|${wanted}`;
  /** @type {Set<Hear>} */
  const listeners = new Set([progress]);
  /** @type {Promise<Loaded>} */
  const made = load(model, wanted, (p) => { for (const hear of listeners) hear(p); }).then((found) => {
    sessions.set(`${model.sha256}|${found.ep}`, made);
    return found;
  });
  loading.set(made, listeners);
  sessions.set(key, made);
  made.finally(() => loading.delete(made)).catch(() => { if (sessions.get(key) === made) sessions.delete(key); });
  return made;
}

/**
 * @param {DeviceModel} model
 * @param {Ep} wanted
 * @param {Hear} progress
 * @returns {Promise<Loaded>}
 */
async function load(model, wanted, progress) {
  const bytes = await download(model, progress);
  progress({ stage: "starting", progress: 0 });
  /** @type {Ep[]} */
  const order = wanted === "webgpu" ? ["webgpu", "wasm"] : ["wasm"];
  let last;
  for (const name of order) {
    try {
      if (name === "webgpu" && !(await hardwareAdapter())) throw new Error("no hardware WebGPU adapter");
      const made = await ort.InferenceSession.create(bytes, {
        executionProviders: [name], graphOptimizationLevel: "all",
      });
      return { session: made, ep: name };
    } catch (error) {
      last = error; // WebGPU offered but unusable (no adapter, a missing kernel): WebAssembly next
    }
  }
  const why = /** @type {{message?: string} | undefined} */ (last);
  throw new Refused("failed", `the ${model.id} model did not load here: ${why && why.message}`);
}

/**
 * @param {Blob | ImageBitmap} image
 * @returns {Promise<{data: Uint8ClampedArray, w: number, h: number}>}
 */
async function pixels(image) {
  // Upright as the server turns it (EXIF orientation), colours as stored (the server ignores ICC profiles too).
  const bitmap = image instanceof ImageBitmap ? image : await createImageBitmap(image, {
    imageOrientation: "from-image", premultiplyAlpha: "none", colorSpaceConversion: "none",
  }).catch(() => { throw new Refused("notImage", "this browser cannot read that picture"); });
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
  const ctx = context2d(canvas, { willReadFrequently: true });
  ctx.drawImage(bitmap, 0, 0);
  const data = ctx.getImageData(0, 0, bitmap.width, bitmap.height).data;
  return { data, w: bitmap.width, h: bitmap.height };
}

/**
 * @param {OffscreenCanvas} canvas
 * @param {CanvasRenderingContext2DSettings} [settings]
 */
function context2d(canvas, settings) {
  const ctx = canvas.getContext("2d", settings);
  if (!ctx) throw new Refused("failed", "this browser has no 2D canvas in a worker");
  return ctx;
}

// RGBA → RGB and alpha bytes (alpha null when opaque, as the server drops it).
/** @param {Uint8ClampedArray} rgba */
function split(rgba) {
  const n = rgba.length >> 2;
  const rgb = new Uint8Array(n * 3), alpha = new Uint8Array(n);
  let opaque = true;
  for (let p = 0; p < n; p++) {
    rgb[3 * p] = rgba[4 * p]; rgb[3 * p + 1] = rgba[4 * p + 1]; rgb[3 * p + 2] = rgba[4 * p + 2];
    alpha[p] = rgba[4 * p + 3];
    if (alpha[p] !== 255) opaque = false;
  }
  return { rgb, alpha: opaque ? null : alpha };
}

const WARM_SIDE = 128; // the warm-up picture's side: every kernel a paint uses, at a sixteenth of 512 px's work

// anipaint/networks/padding.py alignment_padding: up to a multiple, at least `cells` of them.
/** @type {(n: number, multiple: number, cells: number) => number} */
const target = (n, multiple, cells) => Math.max(Math.ceil(n / multiple) * multiple, cells * multiple);

// RGB bytes h×w → NCHW float32 in [-1, 1] of size H×W: rows/columns past the picture reflected (pad_to_multiple's
// "reflect") or repeated ("replicate", when a pad is as large as the picture, and for pictures edge-padded up to
// the networks' minimum first, as the engine does).
/**
 * @param {Uint8Array} rgb
 * @param {number} w
 * @param {number} h
 * @param {number} W
 * @param {number} H
 * @param {boolean} reflect
 */
function tensor(rgb, w, h, W, H, reflect) {
  const out = new Float32Array(3 * H * W);
  /** @type {(i: number, n: number) => number} */
  const at = (i, n) => (i < n ? i : reflect ? 2 * (n - 1) - i : n - 1);
  for (let y = 0; y < H; y++) {
    const sy = at(y, h);
    for (let x = 0; x < W; x++) {
      const p = (sy * w + at(x, w)) * 3, q = y * W + x;
      out[q] = rgb[p] / 127.5 - 1;
      out[H * W + q] = rgb[p + 1] / 127.5 - 1;
      out[2 * H * W + q] = rgb[p + 2] / 127.5 - 1;
    }
  }
  return out;
}

// Ready before the first photo: the model fetched and checked, the session made, and one run on a small synthetic
// picture. The browser compiles the runtime's WebAssembly quickly and its hot loops again, optimised, in the
// background once they have run: measured in headless Chromium (2 cores), the first 512 px v3-hayao paint took
// 6.0 s cold, 1.7 s after this warm-up and two seconds of choosing a photo, against 1.5 s for later paints.
/**
 * @param {WarmRequest} request
 * @param {Hear} progress
 * @returns {Promise<WarmAnswer>}
 */
async function warm({ model, ep }, progress) {
  const found = await session(model, ep, progress);
  const key = `${model.sha256}|${found.ep}`;
  if (!warmed.has(key)) {
    warmed.add(key);
    const side = target(Math.max(WARM_SIDE, model.min_side), model.multiple, model.min_cells);
    const picture = new Float32Array(3 * side * side).map((_, i) => ((i * 7) % 255) / 127.5 - 1);
    const input = new ort.Tensor("float32", picture, [1, 3, side, side]);
    await oneAtATime(key, () => found.session.run({ [found.session.inputNames[0]]: input }))
      .then((out) => { for (const y of Object.values(out)) y.dispose?.(); })
      .catch(() => { /* a failed warm-up only loses its head start: the paint runs as it would have */ });
    input.dispose?.();
  }
  return { ep: found.ep };
}

// The network's answer (NCHW float32 in [-1, 1], padded) as opaque RGBA bytes of the picture's w×h.
/**
 * @param {ort.Tensor} y
 * @param {number} w
 * @param {number} h
 */
function pictureOf(y, w, h) {
  const [oh, ow] = y.dims.slice(2);
  const data = /** @type {Float32Array} */ (y.data); // the networks answer in float32
  const rgba = new Uint8ClampedArray(w * h * 4);
  for (let yy = 0; yy < h; yy++) {
    for (let xx = 0; xx < w; xx++) {
      const q = yy * ow + xx, p = (yy * w + xx) * 4;
      for (let c = 0; c < 3; c++) {
        const v = Math.min(1, Math.max(-1, data[c * oh * ow + q]));
        rgba[p + c] = Math.round((v + 1) * 127.5);
      }
      rgba[p + 3] = 255;
    }
  }
  return rgba;
}

// One frame of a live stream: its pixels are already at the size to paint (camera.js chose it, a multiple of the
// network's, so nothing is padded in the usual case), so no decode, no resize, no PNG: RGBA in, RGBA out.
/**
 * @param {FrameRequest} request
 * @param {Hear} progress
 * @returns {Promise<FrameAnswer>}
 */
async function paintFrame({ model, frame, ep }, progress) {
  const { session: s, ep: used } = await session(model, ep, progress);
  const { data, width: w, height: h } = frame;
  const { rgb } = split(data);
  const ew = Math.max(w, model.min_side), eh = Math.max(h, model.min_side);
  const W = target(ew, model.multiple, model.min_cells), H = target(eh, model.multiple, model.min_cells);
  const reflect = ew === w && eh === h && W - w < w && H - h < h;
  const input = new ort.Tensor("float32", tensor(rgb, w, h, W, H, reflect), [1, 3, H, W]);
  const t0 = performance.now();
  const outputs = await oneAtATime(`${model.sha256}|${used}`, () => s.run({ [s.inputNames[0]]: input }));
  const runMs = performance.now() - t0;
  const y = outputs[s.outputNames[0]];
  const pixels = pictureOf(y, w, h);
  input.dispose?.();
  y.dispose?.();
  return { pixels, width: w, height: h, ep: used, runMs };
}

/**
 * @param {PaintRequest} request
 * @param {Hear} progress
 * @returns {Promise<PaintAnswer>}
 */
async function paint({ model, image, maxSide, strength, ep }, progress) {
  const { session: s, ep: used } = await session(model, ep, progress);
  progress({ stage: "decode", progress: 0 });
  const src = await pixels(image);
  const [w, h] = fitLongSide(src.w, src.h, maxSide);
  const { rgb: full, alpha: fullAlpha } = split(src.data);
  const rgb = resizeLanczos(full, src.w, src.h, 3, w, h);
  const alpha = fullAlpha && resizeLanczos(fullAlpha, src.w, src.h, 1, w, h);
  // The engine edge-pads a picture under the networks' minimum first, then the network pads to its multiple.
  const ew = Math.max(w, model.min_side), eh = Math.max(h, model.min_side);
  const W = target(ew, model.multiple, model.min_cells), H = target(eh, model.multiple, model.min_cells);
  const reflect = ew === w && eh === h && W - w < w && H - h < h;
  progress({ stage: "paint", progress: 0 });
  const input = new ort.Tensor("float32", tensor(rgb, w, h, W, H, reflect), [1, 3, H, W]);
  const outputs = await oneAtATime(`${model.sha256}|${used}`, () => s.run({ [s.inputNames[0]]: input }));
  const y = outputs[s.outputNames[0]];
  progress({ stage: "encode", progress: 0.9 });
  const rgba = pictureOf(y, w, h);
  if (strength < 1) {
    const photo = new Uint8ClampedArray(w * h * 4);
    for (let p = 0; p < w * h; p++) { photo.set(rgb.subarray(3 * p, 3 * p + 3), 4 * p); photo[4 * p + 3] = 255; }
    mix(toLab(photo), toLab(rgba), strength, rgba);
  }
  if (alpha) for (let p = 0; p < w * h; p++) rgba[4 * p + 3] = alpha[p];
  input.dispose?.();
  y.dispose?.();
  const canvas = new OffscreenCanvas(w, h);
  context2d(canvas).putImageData(new ImageData(rgba, w, h), 0, 0);
  return { png: await canvas.convertToBlob({ type: "image/png" }), width: w, height: h, ep: used };
}

/** @param {MessageEvent} event */
scope.onmessage = async (event) => {
  const request = /** @type {{id: number} & (PaintRequest | WarmRequest | FrameRequest)} */ (event.data);
  const { id } = request;
  /** @type {Hear} */
  const progress = (p) => scope.postMessage({ id, progress: p });
  try {
    if (request.frame) {
      const done = await paintFrame(request, progress);
      scope.postMessage({ id, ...done }, [done.pixels.buffer]); // handed over, not copied
      return;
    }
    const done = await (request.warm ? warm(request, progress) : paint(request, progress));
    scope.postMessage({ id, ...done, loaded: performance.getEntriesByType("resource").map((entry) => entry.name) });
  } catch (error) {
    const reason = (error instanceof Refused && error.reason) || "failed";
    const message = (error instanceof Error && error.message) || String(error);
    scope.postMessage({ id, error: { reason, message } });
  }
};
