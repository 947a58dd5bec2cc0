// @ts-check
// Camera mode: the person's camera painted live on this device (camera.js), in the result card, with the frame
// rate and working size, pause, smoother or sharper, style switches, Take picture (the frame painted at 512 px by
// the page's painter, then the usual result view) and Record (the painted view as a clip, with the microphone's
// sound if allowed). The camera is asked for only when the button is pressed, and every track is ended when the
// mode is left, the tab is hidden or the page goes.

import { startCamera } from "./camera.js";
import { DeviceError } from "./device.js";
import { $ } from "./dom.js";
import { translate } from "./i18n.js";
import { startPaint } from "./job.js";
import { setFile } from "./photo.js";

/** @import { Painter } from "./api.js" */
/** @import { CameraController } from "./camera.js" */
/** @import { CameraState, PageStore, State } from "./store.js" */

const STATS_MS = 500; // how often the frame rate line is redrawn
// Smoother: a frame rate that feels live, at a smaller working size; sharper: a larger size at a lower rate.
const QUALITY = { smoother: { targetFps: 12, maxSide: 384 }, sharper: { targetFps: 5, maxSide: 512 } };

// This module's handles on what is running (not shown; the store has what is): the live view, its timer, the
// recorder and the microphone.
/** @type {CameraController | null} */
let live = null;
/** @type {ReturnType<typeof setInterval> | 0} */
let ticker = 0;
/** @type {MediaRecorder | null} */
let recorder = null;
/** @type {MediaStream | null} */
let mic = null;

/**
 * @param {PageStore} store
 * @param {Partial<CameraState>} patch
 */
const set = (store, patch) => store.update((s) => ({ camera: { ...s.camera, ...patch } }));

// The style the live view can paint: the chosen one when this device can paint it.
/** @param {State} s */
function liveStyle(s) {
  const row = s.device.rows && s.device.rows.find((r) => r.id === s.style);
  return row && row.on_device ? row.id : null;
}

// The lightest style this device paints (the smallest model, the quickest here), for the "too slow" line.
/** @param {State} s */
function lightest(s) {
  const rows = (s.device.rows || []).filter((r) => r.on_device).sort((a, b) => (a.bytes || 0) - (b.bytes || 0));
  const style = rows.length ? s.styles.find((st) => st.id === rows[0].id) : null;
  return style ? style.label : rows.length ? rows[0].id : "";
}

// Keyboard users keep their place: when the mode's buttons hide, the focus goes to the other mode's first button
// (else it would fall to the top of the page). Called before the change, it returns the step for after it.
/**
 * @param {string} from  the element that loses its focus, with anything inside it
 * @param {string} to
 */
function focusFollows(from, to) {
  const had = $(from).contains(document.activeElement);
  return () => { if (had) $(to).focus(); };
}

/** @param {PageStore} store */
async function enter(store) {
  const s = store.state;
  if (live || s.camera.phase === "starting") return;
  const style = liveStyle(s);
  if (!style) { set(store, { error: "style" }); return; }
  const toLive = focusFollows("camera-row", "live-take");
  set(store, { phase: "starting", error: null, stats: null, clip: null });
  toLive();
  // On a phone the result card is under the controls: bring the live view up, as a paint does.
  if (window.matchMedia("(max-width: 880px)").matches) $("result-card").scrollIntoView({ behavior: "smooth" });
  try {
    live = await startCamera({ style, canvas: /** @type {HTMLCanvasElement} */ ($("live-canvas")),
      ...QUALITY[s.camera.quality] });
  } catch (error) {
    const back = focusFollows("live", "camera-start");
    set(store, { phase: "off", error: error instanceof DeviceError ? error.reason : "failed" });
    back();
    return;
  }
  if (store.state.camera.phase !== "starting") { live.stop(); live = null; return; } // left while it started
  set(store, { phase: "live" });
  ticker = setInterval(() => {
    if (!live) return;
    const stats = live.stats();
    if (stats.failure) { set(store, { error: stats.failure.reason }); leave(store); return; }
    set(store, { stats });
  }, STATS_MS);
}

// Every track ended (the camera's and the microphone's), the recorder stopped first so that its clip is kept.
/** @param {PageStore} store */
function leave(store) {
  if (recorder && recorder.state !== "inactive") recorder.stop();
  for (const track of mic ? mic.getTracks() : []) track.stop();
  mic = null;
  if (live) live.stop();
  live = null;
  clearInterval(ticker);
  const back = focusFollows("live", "camera-start");
  if (store.state.camera.phase !== "off") set(store, { phase: "off", recording: false });
  back();
}

/**
 * @param {PageStore} store
 * @param {() => Painter} painter
 */
async function takePicture(store, painter) {
  if (!live) return;
  const blob = await live.still();
  leave(store);
  const stamp = new Date().toISOString().slice(0, 19).replace(/[-:T]/g, "");
  await setFile(store, new File([blob], `camera-${stamp}.png`, { type: "image/png" }));
  store.update((s) => ({ options: { ...s.options, size: "512" } })); // the full quality of a photo
  await startPaint(store, painter());
}

/** @param {PageStore} store */
async function record(store) {
  if (!live) return;
  if (recorder && recorder.state === "recording") { recorder.stop(); return; }
  const stream = live.canvas.captureStream(30);
  try {
    mic = await navigator.mediaDevices.getUserMedia({ audio: true, video: false });
    for (const track of mic.getAudioTracks()) stream.addTrack(track);
  } catch (_) {
    mic = null; // no microphone, or not allowed: the clip has no sound
  }
  if (!live) { for (const track of mic ? mic.getTracks() : []) track.stop(); return; }
  const type = ["video/mp4", "video/webm;codecs=vp9,opus", "video/webm;codecs=vp8,opus", "video/webm"]
    .find((t) => MediaRecorder.isTypeSupported(t)) || "";
  const made = new MediaRecorder(stream, type ? { mimeType: type } : {});
  /** @type {Blob[]} */
  const parts = [];
  made.ondataavailable = (event) => { if (event.data.size) parts.push(event.data); };
  made.onstop = () => {
    for (const track of [...stream.getVideoTracks(), ...(mic ? mic.getTracks() : [])]) track.stop();
    mic = null;
    const blob = new Blob(parts, { type: made.mimeType || "video/webm" });
    const old = store.state.camera.clip;
    if (old) URL.revokeObjectURL(old.href);
    const ext = blob.type.includes("mp4") ? "mp4" : "webm";
    set(store, { recording: false, clip: { href: URL.createObjectURL(blob), name: `anipaint-camera.${ext}` } });
  };
  recorder = made;
  made.start(1000);
  set(store, { recording: true });
}

/** @param {State} s */
function draw(s) {
  /** @type {(key: string, vars?: Record<string, unknown>) => string} */
  const t = (key, vars) => translate(s.lang, key, vars);
  const c = s.camera;
  document.body.dataset.camera = c.phase;
  document.body.dataset.cameraStyle = (c.phase !== "off" && c.stats && c.stats.painted && c.stats.style) || "";
  $("live").hidden = c.phase === "off";
  $("camera-row").hidden = c.phase !== "off"; // the button and its hint: the live view has its own controls
  const stats = c.stats;
  $("live-stats").textContent = c.phase === "starting" ? t("camera.starting")
    : stats && stats.painted ? t("camera.stats", { fps: stats.fps.toFixed(1), w: stats.width, h: stats.height,
      ep: stats.ep === "webgpu" ? "WebGPU" : "WebAssembly" }) : t("camera.waiting");
  $("live-pause").textContent = t(c.phase === "paused" ? "camera.resume" : "camera.pause");
  $("live-record").textContent = t(c.recording ? "camera.recordStop" : "camera.record");
  $("live-record").setAttribute("aria-pressed", String(c.recording));
  const clip = /** @type {HTMLAnchorElement} */ ($("live-clip"));
  clip.hidden = !c.clip;
  if (c.clip) { clip.href = c.clip.href; clip.download = c.clip.name; }
  for (const q of /** @type {const} */ (["smoother", "sharper"])) {
    /** @type {HTMLInputElement} */ ($(`live-${q}`)).checked = c.quality === q;
  }
  const lines = [];
  if (c.error) lines.push(t(`camera.err.${c.error}`, { style: lightest(s) }));
  if (stats && stats.slow) lines.push(t("camera.slow", { style: lightest(s) }));
  const note = $("camera-note");
  note.textContent = lines.join("\n");
  note.hidden = !lines.length;
  $("live-canvas").setAttribute("aria-label", t("camera.alt"));
}

/**
 * @param {PageStore} store
 * @param {() => Painter} painter  the page's painter (the device's or the server's, as its switch says)
 */
export function watchCamera(store, painter) {
  store.watch((s) => [s.lang, s.camera, s.device.rows, s.styles], draw);
  // Another style while live: the next frames are painted in it (a style this device cannot paint is said).
  store.watch((s) => [s.style], (s) => {
    if (!live) return;
    const style = liveStyle(s);
    if (style) { live.setStyle(style); if (s.camera.error === "style") set(store, { error: null }); }
    else set(store, { error: "style" });
  });
  $("camera-start").addEventListener("click", () => enter(store));
  $("live-leave").addEventListener("click", () => leave(store));
  $("live-pause").addEventListener("click", () => {
    if (!live) return;
    const paused = store.state.camera.phase === "paused";
    if (paused) live.resume(); else live.pause();
    set(store, { phase: paused ? "live" : "paused" });
  });
  $("live-take").addEventListener("click", () => takePicture(store, painter));
  $("live-record").addEventListener("click", () => record(store));
  for (const q of /** @type {const} */ (["smoother", "sharper"])) {
    $(`live-${q}`).addEventListener("change", () => {
      set(store, { quality: q });
      live?.setTarget(QUALITY[q]);
    });
  }
  // Privacy: the camera is never on behind the person's back.
  document.addEventListener("visibilitychange", () => { if (document.hidden) leave(store); });
  window.addEventListener("pagehide", () => leave(store));
}
