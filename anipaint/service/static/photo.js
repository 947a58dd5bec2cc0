// @ts-check
// The photo: chosen, dropped or pasted, checked before anything is sent, and shown in the drop zone. A photo this
// browser cannot decode (HEIC on Chrome and Firefox) is shown, compared and re-blended from the server's upright
// PNG of it (api.js getPreview), fetched at the chosen size so that it has the painted picture's size; the photo
// itself is still what is uploaded to paint. Painting on this device, nothing is sent: such a photo is refused.
// A video or animated picture (clip.js tells) is shown as it is, muted: no decode test, no server preview.

import { getPreview } from "./api.js";
import { clipKind } from "./clip.js";
import { $ } from "./dom.js";
import { clearMessage, clipLimits, limits, showMessage, showPaintError } from "./messages.js";

/** @import { PageStore, State } from "./store.js" */

// What the page draws and re-blends for a photo: the photo itself, or the server's PNG of it (state.preview).
/**
 * @param {File} file
 * @param {State["preview"]} preview
 * @returns {Blob}
 */
export const drawable = (file, preview) => (preview ? preview.blob : file);

/** @param {Blob} file */
async function decodes(file) {
  try {
    (await createImageBitmap(file)).close();
    return true;
  } catch (_) {
    return false;
  }
}

// The server's PNG of `file` at the chosen size (asked again if the size changed meanwhile), for state.preview.
// Rejects with the PaintError of a refused or failed request.
/**
 * @param {PageStore} store
 * @param {File} file
 * @returns {Promise<NonNullable<State["preview"]>>}
 */
async function fetchPreview(store, file) {
  let size, blob;
  do {
    size = store.state.options.size;
    blob = await getPreview(file, size);
  } while (size !== store.state.options.size);
  return { size, blob };
}

// Shows `file` (its drawable: `preview`, the server's PNG of it, or itself), freeing the URL shown before unless a
// paint or the result still uses it.
/**
 * @param {PageStore} store
 * @param {File} file
 * @param {State["preview"]} preview
 * @param {Partial<State>} [patch]
 */
function show(store, file, preview, patch = {}) {
  const s = store.state;
  const inUse = [s.job && s.job.beforeUrl, s.result && s.result.beforeUrl];
  if (s.fileUrl && !inUse.includes(s.fileUrl)) URL.revokeObjectURL(s.fileUrl);
  store.update({ file, preview, fileUrl: URL.createObjectURL(drawable(file, preview)), ...patch });
}

/** @param {string} type */
const pictureOrVideo = (type) => type.startsWith("image/") || type.startsWith("video/");

/**
 * @param {PageStore} store
 * @param {File | null | undefined} file
 */
export async function setFile(store, file) {
  if (!file) return;
  const s = store.state;
  if (file.type && !pictureOrVideo(file.type)) {
    showMessage(store, "error", "err.notImage", file.name);
    return;
  }
  store.update({ choosing: file }); // the last one chosen wins over a slower earlier one
  const chosen = () => store.state.choosing === file;
  let clip;
  try { clip = await clipKind(file); } catch (_) { clip = null; } // unreadable: the checks below say so
  if (!chosen()) return;
  if (clip && s.config && file.size > s.config.video_max_bytes) {
    showMessage(store, "error", "err.clipTooBig", { key: "err.tooBig.clip", vars: clipLimits(s) });
    return;
  }
  if (!clip && s.config && file.size > s.config.max_upload_bytes) {
    showMessage(store, "error", "err.tooBig", { key: "err.tooBig.limit", vars: limits(s) });
    return;
  }
  clearMessage(store);
  if (clip) { show(store, file, null, { clip, phase: "ready" }); return; }
  let preview = null;
  try {
    if (!(await decodes(file)) && chosen()) {
      if (store.state.device.on) { showMessage(store, "error", "err.deviceDecode", file.name); return; }
      preview = await fetchPreview(store, file);
    }
  } catch (error) {
    if (chosen()) showPaintError(store, error);
    return;
  }
  if (chosen()) show(store, file, preview, { clip: null, phase: "ready" });
}

// Another size chosen: a photo shown from the server's PNG gets one at that size, the painted picture's.
/** @param {PageStore} store */
async function followSize(store) {
  const { file, preview, options } = store.state;
  if (!file || !preview || preview.size === options.size || store.state.device.on) return;
  let fresh;
  try {
    fresh = await fetchPreview(store, file);
  } catch (error) {
    if (store.state.file === file) showPaintError(store, error);
    return;
  }
  if (store.state.file === file) show(store, file, fresh);
}

/** @param {State} s */
function drawPhoto(s) {
  const preview = /** @type {HTMLImageElement} */ ($("preview"));
  const video = /** @type {HTMLVideoElement} */ ($("clip-preview"));
  const name = (s.file && s.file.name) || "";
  const moving = s.clip === "video";
  if (s.fileUrl && !moving) preview.src = s.fileUrl;
  preview.hidden = !s.fileUrl || moving;
  if (moving && s.fileUrl) video.src = s.fileUrl;
  else if (video.getAttribute("src")) { video.removeAttribute("src"); video.load(); }
  video.hidden = !moving;
  $("file-name").textContent = name;
  $("file-name").hidden = !name;
  $("dropzone").dataset.state = s.file ? "filled" : "empty";
}

/** @param {PageStore} store */
export function watchPhoto(store) {
  store.watch((s) => [s.file, s.fileUrl, s.clip], drawPhoto);
  store.watch((s) => [s.options.size, s.device.on], () => followSize(store));
  store.watch((s) => [s.dragging], (s) => $("dropzone").classList.toggle("dragging", s.dragging));

  const zone = $("dropzone");
  const input = /** @type {HTMLInputElement} */ ($("file-input"));
  zone.addEventListener("click", () => input.click());
  zone.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") { e.preventDefault(); input.click(); }
  });
  input.addEventListener("change", () => { setFile(store, input.files && input.files[0]); input.value = ""; });
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
