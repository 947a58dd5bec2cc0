// @ts-check
// The result: before/after compare slider, style strength (re-blended here, no request), the download link that
// follows it, and the line under it. All drawn from state.result, state.split, state.strength, state.download.
// A painted clip (result.clip) has no slider or strength: clip.js plays it; the download and the line are here.

import { mix, toLab } from "./blend.js";
import { $ } from "./dom.js";
import { translate } from "./i18n.js";
import { styleName } from "./styles.js";

/** @import { Blend, PageStore, State } from "./store.js" */
/** @import { Translate } from "./i18n.js" */

/** @param {string | number} v */
const clamp = (v) => Math.min(100, Math.max(0, Number(v)));
/** @type {Record<string, string>} */
const EP_NAMES = { webgpu: "WebGPU", wasm: "WebAssembly" }; // how the device painted (device.js's `ep`)

/**
 * @param {HTMLCanvasElement} canvas
 * @param {CanvasRenderingContext2DSettings} [settings]
 */
function context2d(canvas, settings) {
  const ctx = canvas.getContext("2d", settings);
  if (!ctx) throw new Error("this browser has no 2D canvas");
  return ctx;
}

/** The canvas the blended picture is drawn on. */
const afterCanvas = () => /** @type {HTMLCanvasElement} */ ($("after"));

/**
 * @param {CanvasImageSource} source
 * @param {number} w
 * @param {number} h
 * @param {boolean} smooth
 */
function pixels(source, w, h, smooth) {
  const canvas = document.createElement("canvas");
  canvas.width = w;
  canvas.height = h;
  const ctx = context2d(canvas, { willReadFrequently: true });
  if (smooth) ctx.imageSmoothingQuality = "high";
  ctx.drawImage(source, 0, 0, w, h);
  return ctx.getImageData(0, 0, w, h);
}

// The full-strength picture and the photo at its size (`photo`: what the page shows for it, the server's PNG of it
// when this browser cannot decode it), kept in L*a*b* for the slider to mix.
/**
 * @param {Blob} blob
 * @param {Blob} photo
 * @param {number} w
 * @param {number} h
 * @returns {Promise<Blend>}
 */
export async function keepForBlending(blob, photo, w, h) {
  const painted = pixels(await createImageBitmap(blob), w, h, false);
  const photoData = pixels(await createImageBitmap(photo), w, h, true);
  return {
    photoLab: toLab(photoData.data),
    paintedLab: toLab(painted.data),
    painted,
    out: new ImageData(new Uint8ClampedArray(painted.data), w, h),
  };
}

/**
 * @param {PageStore} store
 * @param {string | number} value
 */
export function setSplit(store, value) {
  store.update({ split: clamp(value) });
}

/**
 * @param {PageStore} store
 * @param {string | number} value
 */
export function setStrength(store, value) {
  store.update({ strength: Math.round(clamp(value)) });
}

// The slider let go: the server's PNG at 100 %, else the blended canvas as a PNG of its own.
/** @param {PageStore} store */
export function commitStrength(store) {
  const { result, strength } = store.state;
  if (!result) return;
  if (strength >= 100) { store.update({ download: { href: result.url, name: `${result.name}.png` } }); return; }
  requestAnimationFrame(() => afterCanvas().toBlob((png) => {
    if (!png || store.state.result !== result || store.state.strength !== strength) return;
    const old = store.state.download;
    if (old && old.href !== result.url) URL.revokeObjectURL(old.href);
    store.update({ download: { href: URL.createObjectURL(png), name: `${result.name}-${strength}.png` } });
  }, "image/png"));
}

// A new result replaces the old one: its object URLs go (its photo's too, unless still in use: `keep`).
/**
 * @param {State} state
 * @param {string} keep
 */
export function dropResult(state, keep) {
  const { result, download } = state;
  if (!result) return;
  if (download && download.href !== result.url) URL.revokeObjectURL(download.href);
  URL.revokeObjectURL(result.url);
  if (result.beforeUrl !== keep && result.beforeUrl !== state.fileUrl) URL.revokeObjectURL(result.beforeUrl);
}

/** @param {State} s */
function drawCompare(s) {
  const r = s.result;
  $("result-actions").hidden = !r;
  $("compare").hidden = !r || Boolean(r.clip);
  $("strength-row").hidden = !r || Boolean(r.clip);
  if (!r || r.clip) return;
  /** @type {HTMLImageElement} */ ($("before")).src = r.beforeUrl;
  $("compare").style.aspectRatio = `${r.width} / ${r.height}`;
  const canvas = afterCanvas();
  canvas.width = r.width;
  canvas.height = r.height;
  context2d(canvas).putImageData(r.blend.painted, 0, 0);
}

/** @param {State} s */
function drawSplit(s) {
  if (!s.result || s.result.clip) return;
  const v = s.split;
  /** @type {HTMLInputElement} */ ($("compare-slider")).value = String(v);
  $("before").style.clipPath = `inset(0 ${(100 - v).toFixed(2)}% 0 0)`;
  $("divider").style.left = `${v}%`;
  $("compare").dataset.split = v.toFixed(1);
}

// One repaint per animation frame, however fast the slider moves (state.blendFrame: the one due); data-strength
// says what the canvas shows.
/**
 * @param {PageStore} store
 * @param {State} s
 */
function drawStrength(store, s) {
  $("strength-value").textContent = `${s.strength}%`;
  /** @type {HTMLInputElement} */ ($("strength")).value = String(s.strength);
  if (!s.result || s.result.clip || s.blendFrame) return;
  store.update({ blendFrame: requestAnimationFrame(() => repaintStrength(store)) });
}

/** @param {PageStore} store */
function repaintStrength(store) {
  store.update({ blendFrame: 0 });
  const { result, strength } = store.state;
  if (!result || result.clip) return;
  const b = result.blend;
  const ctx = context2d(afterCanvas());
  if (strength >= 100) ctx.putImageData(b.painted, 0, 0); // the plain style, exactly
  else {
    mix(b.photoLab, b.paintedLab, strength / 100, b.out.data);
    ctx.putImageData(b.out, 0, 0);
  }
  $("compare").dataset.strength = String(strength);
}

/** @param {State} s */
function drawInfo(s) {
  const r = s.result;
  if (!r) return;
  /** @type {Translate} */
  const t = (key, vars) => translate(s.lang, key, vars);
  const faces = r.portrait ? ` · ${t("result.faces", { n: r.facesFound })}` : "";
  const frames = r.clip ? ` · ${t("result.frames", { n: r.frames })}` : "";
  const info = { style: styleName(s, r.style), w: r.width, h: r.height, s: r.seconds };
  const ep = (r.engine && EP_NAMES[r.engine]) || r.engine;
  const where = r.where === "device" ? t("result.device", { ep }) : t("result.server");
  $("result-info").textContent = `${t("result.info", info)}${frames}${faces} · ${where}`;
}

// The link and its label name the file it saves: "Download PNG", "Download MP4", "Download GIF"…
/** @param {State} s */
function drawDownload(s) {
  const d = s.download;
  const type = d ? d.name.slice(d.name.lastIndexOf(".") + 1).toUpperCase() : "PNG";
  $("download-label").textContent = translate(s.lang, "download", { type });
  if (!d) return;
  const link = /** @type {HTMLAnchorElement} */ ($("download"));
  link.href = d.href;
  link.download = d.name;
}

/** @param {PageStore} store */
export function watchResult(store) {
  store.watch((s) => [s.result], drawCompare);
  store.watch((s) => [s.result, s.split], drawSplit);
  store.watch((s) => [s.result, s.strength], (s) => drawStrength(store, s));
  store.watch((s) => [s.lang, s.result, s.styles], drawInfo);
  store.watch((s) => [s.lang, s.download], drawDownload);
}
