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
// REASONS) and stops when `signal` aborts. devicePainter.js paints on this device behind the same interface.

const POLL_MS = 400;

export const REASONS = ["network", "gone", "busy", "tooBig", "notImage", "style", "timeout", "failed", "cancelled",
  "checksum", "deviceDecode", "device"]; // the last three from the device painter

export class PaintError extends Error {
  constructor(reason, detail = "", retryAfter = 0) {
    super(detail || reason);
    this.reason = reason;
    this.detail = detail;
    this.retryAfter = retryAfter;
  }
}

const cancelled = () => new PaintError("cancelled");

// True once /readyz answers 200; false while it does not; throws when the server cannot be reached.
export async function isReady() {
  return (await fetch("/readyz", { cache: "no-store" })).ok;
}

// The server's limits and defaults, or null (the page's own defaults then hold).
export async function getConfig() {
  const res = await fetch("/api/config");
  return res.ok ? res.json() : null;
}

export async function getStyles() {
  const res = await fetch("/api/styles");
  if (!res.ok) throw new Error(String(res.status));
  return res.json();
}

// A style's sample picture: {blob, pending} (pending: a placeholder until the real one is painted).
export async function getThumbnail(url, fresh) {
  const res = await fetch(url, { cache: fresh ? "no-store" : "default" });
  if (!res.ok) return null;
  return { pending: res.headers.get("X-Thumbnail") === "pending", blob: await res.blob() };
}

// A refused request as a PaintError.
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
function jobError(info) {
  const reason = { image: "notImage", style: "style", busy: "busy" }[info.error_kind] || "failed";
  return new PaintError(reason, reason === "busy" ? "" : info.error || "");
}

function imageForm(file) {
  const body = new FormData();
  body.append("image", file, file.name || "pasted.png");
  return body;
}

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

const pause = (ms, signal) => new Promise((resolve, reject) => {
  const timer = setTimeout(resolve, ms);
  signal?.addEventListener("abort", () => { clearTimeout(timer); reject(cancelled()); }, { once: true });
});

// Paints on the server: queues a job, polls it, fetches the PNG. Abort deletes the job.
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
    return {
      blob: await png.blob(), width: info.width, height: info.height, style: info.style,
      facesFound: info.faces_found || 0, engine: info.engine, mediaType: info.media_type || "image/png",
      frames: info.frames || 0,
    };
  },
};

// "done" still reads as running: the picture is fetched and decoded after the job reports done.
function progressOf(info) {
  const stage = info.status === "queued" ? "queued" : info.stage || info.status;
  return {
    stage, progress: info.progress || 0, position: info.position || 0, waiting: info.status === "queued",
    frame: info.frame || 0, frames: info.frames || 0, eta: info.eta_seconds ?? null,
  };
}
