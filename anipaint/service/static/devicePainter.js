// Painting on this device behind the same paint(file, options, onProgress, signal) as api.js's serverPainter, so
// that job.js runs either: device.js paints in a Web Worker with ONNX Runtime Web. The photo is handed to that
// worker and never sent anywhere; no request made here carries it.

import { PaintError } from "./api.js";
import { DeviceError, deviceFiles, paintOnDevice } from "./device.js";
import { keepForOffline } from "./offline.js";

// device.js's reasons → the page's (messages.js): a photo the worker cannot decode (HEIC in most browsers) is
// told apart from a file that is no picture, as the server could still paint it.
const REASONS = {
  style: "style", tooBig: "tooBig", checksum: "checksum", network: "network", notImage: "deviceDecode",
  cancelled: "cancelled", unsupported: "device", failed: "device",
};

// The model's download has a fraction; the painting itself is one call into the runtime, so it has none.
function progressOf(p) {
  if (p.stage === "download") return { stage: "download", progress: p.total ? p.loaded / p.total : 0 };
  if (p.stage === "paint") return { stage: "paint", progress: 0, unmeasured: true };
  return { stage: p.stage, progress: p.progress || 0 };
}

export const devicePainter = {
  where: "device",
  async paint(file, options, onProgress, signal) {
    onProgress({ stage: "starting", progress: 0 });
    let info = {};
    let blob;
    try {
      blob = await paintOnDevice(file, {
        style: options.style, maxSide: options.maxSide, strength: options.strength, signal,
        onProgress: (p) => onProgress(progressOf(p)), details: (d) => { info = d; },
      });
    } catch (error) {
      if (!(error instanceof DeviceError)) throw new PaintError("device", String((error && error.message) || error));
      throw new PaintError(REASONS[error.reason] || "device", error.message);
    }
    keepForOffline(deviceFiles());
    return { blob, width: info.width, height: info.height, style: options.style, facesFound: 0, engine: info.ep };
  },
};
