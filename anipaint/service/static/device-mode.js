// @ts-check
// "Paint on this device": the switch (remembered by this browser), which styles this device can paint (the rows of
// /api/device/styles), and the views that follow from them: the switch, the controls that need the server greyed
// out with why, and one note under them (a style this device cannot paint, the server out of reach).
//
// Off until the user turns it on, then on in this browser until turned off: turning it on (or the first paint)
// downloads ONNX Runtime Web (about 30 MB) and the style's model (1–3 MB), and on most phones and laptops the server
// paints faster and does what the device cannot (face enhancement, anime faces, pictures over 1024 px). Privacy
// and painting offline are worth that to those who ask for them, not a surprise download for everyone else.

import { STILLS_ONLY } from "./clip.js";
import { MAX_DEVICE_SIDE, deviceManifest, deviceSupport, prepareOnDevice } from "./device.js";
import { $ } from "./dom.js";
import { translate } from "./i18n.js";

/** @import { DeviceState, PageStore, State } from "./store.js" */
/** @import { Translate } from "./i18n.js" */

const KEY = "anipaint.device";
// The controls for what only the server paints.
const SERVER_ONLY = ["faces", "portrait", "background", "size-original"];

// What state.device starts as: the remembered choice, unless this browser cannot paint at all.
/** @returns {DeviceState} */
export function initialDevice() {
  const support = deviceSupport();
  let saved = false;
  try { saved = localStorage.getItem(KEY) === "on"; } catch (_) { /* private mode: off */ }
  return { on: saved && !support, support, rows: null, failed: false, damaged: null, ready: null };
}

// Why style `id` cannot be painted now that the switch is on, as a line in the page's language; "" when it can
// (or when the switch is off).
/**
 * @param {State} state
 * @param {string | null} id
 * @returns {string}
 */
export function deviceBlock(state, id) {
  const d = state.device;
  if (!d.on || !id) return "";
  const style = state.styles.find((s) => s.id === id);
  /** @type {Translate} */
  const t = (key, vars) => translate(state.lang, key, vars);
  /** @param {string | null} why */
  const line = (why) => t("device.style", { style: style ? style.label : id, why });
  if (!d.rows) return line(t(d.failed ? "device.noList" : "device.loading"));
  const row = d.rows.find((r) => r.id === id);
  if (!row) return line(t("device.noList"));
  if (row.on_device) return "";
  return line(row.state === "not_ready" ? t("device.notReady") : row.reason);
}

// A video or animated picture is painted on the server only (a frame at a time, steady along the motion): while
// the switch is on, one is refused with a line that offers to turn the switch off, never uploaded quietly.
/** @param {State} state */
export const clipRefused = (state) => Boolean(state.device.on && state.clip);

/**
 * @param {PageStore} store
 * @param {boolean} on
 */
export function setDevice(store, on) {
  try { localStorage.setItem(KEY, on ? "on" : "off"); } catch (_) { /* not remembered */ }
  store.update((s) => ({
    device: { ...s.device, on },
    // "Original" is over what the device paints: the largest size it does instead.
    options: on && s.options.size === "original" ? { ...s.options, size: String(MAX_DEVICE_SIDE) } : s.options,
  }));
}

// The manifest (`fresh`: asked again, as the server may have made more device models meanwhile).
/**
 * @param {PageStore} store
 * @param {boolean} fresh
 */
async function loadRows(store, fresh) {
  try {
    const rows = await deviceManifest({ fresh });
    store.update((s) => ({ device: { ...s.device, rows, failed: false } }));
  } catch (_) {
    store.update((s) => ({ device: { ...s.device, failed: !s.device.rows } }));
  }
}

// While the switch is on, the chosen style is got ready on this device before there is a photo (device.js's
// prepareOnDevice): the first paint then starts at once, on code the browser has had time to optimise. A damaged
// model found on the way is said under the switch until a paint has fetched it again.
/**
 * @param {PageStore} store
 * @param {State} s
 */
function prepareChosen(store, s) {
  const row = s.device.on && s.device.rows && s.device.rows.find((r) => r.id === s.style);
  if (!row || !row.on_device) return;
  const style = row.id;
  prepareOnDevice(style).then(() => {
    store.update((st) => ({ device: { ...st.device, ready: style } }));
  }, (error) => {
    if (error.reason === "checksum") store.update((st) => ({ device: { ...st.device, damaged: style } }));
  });
}

/** @param {State} s */
function drawSwitch(s) {
  /** @type {Translate} */
  const t = (key, vars) => translate(s.lang, key, vars);
  const d = s.device;
  document.body.dataset.device = d.on ? "on" : "off";
  if (d.ready) document.body.dataset.deviceReady = d.ready; // the last style got ready here (tests wait on it)
  const toggle = /** @type {HTMLInputElement} */ ($("on-device"));
  toggle.checked = d.on;
  toggle.disabled = Boolean(d.support);
  $("device-hint").textContent = d.support ? t("opt.device.unsupported", { why: d.support }) : t("opt.device.hint");
  // Greyed here for a clip too (clip.js says why), so that one view decides each control.
  for (const id of SERVER_ONLY) {
    const control = /** @type {HTMLInputElement | HTMLSelectElement} */ ($(id));
    control.disabled = d.on || (Boolean(s.clip) && STILLS_ONLY.includes(id));
  }
  const original = /** @type {HTMLElement} */ ($("size-original").nextElementSibling); // its label
  original.title = d.on ? t("opt.original.device", { n: MAX_DEVICE_SIDE }) : "";
}

/** @param {State} s */
function drawNote(s) {
  const lines = [];
  if (s.server === "down" && !s.device.support) {
    lines.push(translate(s.lang, s.device.on ? "device.offline" : "device.offline.off"));
  }
  const blocked = deviceBlock(s, s.style);
  if (blocked) lines.push(blocked);
  if (s.device.on && s.device.damaged === s.style) lines.push(translate(s.lang, "device.damaged"));
  const note = $("device-note");
  note.textContent = lines.join("\n");
  note.hidden = !lines.length;
  $("device-clip").hidden = !clipRefused(s);
}

/** @param {PageStore} store */
export function watchDevice(store) {
  store.watch((s) => [s.lang, s.device, s.clip], drawSwitch);
  store.watch((s) => [s.lang, s.device, s.server, s.style, s.styles, s.clip], drawNote);
  // The styles are read again while the server prepares them, and its device models are made after them: the
  // rows are read again too while some are not ready.
  store.watch((s) => [s.styles], (s) => {
    const { rows, support } = s.device;
    if (!support && (!rows || rows.some((r) => r.state === "not_ready"))) loadRows(store, Boolean(rows));
  });
  store.watch((s) => [s.device.on, s.device.rows, s.style], (s) => prepareChosen(store, s));
  // A finished paint on the device has fetched a good copy of a model found damaged before.
  store.watch((s) => [s.result], (s) => {
    if (s.device.damaged && s.result) store.update((st) => ({ device: { ...st.device, damaged: null } }));
  });
  const toggle = /** @type {HTMLInputElement} */ ($("on-device"));
  toggle.addEventListener("change", () => setDevice(store, toggle.checked));
  $("use-server").addEventListener("click", () => setDevice(store, false));
}
