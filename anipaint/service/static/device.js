// @ts-check
// Painting on this device, for any page of the same origin:
//
//   import { paintOnDevice, deviceStyles } from "/static/device.js";
//   const ids = await deviceStyles();                  // the styles this browser can paint, e.g. ["v3-hayao", …]
//   const png = await paintOnDevice(file, { style: "v3-hayao", maxSide: 512, strength: 1,
//                                           onProgress: (p) => console.log(p) });   // a PNG Blob
//   prepareOnDevice("v3-hayao");   // optional, before a photo is chosen: the first paint then starts ready
//
// The photo never leaves the browser: the worker (device-worker.js) downloads the style's ONNX file once
// (checked against its sha256; the service worker keeps it for offline use) and paints with ONNX Runtime Web,
// with the server's preprocessing and strength blend. onProgress gets {stage: "download", loaded, total} (bytes),
// then {stage: "starting" | "decode" | "paint" | "encode", progress} and finally {stage: "done", progress: 1}.
// Errors are DeviceError, with a `reason`: style, tooBig, checksum, network, notImage, unsupported, cancelled,
// failed (and for the live camera, camera.js: noCamera, refused, inUse). paintFrame() paints one frame of a live
// stream (camera.js), as pixels in and pixels out, in the same worker and session. deviceFiles() lists the URLs painting here has loaded, for a page's service worker to keep.

/**
 * A row of /api/device/styles (anipaint/service/routes/device.py DeviceStyleOut).
 * @typedef {object} DeviceRow
 * @property {string} id
 * @property {string} label
 * @property {boolean} on_device  whether this browser can paint it now
 * @property {string} state  ready, not_ready (being made or not made yet) or unsupported
 * @property {string | null} reason  why it cannot paint on the device
 * @property {string | null} [url]  the ONNX file
 * @property {string | null} [sha256]
 * @property {number | null} [bytes]
 * @property {string | null} [weights]
 * @property {number | null} [multiple]  pad H and W to a multiple of this,
 * @property {number | null} [min_cells]  and to at least this many multiples
 * @property {number | null} [min_side]  edge-pad smaller pictures to this first
 * @property {{url: string, sha256: string, bytes: number} | null} [live]  the model for a live camera's frames
 *   (its convolutions in int8), where one pays; same sizes, same input
 */

/**
 * A row that can paint on the device: its model's fields are all there.
 * @typedef {DeviceRow & {url: string, sha256: string, bytes: number, multiple: number, min_cells: number,
 *   min_side: number}} DeviceModel
 */

/** @typedef {"webgpu" | "wasm"} Ep  the execution provider */

/**
 * What onProgress hears.
 * @typedef {{stage: "download", loaded: number, total: number}
 *   | {stage: "starting" | "decode" | "paint" | "encode" | "done", progress: number}} DeviceProgress
 */

/**
 * @typedef {"style" | "tooBig" | "checksum" | "network" | "notImage" | "unsupported" | "cancelled" | "failed"
 *   | "noCamera" | "refused" | "inUse"} DeviceReason
 */

/**
 * The messages device-worker.js takes: a paint, getting a style ready (`warm`) before there is a photo, or one
 * frame of a live stream (`frame`: RGBA pixels at the size to paint, no resizing, no PNG).
 * @typedef {{model: DeviceModel, image: Blob | ImageBitmap, maxSide: number, strength: number, ep?: Ep,
 *   warm?: false, frame?: undefined}} PaintRequest
 * @typedef {{model: DeviceModel, ep?: Ep, warm: true, frame?: undefined}} WarmRequest
 * @typedef {{model: DeviceModel, ep?: Ep, warm?: false, frame: {data: Uint8ClampedArray<ArrayBuffer>, width: number,
 *   height: number}}} FrameRequest
 */

/**
 * What it answers, with the message's id: {progress} while it works, then what it made or {error}.
 * @typedef {{ep: Ep, loaded?: string[]}} WarmAnswer  `loaded`: every URL the worker has fetched
 * @typedef {WarmAnswer & {png: Blob, width: number, height: number}} PaintAnswer
 * @typedef {WarmAnswer & {pixels: Uint8ClampedArray<ArrayBuffer>, width: number, height: number, runMs: number}} FrameAnswer
 *   runMs: the network's run alone
 * @typedef {{id: number, progress?: DeviceProgress, error?: {reason: DeviceReason, message: string}}
 *   & Partial<PaintAnswer>} WorkerReply
 */

export const MAX_DEVICE_SIDE = 1024;

export class DeviceError extends Error {
  /**
   * @param {DeviceReason} reason
   * @param {string} message
   */
  constructor(reason, message) {
    super(message);
    this.name = "DeviceError";
    this.reason = reason;
  }
}

// This module's own bookkeeping, not the page's state: other pages import this module without the page's store
// (see the top), and nothing here is shown; the page keeps what it shows (the rows, the switch, a damaged model) in
// its store (device-mode.js). One worker and its calls in flight, the manifest read once, the files loaded.
/** @type {Promise<DeviceRow[]> | null} */
let manifest = null; // Promise of /api/device/styles
/** @type {Worker | null} */
let worker = null;
let nextId = 0;
/**
 * message id → the call waiting for its answer
 * @type {Map<number, {resolve: (answer: WarmAnswer) => void, reject: (error: DeviceError) => void,
 *   onProgress?: (p: DeviceProgress) => void}>}
 */
const waiting = new Map();
/** @type {Set<string>} */
const files = new Set(); // every URL the device painter has loaded: its worker's script, modules, runtime, models

// The rows of /api/device/styles (offline: the service worker's copy); `fresh` asks again.
/**
 * @param {{fresh?: boolean}} [options]
 * @returns {Promise<DeviceRow[]>}
 */
export function deviceManifest({ fresh = false } = {}) {
  if (!manifest || fresh) {
    manifest = fetch("/api/device/styles").then((res) => {
      if (!res.ok) throw new DeviceError("network", `the device styles could not be read (HTTP ${res.status})`);
      return res.json();
    });
    manifest.catch(() => { manifest = null; });
  }
  return /** @type {Promise<DeviceRow[]>} */ (manifest);
}

// Why this browser cannot paint at all, or "" when it can.
/** @returns {string} */
export function deviceSupport() {
  if (typeof WebAssembly !== "object" || typeof Worker !== "function" || typeof OffscreenCanvas !== "function") {
    return "this browser lacks WebAssembly, module workers or OffscreenCanvas";
  }
  if (!globalThis.crypto || !crypto.subtle) return "this page is not in a secure context (https or localhost)";
  return "";
}

// The ids of the styles this browser can paint now.
/** @returns {Promise<string[]>} */
export async function deviceStyles() {
  if (deviceSupport()) return [];
  return (await deviceManifest()).filter((s) => s.on_device).map((s) => s.id);
}

// The URLs painting on this device has loaded so far. A worker started before the page's service worker took
// control fetched them past it; a page hands these to it to keep them for offline use (the page's offline.js).
/** @returns {string[]} */
export function deviceFiles() {
  return [...files];
}

/** @returns {Worker} */
function ensureWorker() {
  if (worker) return worker;
  const script = new URL("./device-worker.js", import.meta.url);
  files.add(script.href);
  worker = new Worker(script, { type: "module" });
  worker.onmessage = (event) => {
    const { id, progress, error, ...done } = /** @type {WorkerReply} */ (event.data);
    const job = waiting.get(id);
    if (!job) return;
    if (progress) { job.onProgress?.(progress); return; }
    waiting.delete(id);
    if (error) job.reject(new DeviceError(error.reason, error.message));
    else job.resolve(/** @type {WarmAnswer} */ (done));
  };
  worker.onerror = (event) => {
    const why = new DeviceError("failed", `the device painter stopped: ${event.message || "script error"}`);
    for (const job of waiting.values()) job.reject(why);
    waiting.clear();
    worker = null;
    ready.clear();
  };
  return worker;
}

// The style's row of the manifest (its size multiple and minimum, for a live view's working size), or a DeviceError saying why this browser cannot paint it.
/**
 * @param {string | undefined} style
 * @returns {Promise<DeviceModel>}
 */
export async function deviceModel(style) {
  const unsupported = deviceSupport();
  if (unsupported) throw new DeviceError("unsupported", `cannot paint on this device: ${unsupported}`);
  const rows = await deviceManifest();
  const model = rows.find((row) => row.id === style);
  if (!model) throw new DeviceError("style", `unknown style ${style}`);
  if (!model.on_device) throw new DeviceError("style", `${style} cannot paint on this device: ${model.reason}`);
  return /** @type {DeviceModel} */ (model); // on_device: the server sent its model's fields
}

// One message to the worker; resolves with its answer. `signal` cancels: the call is refused as cancelled at once.
// A run in WebAssembly cannot be stopped halfway, so the worker goes (a new one starts next time), unless other
// calls are waiting on it: then it finishes and the cancelled call's answer is dropped.
/**
 * @param {PaintRequest | WarmRequest | FrameRequest} message
 * @param {((p: DeviceProgress) => void) | undefined} onProgress
 * @param {AbortSignal | undefined} signal
 * @returns {Promise<WarmAnswer>}
 */
function ask(message, onProgress, signal) {
  if (signal?.aborted) return Promise.reject(new DeviceError("cancelled", "cancelled"));
  const id = ++nextId;
  const w = ensureWorker();
  return /** @type {Promise<WarmAnswer>} */ (new Promise((resolve, reject) => {
    waiting.set(id, { resolve, reject, onProgress });
    signal?.addEventListener("abort", () => {
      if (!waiting.delete(id)) return;
      reject(new DeviceError("cancelled", "cancelled"));
      if (waiting.size) return;
      w.terminate();
      if (worker === w) { worker = null; ready.clear(); }
    }, { once: true });
    // A frame's pixels are handed over, not copied: the caller made them for this call.
    w.postMessage({ id, ...message }, message.frame ? [message.frame.data.buffer] : []);
  })).then((result) => {
    for (const url of result.loaded || []) files.add(url);
    return result;
  });
}

/** @type {Map<string, Promise<{ep: Ep}>>} */
const ready = new Map(); // style|ep → Promise of prepareOnDevice's answer, so that asking twice loads once

// Get `style` ready to paint before there is a photo: its model downloaded and checked (reported to onProgress as
// a paint's download is), the runtime started and one warm-up run made, in the background. The first
// paintOnDevice then skips all that, and runs optimised code sooner: the browser optimises the runtime's hot code
// while the person chooses a photo. Resolves with {ep}; rejects with a DeviceError as paintOnDevice would (a
// damaged model: "checksum", and the next call fetches it again).
/**
 * @param {string} style
 * @param {{ep?: Ep, onProgress?: (p: DeviceProgress) => void, signal?: AbortSignal, live?: boolean}} [options]
 *   live: the model a live camera's frames are painted with (paintFrame's)
 * @returns {Promise<{ep: Ep}>}
 */
export function prepareOnDevice(style, { ep, onProgress, signal, live = false } = {}) {
  const key = `${style}|${ep || ""}|${live}`;
  if (!ready.has(key)) {
    const made = deviceModel(style)
      .then((model) => ask({ model: live ? liveModel(model) : model, ep, warm: true }, onProgress, signal))
      .then((result) => ({ ep: result.ep }));
    made.catch(() => { if (ready.get(key) === made) ready.delete(key); });
    ready.set(key, made);
  }
  return /** @type {Promise<{ep: Ep}>} */ (ready.get(key));
}

// Paint `image` (a Blob or an ImageBitmap) in `style`; resolves with a PNG Blob. `details(info)` also gets
// {width, height, ep} (ep: "webgpu" or "wasm"); `ep` forces one execution provider; `signal` cancels.
/**
 * @param {Blob | ImageBitmap} image
 * @param {{style?: string, maxSide?: number | string, strength?: number | string,
 *   onProgress?: (p: DeviceProgress) => void, signal?: AbortSignal, ep?: Ep,
 *   details?: (info: {width: number, height: number, ep: Ep}) => void}} [options]
 * @returns {Promise<Blob>}
 */
export async function paintOnDevice(image, {
  style, maxSide = 512, strength = 1, onProgress, signal, ep, details,
} = {}) {
  const unsupported = deviceSupport();
  if (unsupported) throw new DeviceError("unsupported", `cannot paint on this device: ${unsupported}`);
  if (!(image instanceof Blob) && !(typeof ImageBitmap === "function" && image instanceof ImageBitmap)) {
    throw new DeviceError("notImage", "paintOnDevice takes a Blob or an ImageBitmap");
  }
  const side = Number(maxSide);
  if (!Number.isFinite(side) || side < 32) throw new DeviceError("tooBig", "maxSide must be a number from 32 to 1024");
  if (side > MAX_DEVICE_SIDE) {
    throw new DeviceError("tooBig", `maxSide ${side} is over ${MAX_DEVICE_SIDE}, the most this device paints: `
      + "paint it on the server instead (POST /predict or /api/jobs)");
  }
  const s = Number(strength);
  if (!(s >= 0 && s <= 1)) throw new DeviceError("failed", "strength must be between 0 and 1");
  const model = await deviceModel(style);
  const asked = ask({ model, image, maxSide: side, strength: s, ep }, onProgress, signal);
  const result = /** @type {PaintAnswer} */ (await asked); // a paint's answer has its picture
  onProgress?.({ stage: "done", progress: 1 });
  details?.({ width: result.width, height: result.height, ep: result.ep });
  return result.png;
}

// The model a live stream's frames are painted with: the style's int8 one where the server made one (it runs
// faster in WebAssembly; a picture taken while live is painted by the full one), else the full one.
/**
 * @param {DeviceModel} model
 * @returns {DeviceModel}
 */
function liveModel(model) {
  return model.live ? { ...model, ...model.live } : model;
}

// Paint one frame of a live stream: `frame`'s pixels at the size to paint (camera.js makes them, at a multiple of
// the style's size), handed to the worker (the ImageData's buffer is transferred: it is unusable here after). Resolves
// with the painted ImageData of the same size, the execution provider and the network's run time alone. `live`
// false: with the style's full model rather than its live one (for comparisons).
/**
 * @param {ImageData} frame
 * @param {{style: string, ep?: Ep, signal?: AbortSignal, live?: boolean}} options
 * @returns {Promise<{painted: ImageData, ep: Ep, runMs: number}>}
 */
export async function paintFrame(frame, { style, ep, signal, live = true }) {
  const full = await deviceModel(style);
  const model = live ? liveModel(full) : full;
  const { data, width, height } = frame;
  const answer = /** @type {FrameAnswer} */ (await ask({ model, ep, frame: { data, width, height } }, undefined, signal));
  return { painted: new ImageData(answer.pixels, answer.width, answer.height), ep: answer.ep, runMs: answer.runMs };
}
