// @ts-check
// Videos and animated pictures ("clips"): telling one from a still photo when it is chosen, the options that do
// not apply to one (greyed, with why) and the "Steady video" switch, and the painted clip playing in the page.
// The server tells a clip by its bytes too and has the last word: the result is drawn from what it answers.

import { $ } from "./dom.js";
import { translate } from "./i18n.js";

/** @import { PageStore, State } from "./store.js" */
/** @import { Lang } from "./i18n.js" */
/** @typedef {"video" | "animation"} ClipKind */

// Painted as pictures only: with a clip the server refuses these (422), so they grey out while one is chosen.
export const STILLS_ONLY = ["portrait", "background"];
// The painted clip's file type, by the result's media type.
/** @type {Record<string, string>} */
const SUFFIXES = { "video/mp4": "mp4", "image/gif": "gif", "image/webp": "webp", "image/png": "png" };
/** @param {string | undefined} mediaType */
export const suffixOf = (mediaType) => (mediaType && SUFFIXES[mediaType]) || "png";

/** @type {(b: Uint8Array, at: number, text: string) => boolean} */
const ascii = (b, at, text) => [...text].every((c, i) => b[at + i] === c.charCodeAt(0));
/** @type {(b: Uint8Array, at: number) => number} */
const u32 = (b, at) => ((b[at] << 24) | (b[at + 1] << 16) | (b[at + 2] << 8) | b[at + 3]) >>> 0;

// As anipaint.media.video.looks_like_video: an ISO base media file (MP4, MOV) that is no HEIC/AVIF photo, or Matroska
// (WebM). A file's type alone is not enough: a pasted or shared file may come without one.
const BOXES = ["ftyp", "moov", "mdat", "wide", "free", "skip"];
const PICTURE_BRANDS = ["mif1", "msf1", "heic", "heix", "heim", "heis", "hevc", "hevx", "avif", "avis"];
/** @param {Uint8Array} b */
function isVideo(b) {
  if (b.length >= 4 && b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3) return true;
  if (b.length < 12 || !BOXES.some((box) => ascii(b, 4, box))) return false;
  if (!ascii(b, 4, "ftyp")) return true;
  const end = Math.min(b.length, Math.max(16, Math.min(u32(b, 0), 256)));
  for (let at = 8; at + 4 <= end; at += 4) {
    if (at !== 12 && PICTURE_BRANDS.some((brand) => ascii(b, at, brand))) return false; // [12:16]: minor version
  }
  return true;
}

// A GIF with a second image in it (its blocks walked as Pillow counts frames).
/** @param {Uint8Array} b */
function gifMoves(b) {
  /** @param {number} flags */
  const table = (flags) => (flags & 0x80 ? 3 * (2 << (flags & 7)) : 0);
  let at = 13 + table(b[10]);
  let images = 0;
  while (at < b.length && b[at] !== 0x3b) {
    if (b[at] === 0x2c) {
      if (++images > 1) return true;
      at += 10 + table(b[at + 9]) + 1; // the descriptor, its colour table, the LZW code size
    } else if (b[at] === 0x21) {
      at += 2; // an extension: its label, then its sub-blocks
    } else {
      return false;
    }
    while (at < b.length && b[at] !== 0) at += b[at] + 1;
    at += 1;
  }
  return false;
}

// An APNG: an acTL chunk with more than one frame before the first IDAT.
/** @param {Uint8Array} b */
function pngMoves(b) {
  for (let at = 8; at + 12 <= b.length;) {
    const length = u32(b, at);
    if (ascii(b, at + 4, "acTL")) return u32(b, at + 8) > 1;
    if (ascii(b, at + 4, "IDAT")) return false;
    at += 12 + length;
  }
  return false;
}

// A WebP whose extended header says it is animated.
/** @param {Uint8Array} b */
const webpMoves = (b) => ascii(b, 8, "WEBP") && ascii(b, 12, "VP8X") && Boolean(b[20] & 0x02);

// "video", "animation" or null (a still picture, or not a picture) for a chosen file.
/**
 * @param {Blob} file
 * @returns {Promise<ClipKind | null>}
 */
export async function clipKind(file) {
  if (file.type.startsWith("video/")) return "video";
  const head = new Uint8Array(await file.slice(0, 256).arrayBuffer()); // an ftyp box's brands, a WebP header
  if (isVideo(head)) return "video";
  if (ascii(head, 0, "RIFF")) return webpMoves(head) ? "animation" : null;
  const isGif = ascii(head, 0, "GIF8");
  if (!isGif && !ascii(head, 1, "PNG")) return null;
  // The second frame of a GIF, or a PNG's acTL, can be anywhere: the file is read whole (it is on this device).
  const b = new Uint8Array(await file.arrayBuffer());
  return (isGif ? gifMoves(b) : pngMoves(b)) ? "animation" : null;
}

// Seconds as "42 s" or "3 min 05 s" in the page's language.
/**
 * @param {Lang} lang
 * @param {number} seconds
 */
export function duration(lang, seconds) {
  const s = Math.max(1, Math.round(seconds));
  if (s < 60) return translate(lang, "time.s", { s });
  return translate(lang, "time.min", { m: Math.floor(s / 60), s: String(s % 60).padStart(2, "0") });
}

// While a clip is chosen: one line says why the stills-only options are greyed (device-mode.js greys them, with
// what needs the server), and "Steady video" shows.
/** @param {State} s */
function drawClipOptions(s) {
  const clip = Boolean(s.clip);
  document.body.dataset.clip = s.clip || "";
  $("clip-note").hidden = !clip;
  $("steady-switch").hidden = !clip;
  /** @type {HTMLInputElement} */ ($("temporal")).checked = s.options.temporal;
}

// The painted clip: an MP4 plays with its sound and controls, an animated picture plays as a picture.
/** @param {State} s */
function drawClipResult(s) {
  const r = s.result && s.result.clip ? s.result : null;
  const video = /** @type {HTMLVideoElement} */ ($("clip-video"));
  const picture = /** @type {HTMLImageElement} */ ($("clip-picture"));
  $("clip-result").hidden = !r;
  const plays = Boolean(r && r.mediaType === "video/mp4");
  video.hidden = !plays;
  picture.hidden = !r || plays;
  if (!plays && video.getAttribute("src")) { video.pause(); video.removeAttribute("src"); video.load(); }
  if (!r) { picture.removeAttribute("src"); return; }
  if (plays) video.src = r.url;
  else picture.src = r.url;
  $("clip-result").style.aspectRatio = `${r.width} / ${r.height}`;
}

/** @param {PageStore} store */
export function watchClip(store) {
  store.watch((s) => [s.clip, s.options], drawClipOptions);
  store.watch((s) => [s.result], drawClipResult);
  const temporal = /** @type {HTMLInputElement} */ ($("temporal"));
  temporal.addEventListener("change", () => {
    store.update((s) => ({ options: { ...s.options, temporal: temporal.checked } }));
  });
}
