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
// failed. deviceFiles() lists the URLs painting here has loaded, for a page's service worker to keep.

export const MAX_DEVICE_SIDE = 1024;

export class DeviceError extends Error {
  constructor(reason, message) {
    super(message);
    this.name = "DeviceError";
    this.reason = reason;
  }
}

let manifest = null; // Promise of /api/device/styles
let worker = null;
let nextId = 0;
const waiting = new Map(); // message id → {resolve, reject, onProgress}
const files = new Set(); // every URL the device painter has loaded: its worker's script, modules, runtime, models

// The rows of /api/device/styles (offline: the service worker's copy); `fresh` asks again.
export function deviceManifest({ fresh = false } = {}) {
  if (!manifest || fresh) {
    manifest = fetch("/api/device/styles").then((res) => {
      if (!res.ok) throw new DeviceError("network", `the device styles could not be read (HTTP ${res.status})`);
      return res.json();
    });
    manifest.catch(() => { manifest = null; });
  }
  return manifest;
}

// Why this browser cannot paint at all, or "" when it can.
export function deviceSupport() {
  if (typeof WebAssembly !== "object" || typeof Worker !== "function" || typeof OffscreenCanvas !== "function") {
    return "this browser lacks WebAssembly, module workers or OffscreenCanvas";
  }
  if (!globalThis.crypto || !crypto.subtle) return "this page is not in a secure context (https or localhost)";
  return "";
}

// The ids of the styles this browser can paint now.
export async function deviceStyles() {
  if (deviceSupport()) return [];
  return (await deviceManifest()).filter((s) => s.on_device).map((s) => s.id);
}

// The URLs painting on this device has loaded so far. A worker started before the page's service worker took
// control fetched them past it; a page hands these to it to keep them for offline use (the page's offline.js).
export function deviceFiles() {
  return [...files];
}

function ensureWorker() {
  if (worker) return worker;
  const script = new URL("./device-worker.js", import.meta.url);
  files.add(script.href);
  worker = new Worker(script, { type: "module" });
  worker.onmessage = (event) => {
    const { id, progress, error, ...done } = event.data;
    const job = waiting.get(id);
    if (!job) return;
    if (progress) { job.onProgress?.(progress); return; }
    waiting.delete(id);
    if (error) job.reject(new DeviceError(error.reason, error.message));
    else job.resolve(done);
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

// The style's row of the manifest, or a DeviceError saying why this browser cannot paint it.
async function deviceModel(style) {
  const unsupported = deviceSupport();
  if (unsupported) throw new DeviceError("unsupported", `cannot paint on this device: ${unsupported}`);
  const rows = await deviceManifest();
  const model = rows.find((row) => row.id === style);
  if (!model) throw new DeviceError("style", `unknown style ${style}`);
  if (!model.on_device) throw new DeviceError("style", `${style} cannot paint on this device: ${model.reason}`);
  return model;
}

// One message to the worker; resolves with its answer. `signal` cancels: the call is refused as cancelled at once.
// A run in WebAssembly cannot be stopped halfway, so the worker goes (a new one starts next time), unless other
// calls are waiting on it: then it finishes and the cancelled call's answer is dropped.
function ask(message, onProgress, signal) {
  if (signal?.aborted) return Promise.reject(new DeviceError("cancelled", "cancelled"));
  const id = ++nextId;
  const w = ensureWorker();
  return new Promise((resolve, reject) => {
    waiting.set(id, { resolve, reject, onProgress });
    signal?.addEventListener("abort", () => {
      if (!waiting.delete(id)) return;
      reject(new DeviceError("cancelled", "cancelled"));
      if (waiting.size) return;
      w.terminate();
      if (worker === w) { worker = null; ready.clear(); }
    }, { once: true });
    w.postMessage({ id, ...message });
  }).then((result) => {
    for (const url of result.loaded || []) files.add(url);
    return result;
  });
}

const ready = new Map(); // style|ep → Promise of prepareOnDevice's answer, so that asking twice loads once

// Get `style` ready to paint before there is a photo: its model downloaded and checked (reported to onProgress as
// a paint's download is), the runtime started and one warm-up run made, in the background. The first
// paintOnDevice then skips all that, and runs optimised code sooner: the browser optimises the runtime's hot code
// while the person chooses a photo. Resolves with {ep}; rejects with a DeviceError as paintOnDevice would (a
// damaged model: "checksum", and the next call fetches it again).
export function prepareOnDevice(style, { ep, onProgress, signal } = {}) {
  const key = `${style}|${ep || ""}`;
  if (!ready.has(key)) {
    const made = deviceModel(style)
      .then((model) => ask({ model, ep, warm: true }, onProgress, signal))
      .then((result) => ({ ep: result.ep }));
    made.catch(() => { if (ready.get(key) === made) ready.delete(key); });
    ready.set(key, made);
  }
  return ready.get(key);
}

// Paint `image` (a Blob or an ImageBitmap) in `style`; resolves with a PNG Blob. `details(info)` also gets
// {width, height, ep} (ep: "webgpu" or "wasm"); `ep` forces one execution provider; `signal` cancels.
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
  const result = await ask({ model, image, maxSide: side, strength: s, ep }, onProgress, signal);
  onProgress?.({ stage: "done", progress: 1 });
  details?.({ width: result.width, height: result.height, ep: result.ep });
  return result.png;
}
