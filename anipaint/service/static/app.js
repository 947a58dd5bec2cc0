// @ts-check
// AniPaint page: choose a photo, pick a style, queue a job, watch it, compare before/after, download.
//
// The page is ES modules with one state object (store.js) that every view is drawn from:
//   i18n.js     strings, the language, the static text
//   api.js      every request to the server; serverPainter.paint(file, options, onProgress, signal)
//   device-painter.js  the same paint() on this device (device.js: ONNX Runtime Web in a worker)
//   device-mode.js  the "Paint on this device" switch, what the device can paint, what needs the server
//   camera-mode.js  the live camera painted on this device (camera.js, steady.js), take picture, record
//   offline.js  the service worker that keeps the page and the device models for offline use
//   styles.js   the styles, thumbnails, the choice, the background select
//   photo.js    choosing, dropping and pasting the photo (or video)
//   clip.js     videos and animated pictures: telling one, what does not apply to it, playing the painted one
//   job.js      the paint options, one paint through a painter, its progress, cancel
//   compare.js  before/after, style strength (blend.js mixes in L*a*b*), the download
//   messages.js the message box
//   dom.js      the DOM look-ups the views share
// This module makes the store, wires the controls that are not any one module's and starts everything.

import { getConfig, isReady, serverPainter } from "./api.js";
import { watchCamera } from "./camera-mode.js";
import { watchClip } from "./clip.js";
import { commitStrength, setSplit, setStrength, watchResult } from "./compare.js";
import { devicePainter } from "./device-painter.js";
import { initialDevice, watchDevice } from "./device-mode.js";
import { $, within } from "./dom.js";
import { pickLanguage, saveLanguage, translate, watchStaticText } from "./i18n.js";
import { cancelPaint, startPaint, watchJob } from "./job.js";
import { showMessage, watchMessage } from "./messages.js";
import { keepForOffline, keepOffline } from "./offline.js";
import { watchPhoto } from "./photo.js";
import { createStore, initialState } from "./store.js";
import { loadStyles, usableStyles, watchStyles } from "./styles.js";

/** @import { Options, State } from "./store.js" */

const READY_POLL_MS = 2000;

const store = createStore(initialState(pickLanguage(), initialDevice()));
const onDevice = devicePainter((urls) => keepForOffline(store, urls));
const painter = () => (store.state.device.on ? onDevice : serverPainter);

/**
 * @template {keyof Options} K
 * @param {K} name
 * @param {Options[K]} value
 */
function setOption(name, value) {
  store.update((s) => ({ options: { ...s.options, [name]: value } }));
}

/** @param {string} id */
const input = (id) => /** @type {HTMLInputElement} */ ($(id));

// The switches and the size picker are drawn from state.options, and write to it; on the device, faces and anime
// faces show off (as painted), and come back as they were on the server; so do anime faces for a clip.
function watchOptions() {
  const faces = input("faces");
  const portrait = input("portrait");
  /** @type {NodeListOf<HTMLInputElement>} */
  const sizes = document.querySelectorAll('input[name="size"]');
  store.watch((s) => [s.options, s.device.on, s.clip], (s) => {
    faces.checked = s.options.faces && !s.device.on;
    portrait.checked = s.options.portrait && !s.device.on && !s.clip;
    for (const radio of sizes) if (radio.value === s.options.size) radio.checked = true;
  });
  faces.addEventListener("change", () => setOption("faces", faces.checked));
  portrait.addEventListener("change", () => setOption("portrait", portrait.checked));
  for (const radio of sizes) {
    radio.addEventListener("change", () => { if (radio.checked) setOption("size", radio.value); });
  }
}

function watchServer() {
  store.watch((s) => [s.lang, s.server], (s) => {
    const pill = $("server-status");
    pill.dataset.state = s.server;
    within(pill, ".label").textContent = translate(s.lang, `status.${s.server}`);
  });
}

async function watchReadiness() {
  /** @type {State["server"]} */
  let server;
  try {
    server = (await isReady()) ? "ready" : "starting";
    // Not warming up but empty: no style can paint here, so the default style never loads.
    const s = store.state;
    if (server !== "ready" && s.stylesLoaded && !usableStyles(s).length) server = "empty";
  } catch (_) {
    server = "down";
  }
  store.update({ server });
  if (server !== "ready") setTimeout(watchReadiness, READY_POLL_MS);
}

async function loadConfig() {
  let config = null;
  try { config = await getConfig(); } catch (_) { /* the defaults in the page still work */ }
  if (config) store.update((s) => ({ config, options: { ...s.options, faces: config.faces } }));
}

function wire() {
  $("paint").addEventListener("click", () => startPaint(store, painter()));
  $("cancel").addEventListener("click", () => cancelPaint(store));
  const split = input("compare-slider");
  split.addEventListener("input", () => setSplit(store, split.value));
  const strength = input("strength");
  strength.addEventListener("input", () => setStrength(store, strength.value));
  strength.addEventListener("change", () => commitStrength(store));
  $("lang-toggle").addEventListener("click", () => {
    const lang = store.state.lang === "zh" ? "en" : "zh";
    saveLanguage(lang);
    store.update({ lang });
  });
}

// The static text first: the views after it may draw over some of it (the paint button, the status pill).
watchStaticText(store);
watchServer();
watchStyles(store);
watchOptions();
watchDevice(store);
watchCamera(store, painter);
watchPhoto(store);
watchClip(store);
watchJob(store);
watchResult(store);
watchMessage(store);
wire();
loadConfig();
loadStyles(store, () => showMessage(store, "error", "err.network"));
watchReadiness();
keepOffline(store);
