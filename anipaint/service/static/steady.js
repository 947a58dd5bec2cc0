// @ts-check
// Steadiness for a live painted stream (camera.js), cheap enough for the page's thread: where the camera's picture
// has not changed, the new painted frame is blended with the last one shown, so lines and flat colours stop
// crawling where nothing moves; where it has changed, the new painting shows as it is.
//
// The change is measured per block of BLOCK×BLOCK pixels, in luma, against a reference input blended exactly as
// the output is (so a slow drift adds up until it counts as change, rather than hiding under the noise floor frame
// after frame). A block whose mean change is under STILL keeps `hold` of the last output; over MOVING it keeps
// nothing; in between, linearly less. The block weights are interpolated bilinearly per pixel, so no block edges
// show. A mean change over CUT across the whole frame (a scene change, a fast movement, the camera turned) starts
// afresh: the new painting as it is.
//
// Server clips warp the last frame along the optical flow (anipaint/media/temporal.py); a phone's or laptop's
// spare time per frame is a few milliseconds, so this only holds still what is still.

const BLOCK = 8;
const STILL = 3; // mean |Δluma| (0–255) of a block under which it counts as unchanged: a webcam's noise
const MOVING = 12; // over which it counts as moved
const CUT = 28; // the frame's mean |Δluma| over which everything starts afresh

/**
 * @typedef {object} Steadier
 * @property {(input: ImageData, painted: ImageData) => ImageData} next  the frame to show: `painted` steadied
 *   along what changed in `input` since the last frames (both the same size); a new ImageData
 * @property {() => void} reset  forget the last frames (a new style, a new size)
 */

// RGBA → luma (BT.601, 0–255) as float32.
/** @param {ImageData} image */
function luma(image) {
  const { data } = image;
  const out = new Float32Array(image.width * image.height);
  for (let p = 0; p < out.length; p++) {
    out[p] = 0.299 * data[4 * p] + 0.587 * data[4 * p + 1] + 0.114 * data[4 * p + 2];
  }
  return out;
}

/**
 * @param {{hold?: number}} [options]  hold: the share of the last output kept where nothing changed (0–1)
 * @returns {Steadier}
 */
export function createSteadier({ hold = 0.75 } = {}) {
  /** @type {{out: Uint8ClampedArray<ArrayBuffer>, ref: Float32Array, w: number, h: number} | null} */
  let last = null;

  /** @type {Steadier["next"]} */
  function next(input, painted) {
    const { width: w, height: h } = painted;
    const now = luma(input);
    if (!last || last.w !== w || last.h !== h) {
      last = { out: new Uint8ClampedArray(painted.data), ref: now, w, h };
      return new ImageData(new Uint8ClampedArray(painted.data), w, h);
    }
    const { ref, out } = last;
    // Mean change per block, and over the frame.
    const bw = Math.ceil(w / BLOCK), bh = Math.ceil(h / BLOCK);
    const change = new Float32Array(bw * bh), count = new Float32Array(bw * bh);
    let total = 0;
    for (let y = 0; y < h; y++) {
      const row = ((y / BLOCK) | 0) * bw;
      for (let x = 0; x < w; x++) {
        const d = Math.abs(now[y * w + x] - ref[y * w + x]);
        const b = row + ((x / BLOCK) | 0);
        change[b] += d;
        count[b] += 1;
        total += d;
      }
    }
    if (total / (w * h) > CUT) {
      last = { out: new Uint8ClampedArray(painted.data), ref: now, w, h };
      return new ImageData(new Uint8ClampedArray(painted.data), w, h);
    }
    const keep = new Float32Array(bw * bh);
    for (let b = 0; b < keep.length; b++) {
      const d = change[b] / count[b];
      keep[b] = hold * Math.min(1, Math.max(0, (MOVING - d) / (MOVING - STILL)));
    }
    // Blend per pixel with the block weights interpolated between block centres.
    const src = painted.data;
    const shown = new Uint8ClampedArray(w * h * 4);
    for (let y = 0; y < h; y++) {
      const fy = Math.min(bh - 1, Math.max(0, (y + 0.5) / BLOCK - 0.5));
      const y0 = fy | 0, y1 = Math.min(bh - 1, y0 + 1), ty = fy - y0;
      for (let x = 0; x < w; x++) {
        const fx = Math.min(bw - 1, Math.max(0, (x + 0.5) / BLOCK - 0.5));
        const x0 = fx | 0, x1 = Math.min(bw - 1, x0 + 1), tx = fx - x0;
        const k = (keep[y0 * bw + x0] * (1 - tx) + keep[y0 * bw + x1] * tx) * (1 - ty)
          + (keep[y1 * bw + x0] * (1 - tx) + keep[y1 * bw + x1] * tx) * ty;
        const p = y * w + x, q = 4 * p;
        shown[q] = k * out[q] + (1 - k) * src[q];
        shown[q + 1] = k * out[q + 1] + (1 - k) * src[q + 1];
        shown[q + 2] = k * out[q + 2] + (1 - k) * src[q + 2];
        shown[q + 3] = 255;
        ref[p] = k * ref[p] + (1 - k) * now[p];
      }
    }
    last.out = shown;
    return new ImageData(new Uint8ClampedArray(shown), w, h);
  }

  return { next, reset: () => { last = null; } };
}
