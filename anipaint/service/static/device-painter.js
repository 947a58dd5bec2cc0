// @ts-check
// Painting on this device behind the same paint(file, options, onProgress, signal) as api.js's serverPainter, so
// that job.js runs either: device.js paints in a Web Worker with ONNX Runtime Web. The photo is handed to that
// worker and never sent anywhere; no request made here carries it.

import { PaintError } from "./api.js";
import { DeviceError, deviceFiles, paintOnDevice } from "./device.js";

/** @import { Painter, Progress, Reason } from "./api.js" */
/** @import { DeviceProgress, DeviceReason, Ep } from "./device.js" */

// device.js's reasons → the page's (messages.js): a photo the worker cannot decode (HEIC in most browsers) is
// told apart from a file that is no picture, as the server could still paint it.
/** @type {Record<DeviceReason, Reason>} */
const REASONS = {
  style: "style", tooBig: "tooBig", checksum: "checksum", network: "network", notImage: "deviceDecode",
  cancelled: "cancelled", unsupported: "device", failed: "device",
  noCamera: "device", refused: "device", inUse: "device", // the live camera's (camera.js): no paint has them
};

// The model's download has a fraction; the painting itself is one call into the runtime, so it has none.
/**
 * @param {DeviceProgress} p
 * @returns {Progress}
 */
function progressOf(p) {
  if (p.stage === "download") return { stage: "download", progress: p.total ? p.loaded / p.total : 0 };
  if (p.stage === "paint") return { stage: "paint", progress: 0, unmeasured: true };
  return { stage: p.stage, progress: p.progress || 0 };
}

/**
 * The device painter. `keep(urls)` hands what painting here has loaded (the runtime, the model) to the page's
 * service worker after each paint, so that the page paints offline next time (offline.js).
 * @param {(urls: string[]) => void} keep
 * @returns {Painter}
 */
export function devicePainter(keep) {
  return {
    where: "device",
    async paint(file, options, onProgress, signal) {
      onProgress({ stage: "starting", progress: 0 });
      /** @type {{width?: number, height?: number, ep?: Ep}} */
      let info = {};
      let blob;
      try {
        blob = await paintOnDevice(file, {
          style: options.style, maxSide: options.maxSide, strength: options.strength, signal,
          onProgress: (p) => onProgress(progressOf(p)), details: (d) => { info = d; },
        });
      } catch (error) {
        if (!(error instanceof DeviceError)) {
          throw new PaintError("device", error instanceof Error ? error.message || String(error) : String(error));
        }
        throw new PaintError(REASONS[error.reason] || "device", error.message);
      }
      keep(deviceFiles());
      // `details` has been called by the time the paint resolves.
      const { width, height, ep } = /** @type {{width: number, height: number, ep: Ep}} */ (info);
      return { blob, width, height, style: options.style, facesFound: 0, engine: ep };
    },
  };
}
