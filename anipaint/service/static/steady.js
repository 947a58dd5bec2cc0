// @ts-check
// Steadiness for a live painted stream (camera.js), cheap enough for the page's thread: each new painted frame is
// blended with the last one shown, moved along the camera picture's motion, wherever that move explains the new
// camera picture; where it does not (something new, something turned), the new painting shows as it is.
//
// The motion is block matching on a small grid: for each BLOCK×BLOCK block of the new frame's luma, the shift
// (within ±RANGE pixels) of the last frame's luma that matches it best, searched on a half-size copy and refined
// by a pixel at full size. The block's mean |Δluma| after that shift (its residual, 0–255), the largest among it
// and its neighbours, decides how much of the moved last output it keeps: `hold` under `still` (a webcam's
// noise), nothing over `moving`, linearly less in between; the block weights are interpolated per pixel, so no
// block edges show. A mean residual over `cut` across the frame (a scene change, a fast movement, the camera
// turned) starts afresh: the new painting as it is.
//
// Server clips warp the last frame along a dense optical flow (anipaint/media/temporal.py); a phone's or laptop's
// spare time per frame is a few milliseconds, and whole-pixel block shifts fit in it.

const BLOCK = 8;
const RANGE = 6; // the largest shift searched, in pixels of the working size (an even number)

/**
 * The defaults: `hold`, the share of the moved last output kept where the move explains the new picture; `still`
 * and `moving`, the block residuals (mean |Δluma|, 0–255) under which it is kept whole and over which not at all;
 * `cut`, the frame's mean residual over which everything starts afresh; `motion`: false keeps only what did not
 * move (no search).
 */
export const STEADY = { hold: 0.6, still: 3, moving: 12, cut: 28, motion: true };

/**
 * @typedef {object} Steadier
 * @property {(input: ImageData, painted: ImageData) => ImageData} next  the frame to show: `painted` steadied
 *   along what changed in `input` since the last frame (both the same size); a new ImageData
 * @property {() => void} reset  forget the last frame (a new style, a new size)
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

// A half-size copy (2×2 means).
/**
 * @param {Float32Array} l
 * @param {number} w
 * @param {number} h
 */
function half(l, w, h) {
  const hw = w >> 1, hh = h >> 1;
  const out = new Float32Array(hw * hh);
  for (let y = 0; y < hh; y++) {
    for (let x = 0; x < hw; x++) {
      const p = 2 * y * w + 2 * x;
      out[y * hw + x] = (l[p] + l[p + 1] + l[p + w] + l[p + w + 1]) / 4;
    }
  }
  return out;
}

// Mean |a(x) − b(x + d)| over a block of `a` at (x0, y0) of size bs, b's pixels clamped to its edges.
/**
 * @param {Float32Array} a
 * @param {Float32Array} b
 * @param {number} w
 * @param {number} h
 * @param {number} x0
 * @param {number} y0
 * @param {number} bs
 * @param {number} dx
 * @param {number} dy
 */
function sad(a, b, w, h, x0, y0, bs, dx, dy) {
  let sum = 0, n = 0;
  for (let y = y0; y < Math.min(h, y0 + bs); y++) {
    const sy = Math.min(h - 1, Math.max(0, y + dy));
    for (let x = x0; x < Math.min(w, x0 + bs); x++) {
      const sx = Math.min(w - 1, Math.max(0, x + dx));
      sum += Math.abs(a[y * w + x] - b[sy * w + sx]);
      n++;
    }
  }
  return sum / n;
}

/**
 * For each block of `now`: the shift into `last` that matches it best, and its residual after that shift.
 * @param {Float32Array} now
 * @param {Float32Array} last
 * @param {number} w
 * @param {number} h
 * @param {boolean} motion
 */
function match(now, last, w, h, motion) {
  const bw = Math.ceil(w / BLOCK), bh = Math.ceil(h / BLOCK);
  const dxs = new Int8Array(bw * bh), dys = new Int8Array(bw * bh), residual = new Float32Array(bw * bh);
  const nowHalf = motion ? half(now, w, h) : now, lastHalf = motion ? half(last, w, h) : last;
  const hw = w >> 1, hh = h >> 1, r = RANGE >> 1, hb = BLOCK >> 1;
  for (let by = 0; by < bh; by++) {
    for (let bx = 0; bx < bw; bx++) {
      let best = sad(now, last, w, h, bx * BLOCK, by * BLOCK, BLOCK, 0, 0), bdx = 0, bdy = 0;
      if (motion && best > 1) {
        // Coarse: whole half-size pixels; a shift wins only if clearly better than standing still.
        let coarse = sad(nowHalf, lastHalf, hw, hh, bx * hb, by * hb, hb, 0, 0) * 0.9, cx = 0, cy = 0;
        for (let dy = -r; dy <= r; dy++) {
          for (let dx = -r; dx <= r; dx++) {
            if (!dx && !dy) continue;
            const e = sad(nowHalf, lastHalf, hw, hh, bx * hb, by * hb, hb, dx, dy);
            if (e < coarse) { coarse = e; cx = dx; cy = dy; }
          }
        }
        // Fine: a pixel around twice the coarse shift, at full size.
        if (cx || cy) {
          for (let dy = 2 * cy - 1; dy <= 2 * cy + 1; dy++) {
            for (let dx = 2 * cx - 1; dx <= 2 * cx + 1; dx++) {
              const e = sad(now, last, w, h, bx * BLOCK, by * BLOCK, BLOCK, dx, dy);
              if (e < best) { best = e; bdx = dx; bdy = dy; }
            }
          }
        }
      }
      const b = by * bw + bx;
      dxs[b] = bdx; dys[b] = bdy; residual[b] = best;
    }
  }
  return { dxs, dys, residual, bw, bh };
}

/**
 * @param {Partial<typeof STEADY>} [options]
 * @returns {Steadier}
 */
export function createSteadier(options = {}) {
  const { hold, still, moving, cut, motion } = { ...STEADY, ...options };
  /** @type {{out: Uint8ClampedArray<ArrayBuffer>, luma: Float32Array, w: number, h: number} | null} */
  let last = null;

  /** @type {Steadier["next"]} */
  function next(input, painted) {
    const { width: w, height: h } = painted;
    const now = luma(input);
    const fresh = () => {
      last = { out: new Uint8ClampedArray(painted.data), luma: now, w, h };
      return new ImageData(new Uint8ClampedArray(painted.data), w, h);
    };
    if (!last || last.w !== w || last.h !== h) return fresh();
    const { dxs, dys, residual, bw, bh } = match(now, last.luma, w, h, motion);
    let total = 0;
    for (const e of residual) total += e;
    if (total / residual.length > cut) return fresh();
    // A block keeps as much as its worst neighbour allows: a hold never spreads into what changed.
    const keep = new Float32Array(bw * bh);
    for (let by = 0; by < bh; by++) {
      for (let bx = 0; bx < bw; bx++) {
        let d = 0;
        for (let y = Math.max(0, by - 1); y <= Math.min(bh - 1, by + 1); y++) {
          for (let x = Math.max(0, bx - 1); x <= Math.min(bw - 1, bx + 1); x++) d = Math.max(d, residual[y * bw + x]);
        }
        keep[by * bw + bx] = hold * Math.min(1, Math.max(0, (moving - d) / (moving - still)));
      }
    }
    // Blend per pixel: the last output moved by the pixel's block's shift, with the block weights interpolated
    // between block centres.
    const src = painted.data, out = last.out;
    const shown = new Uint8ClampedArray(w * h * 4);
    for (let y = 0; y < h; y++) {
      const fy = Math.min(bh - 1, Math.max(0, (y + 0.5) / BLOCK - 0.5));
      const y0 = fy | 0, y1 = Math.min(bh - 1, y0 + 1), ty = fy - y0;
      const row = ((y / BLOCK) | 0) * bw;
      for (let x = 0; x < w; x++) {
        const fx = Math.min(bw - 1, Math.max(0, (x + 0.5) / BLOCK - 0.5));
        const x0 = fx | 0, x1 = Math.min(bw - 1, x0 + 1), tx = fx - x0;
        const k = (keep[y0 * bw + x0] * (1 - tx) + keep[y0 * bw + x1] * tx) * (1 - ty)
          + (keep[y1 * bw + x0] * (1 - tx) + keep[y1 * bw + x1] * tx) * ty;
        const b = row + ((x / BLOCK) | 0);
        const sx = Math.min(w - 1, Math.max(0, x + dxs[b])), sy = Math.min(h - 1, Math.max(0, y + dys[b]));
        const q = 4 * (y * w + x), s = 4 * (sy * w + sx);
        shown[q] = k * out[s] + (1 - k) * src[q];
        shown[q + 1] = k * out[s + 1] + (1 - k) * src[q + 1];
        shown[q + 2] = k * out[s + 2] + (1 - k) * src[q + 2];
        shown[q + 3] = 255;
      }
    }
    last = { out: shown, luma: now, w, h };
    return new ImageData(new Uint8ClampedArray(shown), w, h);
  }

  return { next, reset: () => { last = null; } };
}
