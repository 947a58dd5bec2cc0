// @ts-check
// The one message box under the paint button: what went wrong, in the page's language, from state.message.

import { PaintError } from "./api.js";
import { $ } from "./dom.js";
import { megabytes, translate } from "./i18n.js";

/** @import { Message, PageStore, State } from "./store.js" */

// kind: "error" or "busy"; sub: plain text (a server's detail, a file name) or {key, vars} to translate.
/**
 * @param {PageStore} store
 * @param {Message["kind"]} kind
 * @param {string} key
 * @param {Message["sub"]} [sub]
 */
export function showMessage(store, kind, key, sub = "") {
  store.update({ message: { kind, key, sub }, phase: "error" });
}

/** @param {PageStore} store */
export function clearMessage(store) {
  if (store.state.message) store.update({ message: null });
}

// The upload limits, from the server's config or the page's defaults.
/** @param {State} state */
export function limits(state) {
  const c = state.config || { max_upload_bytes: 20 * 1024 * 1024, max_pixels: 40e6 };
  return { mb: megabytes(c.max_upload_bytes), mp: Math.round(c.max_pixels / 1e6) };
}

// A video's limits, from the server's config or its defaults.
/** @param {State} state */
export function clipLimits(state) {
  const c = state.config || { video_max_bytes: 64 * 1024 * 1024, video_max_seconds: 60 };
  return { mb: megabytes(c.video_max_bytes || 64 * 1024 * 1024), s: c.video_max_seconds || 60 };
}

// A painter's PaintError (api.js) as the message to show, or anything else it threw as a failure; a cancelled
// paint shows none.
/**
 * @param {PageStore} store
 * @param {unknown} error
 */
export function showPaintError(store, error) {
  if (!(error instanceof PaintError)) { showMessage(store, "error", "err.failed", String(error)); return; }
  const { reason, detail } = error;
  if (reason === "cancelled") return;
  if (reason === "busy") {
    const sub = error.retryAfter ? { key: "err.busy.retry", vars: { n: error.retryAfter } } : "";
    showMessage(store, "busy", "err.busy", sub);
  } else if (reason === "tooBig" && store.state.clip) {
    // The server's reason names the limit the clip is over (bytes, seconds or frame size).
    showMessage(store, "error", "err.clipTooBig", detail || { key: "err.tooBig.clip", vars: clipLimits(store.state) });
  } else if (reason === "tooBig") {
    showMessage(store, "error", "err.tooBig", { key: "err.tooBig.limit", vars: limits(store.state) });
  } else if (reason === "notImage" && store.state.clip) {
    showMessage(store, "error", "err.notClip", detail);
  } else if (reason === "deviceDecode") {
    showMessage(store, "error", "err.deviceDecode");
  } else if (["network", "gone", "notImage", "style", "timeout", "checksum", "device"].includes(reason)) {
    showMessage(store, "error", `err.${reason}`, detail);
  } else {
    showMessage(store, "error", "err.failed", detail);
  }
}

/** @param {PageStore} store */
export function watchMessage(store) {
  store.watch((s) => [s.lang, s.message], (s) => {
    const box = $("message");
    const m = s.message;
    box.hidden = !m;
    if (!m) return;
    box.dataset.kind = m.kind;
    $("message-text").textContent = translate(s.lang, m.key);
    $("message-sub").textContent = typeof m.sub === "string" ? m.sub : translate(s.lang, m.sub.key, m.sub.vars);
  });
}
