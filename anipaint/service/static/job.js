// @ts-check
// The job: the paint options built from the state, one paint through a painter (api.js's serverPainter or
// device-painter.js's, any object with the same paint()), its progress, cancel, and the views of all that: the paint
// button, the progress bar, the placeholder and body[data-state].

import { duration, suffixOf } from "./clip.js";
import { dropResult, keepForBlending } from "./compare.js";
import { clipRefused, deviceBlock } from "./device-mode.js";
import { $ } from "./dom.js";
import { translate } from "./i18n.js";
import { clearMessage, showMessage, showPaintError } from "./messages.js";
import { drawable } from "./photo.js";
import { offeredBackground } from "./styles.js";

/** @import { PaintOptions, Painted, Painter, Progress } from "./api.js" */
/** @import { Lang, Translate } from "./i18n.js" */
/** @import { ClipResult, Job, PageStore, PhotoResult, State } from "./store.js" */

// What a paint asks for, from the state (a style is chosen): the one place the request's options are decided. On
// the device what needs the server (finding faces) is off; a clip has no anime faces or background style (the
// server refuses them), and is the only paint that says whether to keep it steady.
/**
 * @param {State} state
 * @returns {PaintOptions}
 */
export function paintOptions(state) {
  const { faces, size, portrait, temporal } = state.options;
  if (!state.style) throw new Error("no style is chosen");
  const server = !state.device.on;
  const still = !state.clip;
  return {
    style: state.style,
    maxSide: size === "original" ? 0 : Number(size),
    faces: faces && server,
    faceStyle: null, // the faces' own style: no control on the page, so the chosen style
    portrait: portrait && server && still, // anime faces: each face by the face model, the rest in `style`/`background`
    background: (server && still && offeredBackground(state)) || null,
    strength: 1, // always the full style: the strength slider re-blends in the browser
    temporal: still ? null : temporal,
  };
}

// The file's name, made safe for the download's name.
/** @param {File} file */
function baseName(file) {
  const raw = (file && file.name) || "image";
  const stem = raw.replace(/\.[^.]*$/, "").replace(/[^\p{L}\p{N}_-]+/gu, "-").replace(/^-+|-+$/g, "");
  return stem.slice(0, 60) || "image";
}

/** @param {Progress} p */
const phaseOf = (p) => (p.stage === "uploading" ? "uploading" : p.waiting ? "queued" : "running");

/**
 * @param {PageStore} store
 * @param {Painter} painter
 */
export async function startPaint(store, painter) {
  const s = store.state;
  const { file, fileUrl } = s; // set together (photo.js)
  if (!file || !fileUrl) { showMessage(store, "error", "err.noFile"); return; }
  if (!s.style || s.job) return;
  clearMessage(store);
  const options = paintOptions(s);
  /** @type {Job} */
  const job = {
    file, photo: drawable(file, s.preview), beforeUrl: fileUrl, name: baseName(file), portrait: options.portrait,
    clip: s.clip, started: performance.now(), controller: new AbortController(),
  };
  /** @param {Progress} p */
  const progress = (p) => { if (store.state.job === job) store.update({ progress: p, phase: phaseOf(p) }); };
  store.update({ job }); // the painter reports its first stage at once
  if (window.matchMedia("(max-width: 880px)").matches) $("result-card").scrollIntoView({ behavior: "smooth" });
  let painted, blend;
  try {
    painted = await painter.paint(job.file, options, progress, job.controller.signal);
  } catch (error) {
    if (store.state.job !== job) return;
    store.update({ job: null, progress: null });
    showPaintError(store, error);
    return;
  }
  if (store.state.job !== job) return;
  // A clip (the server counted its frames) plays as it came back: nothing to compare or re-blend.
  if ((painted.frames ?? 0) > 0) { showClip(store, job, painter, painted); return; }
  try {
    blend = await keepForBlending(painted.blob, job.photo, painted.width, painted.height);
  } catch (_) {
    store.update({ job: null, progress: null });
    showMessage(store, "error", "err.failed", "this browser cannot read the painted picture back");
    return;
  }
  if (store.state.job !== job) return;
  const url = URL.createObjectURL(painted.blob);
  const name = `${job.name}-anipaint-${painted.style}`;
  dropResult(store.state, job.beforeUrl);
  const seconds = ((performance.now() - job.started) / 1000).toFixed(1);
  /** @type {PhotoResult} */
  const result = {
    url, name, blend, seconds, beforeUrl: job.beforeUrl, width: painted.width, height: painted.height,
    style: painted.style, portrait: job.portrait, facesFound: painted.facesFound || 0,
    where: painter.where, engine: painted.engine,
  };
  store.update({
    job: null, progress: null, result, download: { href: url, name: `${name}.png` }, split: 50, strength: 100,
    phase: "done",
  });
}

/**
 * @param {PageStore} store
 * @param {Job} job
 * @param {Painter} painter
 * @param {Painted} painted
 */
function showClip(store, job, painter, painted) {
  const url = URL.createObjectURL(painted.blob);
  const name = `${job.name}-anipaint-${painted.style}`;
  dropResult(store.state, job.beforeUrl);
  /** @type {ClipResult} */
  const result = {
    url, name, clip: job.clip || "animation", mediaType: painted.mediaType, frames: painted.frames,
    seconds: ((performance.now() - job.started) / 1000).toFixed(1), beforeUrl: job.beforeUrl,
    width: painted.width, height: painted.height, style: painted.style, portrait: false, facesFound: 0,
    where: painter.where, engine: painted.engine,
  };
  const download = { href: url, name: `${name}.${suffixOf(painted.mediaType)}`, type: painted.mediaType };
  store.update({ job: null, progress: null, result, download, phase: "done" });
}

/** @param {PageStore} store */
export function cancelPaint(store) {
  const job = store.state.job;
  if (!job) return;
  store.update({ job: null, progress: null, phase: "ready" });
  job.controller.abort();
}

/** @param {State} s */
function drawProgress(s) {
  const p = s.progress;
  const box = $("progress");
  box.hidden = !p;
  if (!p) return;
  box.dataset.stage = p.stage;
  box.toggleAttribute("data-unmeasured", Boolean(p.unmeasured));
  const pct = Math.round(p.progress * 100);
  $("progress-fill").style.width = `${Math.max(4, pct)}%`;
  $("progress-bar").setAttribute("aria-valuenow", String(pct));
  /** @type {Translate} */
  const t = (key, vars) => translate(s.lang, key, vars);
  let text;
  if (p.stage === "uploading") text = t("progress.uploading");
  else if (p.stage === "queued") text = p.position ? t("progress.queued", { n: p.position }) : t("stage.queued");
  else if (p.frame) text = framesText(s.lang, p);
  else if (s.job && s.job.clip && p.stage === "decode") text = t("stage.decode.clip");
  else text = p.unmeasured ? t(`stage.${p.stage}`) : `${t(`stage.${p.stage}`)} ${pct}%`;
  $("progress-text").textContent = text;
  box.toggleAttribute("data-frames", Boolean(p.frame));
}

// A clip's progress: "Frame 12 of 36 · about 40 s left" (no "of" while the count is unknown, no time until the
// server has a pace to go by).
/**
 * @param {Lang} lang
 * @param {Progress} p
 */
function framesText(lang, p) {
  /** @type {Translate} */
  const t = (key, vars) => translate(lang, key, vars);
  const frames = p.frames ? t("progress.frames", { n: p.frame, total: p.frames }) : t("progress.frame", { n: p.frame });
  return p.eta == null ? frames : `${frames} · ${t("progress.eta", { time: duration(lang, p.eta) })}`;
}

/** @param {State} s */
function drawPaintButton(s) {
  const busy = Boolean(s.job);
  const button = /** @type {HTMLButtonElement} */ ($("paint"));
  button.disabled = !s.file || !s.style || busy || Boolean(deviceBlock(s, s.style)) || clipRefused(s);
  button.classList.toggle("busy", busy);
  $("paint-label").textContent = translate(s.lang, busy ? "painting" : "paint");
}

/** @param {PageStore} store */
export function watchJob(store) {
  store.watch((s) => [s.lang, s.progress], drawProgress);
  store.watch((s) => [s.lang, s.file, s.style, s.job, s.device, s.styles, s.clip], drawPaintButton);
  store.watch((s) => [s.job], (s) => {
    if (!s.job) return;
    // A video's first frame is not a picture an <img> can show: its progress has the bar alone.
    const photo = /** @type {HTMLImageElement} */ ($("progress-photo"));
    /** @type {HTMLElement} */ (photo.parentElement).hidden = s.job.clip === "video";
    if (s.job.clip !== "video") photo.src = s.job.beforeUrl;
  });
  store.watch((s) => [s.progress, s.result], (s) => { $("placeholder").hidden = Boolean(s.progress || s.result); });
  store.watch((s) => [s.phase], (s) => { document.body.dataset.state = s.phase; });
}
