// The photo: chosen, dropped or pasted, checked before anything is sent, and shown in the drop zone.

import { clearMessage, limits, showMessage } from "./messages.js";

const $ = (id) => document.getElementById(id);

export function setFile(store, file) {
  if (!file) return;
  const s = store.state;
  if (file.type && !file.type.startsWith("image/")) {
    showMessage(store, "error", "err.notImage", file.name);
    return;
  }
  if (s.config && file.size > s.config.max_upload_bytes) {
    showMessage(store, "error", "err.tooBig", { key: "err.tooBig.limit", vars: limits(s) });
    return;
  }
  clearMessage(store);
  const inUse = [s.job && s.job.beforeUrl, s.result && s.result.beforeUrl];
  if (s.fileUrl && !inUse.includes(s.fileUrl)) URL.revokeObjectURL(s.fileUrl);
  store.update({ file, fileUrl: URL.createObjectURL(file), phase: "ready" });
}

function drawPhoto(s) {
  const preview = $("preview");
  const name = (s.file && s.file.name) || "";
  if (s.fileUrl) preview.src = s.fileUrl;
  preview.hidden = !s.fileUrl;
  $("file-name").textContent = name;
  $("file-name").hidden = !name;
  $("dropzone").dataset.state = s.file ? "filled" : "empty";
}

export function watchPhoto(store) {
  store.watch((s) => [s.file, s.fileUrl], drawPhoto);
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
      if (item.kind === "file" && item.type.startsWith("image/")) {
        e.preventDefault();
        setFile(store, item.getAsFile());
        return;
      }
    }
  });
}
