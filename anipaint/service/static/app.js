// AniPaint page: choose a photo, pick a style, queue a job, watch it, compare before/after, download.
//
// The page is ES modules with one state object (store.js) that every view is drawn from:
//   i18n.js     strings, the language, the static text
//   api.js      every request to the server; serverPainter.paint(file, options, onProgress, signal)
//   devicePainter.js  the same paint() on this device (device.js: ONNX Runtime Web in a worker)
//   deviceMode.js  the "Paint on this device" switch, what the device can paint, what needs the server
//   offline.js  the service worker that keeps the page and the device models for offline use
//   styles.js   the styles, thumbnails, the choice, the background select
//   photo.js    choosing, dropping and pasting the photo (or video)
//   clip.js     videos and animated pictures: telling one, what does not apply to it, playing the painted one
//   job.js      the paint options, one paint through a painter, its progress, cancel
//   compare.js  before/after, style strength (blend.js mixes in L*a*b*), the download
//   messages.js the message box
// This module makes the store, wires the controls that are not any one module's and starts everything.

import { getConfig, isReady, serverPainter } from "./api.js";
import { watchClip } from "./clip.js";
import { commitStrength, setSplit, setStrength, watchResult } from "./compare.js";
import { devicePainter } from "./devicePainter.js";
import { initialDevice, watchDevice } from "./deviceMode.js";
import { pickLanguage, saveLanguage, translate, watchStaticText } from "./i18n.js";
import { cancelPaint, startPaint, watchJob } from "./job.js";
import { showMessage, watchMessage } from "./messages.js";
import { keepOffline } from "./offline.js";
import { watchPhoto } from "./photo.js";
import { createStore, initialState } from "./store.js";
import { loadStyles, usableStyles, watchStyles } from "./styles.js";

const $ = (id) => document.getElementById(id);
const READY_POLL_MS = 2000;

const store = createStore(initialState(pickLanguage(), initialDevice()));
const painter = () => (store.state.device.on ? devicePainter : serverPainter);

function setOption(name, value) {
  store.update((s) => ({ options: { ...s.options, [name]: value } }));
}

// The switches and the size picker are drawn from state.options, and write to it; on the device, faces and anime
// faces show off (as painted), and come back as they were on the server; so do anime faces for a clip.
function watchOptions() {
  store.watch((s) => [s.options, s.device.on, s.clip], (s) => {
    $("faces").checked = s.options.faces && !s.device.on;
    $("portrait").checked = s.options.portrait && !s.device.on && !s.clip;
    const size = document.querySelector(`input[name="size"][value="${s.options.size}"]`);
    if (size) size.checked = true;
  });
  $("faces").addEventListener("change", (e) => setOption("faces", e.target.checked));
  $("portrait").addEventListener("change", (e) => setOption("portrait", e.target.checked));
  for (const radio of document.querySelectorAll('input[name="size"]')) {
    radio.addEventListener("change", (e) => { if (e.target.checked) setOption("size", e.target.value); });
  }
}

function watchServer() {
  store.watch((s) => [s.lang, s.server], (s) => {
    const pill = $("server-status");
    pill.dataset.state = s.server;
    pill.querySelector(".label").textContent = translate(s.lang, `status.${s.server}`);
  });
}

async function watchReadiness() {
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
  $("compare-slider").addEventListener("input", (e) => setSplit(store, e.target.value));
  $("strength").addEventListener("input", (e) => setStrength(store, e.target.value));
  $("strength").addEventListener("change", () => commitStrength(store));
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
watchPhoto(store);
watchClip(store);
watchJob(store);
watchResult(store);
watchMessage(store);
wire();
loadConfig();
loadStyles(store, () => showMessage(store, "error", "err.network"));
watchReadiness();
keepOffline();
