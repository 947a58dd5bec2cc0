// The photo: chosen, dropped or pasted, checked before anything is sent, and shown in the drop zone. A photo this
// browser cannot decode (HEIC on Chrome and Firefox) is shown, compared and re-blended from the server's upright
// PNG of it (api.js getPreview), fetched at the chosen size so that it has the painted picture's size; the photo
// itself is still what is uploaded to paint. Painting on this device, nothing is sent: such a photo is refused.
// A video or animated picture (clip.js tells) is shown as it is, muted: no decode test, no server preview.

import { getPreview } from "./api.js";
import { clipKind } from "./clip.js";
import { clearMessage, clipLimits, limits, showMessage, showPaintError } from "./messages.js";

const $ = (id) => document.getElementById(id);

// photo → {size, blob}: the server's PNG of a photo this browser cannot decode, at that size option.
const previews = new WeakMap();
let choosing = null; // the photo being read: the last one chosen wins over a slower earlier one

// What the page draws and re-blends for a photo: the photo itself, or the server's PNG of it.
export const drawable = (file) => (previews.has(file) ? previews.get(file).blob : file);

async function decodes(file) {
  try {
    (await createImageBitmap(file)).close();
    return true;
  } catch (_) {
    return false;
  }
}

// The server's PNG of `file` at the chosen size (asked again if the size changed meanwhile), kept for drawable().
// Rejects with the PaintError of a refused or failed request.
async function fetchPreview(store, file) {
  let size, blob;
  do {
    size = store.state.options.size;
    blob = await getPreview(file, size);
  } while (size !== store.state.options.size);
  previews.set(file, { size, blob });
}

// Shows `file` (its drawable), freeing the URL shown before unless a paint or the result still uses it.
function show(store, file, patch = {}) {
  const s = store.state;
  const inUse = [s.job && s.job.beforeUrl, s.result && s.result.beforeUrl];
  if (s.fileUrl && !inUse.includes(s.fileUrl)) URL.revokeObjectURL(s.fileUrl);
  store.update({ file, fileUrl: URL.createObjectURL(drawable(file)), ...patch });
}

const pictureOrVideo = (type) => type.startsWith("image/") || type.startsWith("video/");

export async function setFile(store, file) {
  if (!file) return;
  const s = store.state;
  if (file.type && !pictureOrVideo(file.type)) {
    showMessage(store, "error", "err.notImage", file.name);
    return;
  }
  choosing = file;
  let clip;
  try { clip = await clipKind(file); } catch (_) { clip = null; } // unreadable: the checks below say so
  if (choosing !== file) return;
  if (clip && s.config && file.size > s.config.video_max_bytes) {
    showMessage(store, "error", "err.clipTooBig", { key: "err.tooBig.clip", vars: clipLimits(s) });
    return;
  }
  if (!clip && s.config && file.size > s.config.max_upload_bytes) {
    showMessage(store, "error", "err.tooBig", { key: "err.tooBig.limit", vars: limits(s) });
    return;
  }
  clearMessage(store);
  if (clip) { show(store, file, { clip, phase: "ready" }); return; }
  try {
    if (!(await decodes(file)) && choosing === file) {
      if (store.state.device.on) { showMessage(store, "error", "err.deviceDecode", file.name); return; }
      await fetchPreview(store, file);
    }
  } catch (error) {
    if (choosing === file) showPaintError(store, error);
    return;
  }
  if (choosing === file) show(store, file, { clip: null, phase: "ready" });
}

// Another size chosen: a photo shown from the server's PNG gets one at that size, the painted picture's.
async function followSize(store) {
  const { file, options } = store.state;
  const preview = file && previews.get(file);
  if (!preview || preview.size === options.size || store.state.device.on) return;
  try {
    await fetchPreview(store, file);
  } catch (error) {
    if (store.state.file === file) showPaintError(store, error);
    return;
  }
  if (store.state.file === file) show(store, file);
}

function drawPhoto(s) {
  const preview = $("preview");
  const video = $("clip-preview");
  const name = (s.file && s.file.name) || "";
  const moving = s.clip === "video";
  if (s.fileUrl && !moving) preview.src = s.fileUrl;
  preview.hidden = !s.fileUrl || moving;
  if (moving) video.src = s.fileUrl;
  else if (video.getAttribute("src")) { video.removeAttribute("src"); video.load(); }
  video.hidden = !moving;
  $("file-name").textContent = name;
  $("file-name").hidden = !name;
  $("dropzone").dataset.state = s.file ? "filled" : "empty";
}

export function watchPhoto(store) {
  store.watch((s) => [s.file, s.fileUrl, s.clip], drawPhoto);
  store.watch((s) => [s.options.size, s.device.on], () => followSize(store));
  store.watch((s) => [s.dragging], (s) => $("dropzone").classList.toggle("dragging", s.dragging));

  const zone = $("dropzone");
  const input = $("file-input");
  zone.addEventListener("click", () => input.click());
  zone.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") { e.preventDefault(); input.click(); }
  });
  input.addEventListener("change", () => { setFile(store, input.files[0]); input.value = ""; });
  for (const name of ["dragenter", "dragover"]) {
    zone.addEventListener(name, (e) => { e.preventDefault(); if (!store.state.dragging) store.update({ dragging: true }); });
  }
  for (const name of ["dragleave", "dragend", "drop"]) {
    zone.addEventListener(name, () => store.update({ dragging: false }));
  }
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    if (e.dataTransfer && e.dataTransfer.files.length) setFile(store, e.dataTransfer.files[0]);
  });
  window.addEventListener("dragover", (e) => e.preventDefault());
  window.addEventListener("drop", (e) => e.preventDefault());
  document.addEventListener("paste", (e) => {
    const items = (e.clipboardData && e.clipboardData.items) || [];
    for (const item of items) {
      if (item.kind === "file" && pictureOrVideo(item.type)) {
        e.preventDefault();
        setFile(store, item.getAsFile());
        return;
      }
    }
  });
}
