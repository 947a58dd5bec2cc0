// @ts-check
// Steadiness for a live painted stream (camera.js), cheap enough for the page's thread: each new painted frame is
// blended with the last one shown, moved along the camera picture's motion, wherever that move explains the new
// camera picture; where it does not (something new, something turned), the new painting shows as it is.
//
// The motion is block matching on a small grid: for each BLOCK×BLOCK block of the new frame's luma, the shift
// (within ±RANGE pixels) of the last frame's luma that matches it best, searched on a half-size copy, refined by a
// pixel at full size, then to a fraction of a pixel by a Lucas–Kanade step. The shifts are interpolated between
// block centres, and the last output is moved by them with Catmull–Rom weights (bilinear ones, moved a fraction
// of a pixel frame after frame, blur it). The block's mean |Δluma| after its shift (its residual, 0–255), the
// largest among it and its neighbours, decides how much of the moved last output it keeps: `hold` under `still`
// (a webcam's noise), nothing over `moving`, linearly less in between; the block weights are interpolated per
// pixel, so no block edges show. A mean residual over `cut` across the frame (a scene change, a fast movement,
// the camera turned) starts afresh: the new painting as it is. Each pixel's own residual then lowers its share: a
// thin thing that moved away (a dog's leash on a pale floor) barely moves its block's mean, and was carried along
// as a faint trace before that check.
//
// Server clips warp the last frame along a dense optical flow (anipaint/media/temporal.py); a phone's or laptop's
// spare time per frame is a few milliseconds, and a block grid's shifts fit in it (docs/benchmarks.md, "The live
// camera", has what each step bought).

const BLOCK = 8;
const RANGE = 6; // the largest shift searched, in pixels of the working size (an even number)
const LAMBDA = 4; // the sub-pixel step's regulariser: a block's mean squared luma gradient under it barely moves

/**
 * The defaults: `hold`, the share of the moved last output kept where the move explains the new picture; `still`
 * and `moving`, the block residuals (mean |Δluma|, 0–255) under which it is kept whole and over which not at all;
 * `cut`, the frame's mean residual over which everything starts afresh; `motion`: false keeps only what did not
 * move (no search); `subpixel`: false, whole-pixel shifts, one per block (for comparison); `pixelStill` and
 * `pixelMoving`, a pixel's own |Δluma| after the move under which its block's share is kept and over which none
 * (0: no per-pixel check).
 */
export const STEADY = {
  hold: 0.75, still: 3, moving: 24, cut: 28, motion: true, subpixel: true, pixelStill: 16, pixelMoving: 40,
};

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

// Bilinear sample of a luma plane at (x, y), clamped to its edges.
/**
 * @param {Float32Array} l
 * @param {number} w
 * @param {number} h
 * @param {number} x
 * @param {number} y
 */
function at(l, w, h, x, y) {
  x = Math.min(w - 1, Math.max(0, x)); y = Math.min(h - 1, Math.max(0, y));
  const x0 = x | 0, y0 = y | 0, x1 = Math.min(w - 1, x0 + 1), y1 = Math.min(h - 1, y0 + 1), tx = x - x0, ty = y - y0;
  return (l[y0 * w + x0] * (1 - tx) + l[y0 * w + x1] * tx) * (1 - ty)
    + (l[y1 * w + x0] * (1 - tx) + l[y1 * w + x1] * tx) * ty;
}

// A Lucas–Kanade step from the whole-pixel shift (dx, dy) of a block at (x0, y0): the sub-pixel shift that best
// explains now(x) ≈ last(x + d) to first order, regularised so that a flat block or a lone edge (where the shift
// along the edge is unknown) stays where the whole-pixel search put it. Returns [dx, dy, residual after it].
/**
 * @param {Float32Array} now
 * @param {Float32Array} last
 * @param {number} w
 * @param {number} h
 * @param {number} x0
 * @param {number} y0
 * @param {number} dx
 * @param {number} dy
 */
function refine(now, last, w, h, x0, y0, dx, dy) {
  const x1 = Math.min(w, x0 + BLOCK), y1 = Math.min(h, y0 + BLOCK), n = (x1 - x0) * (y1 - y0);
  let gxx = LAMBDA * n, gxy = 0, gyy = LAMBDA * n, bx = 0, by = 0;
  for (let y = y0; y < y1; y++) {
    const sy = Math.min(h - 1, Math.max(0, y + dy)), r = sy * w;
    const up = Math.max(0, sy - 1) * w, down = Math.min(h - 1, sy + 1) * w;
    for (let x = x0; x < x1; x++) {
      const sx = Math.min(w - 1, Math.max(0, x + dx));
      const ix = (last[r + Math.min(w - 1, sx + 1)] - last[r + Math.max(0, sx - 1)]) / 2;
      const iy = (last[down + sx] - last[up + sx]) / 2;
      const it = now[y * w + x] - last[r + sx];
      gxx += ix * ix; gxy += ix * iy; gyy += iy * iy; bx += ix * it; by += iy * it;
    }
  }
  const det = gxx * gyy - gxy * gxy;
  const ux = dx + Math.min(1, Math.max(-1, (gyy * bx - gxy * by) / det));
  const uy = dy + Math.min(1, Math.max(-1, (gxx * by - gxy * bx) / det));
  let sum = 0;
  for (let y = y0; y < y1; y++) {
    for (let x = x0; x < x1; x++) sum += Math.abs(now[y * w + x] - at(last, w, h, x + ux, y + uy));
  }
  return [ux, uy, sum / n];
}

/**
 * For each block of `now`: the shift into `last` that matches it best, and its residual after that shift.
 * @param {Float32Array} now
 * @param {Float32Array} last
 * @param {number} w
 * @param {number} h
 * @param {boolean} motion
 * @param {boolean} subpixel
 */
function match(now, last, w, h, motion, subpixel) {
  const bw = Math.ceil(w / BLOCK), bh = Math.ceil(h / BLOCK);
  const dxs = new Float32Array(bw * bh), dys = new Float32Array(bw * bh), residual = new Float32Array(bw * bh);
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
        if (subpixel) {
          const [sx, sy, e] = refine(now, last, w, h, bx * BLOCK, by * BLOCK, bdx, bdy);
          if (e < best) { best = e; bdx = sx; bdy = sy; }
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
  const { hold, still, moving, cut, motion, subpixel, pixelStill, pixelMoving } = { ...STEADY, ...options };
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
    const { dxs, dys, residual, bw, bh } = match(now, last.luma, w, h, motion, subpixel);
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
    // The carried painting's pull on each pixel: k × (moved last output − new painting), per channel.
    const pull = new Float32Array(w * h * 3);
    for (let y = 0; y < h; y++) {
      const fy = Math.min(bh - 1, Math.max(0, (y + 0.5) / BLOCK - 0.5));
      const y0 = fy | 0, y1 = Math.min(bh - 1, y0 + 1), ty = fy - y0;
      const row = ((y / BLOCK) | 0) * bw;
      for (let x = 0; x < w; x++) {
        const fx = Math.min(bw - 1, Math.max(0, (x + 0.5) / BLOCK - 0.5));
        const x0 = fx | 0, x1 = Math.min(bw - 1, x0 + 1), tx = fx - x0;
        const w00 = (1 - tx) * (1 - ty), w01 = tx * (1 - ty), w10 = (1 - tx) * ty, w11 = tx * ty;
        const b00 = y0 * bw + x0, b01 = y0 * bw + x1, b10 = y1 * bw + x0, b11 = y1 * bw + x1;
        let k = keep[b00] * w00 + keep[b01] * w01 + keep[b10] * w10 + keep[b11] * w11;
        if (k <= 0) continue;
        // Where the last output comes from: the shifts interpolated between block centres like the weights, so that
        // a turn or a zoom moves it smoothly rather than block by block (whole-pixel shifts: the pixel's block's).
        const b = row + ((x / BLOCK) | 0);
        const mx = subpixel ? dxs[b00] * w00 + dxs[b01] * w01 + dxs[b10] * w10 + dxs[b11] * w11 : dxs[b];
        const my = subpixel ? dys[b00] * w00 + dys[b01] * w01 + dys[b10] * w10 + dys[b11] * w11 : dys[b];
        if (pixelMoving > 0) {
          // This pixel's own residual: a thin thing that moved away (a leash, a line) barely moves its block's mean
          // but leaves its old place far from the new camera picture, and must not be carried there.
          const r = Math.abs(now[y * w + x] - at(last.luma, w, h, x + mx, y + my));
          if (r > pixelStill) k *= Math.max(0, (pixelMoving - r) / (pixelMoving - pixelStill));
          if (k <= 0) continue;
        }
        const sx = Math.min(w - 1, Math.max(0, x + mx)), sy = Math.min(h - 1, Math.max(0, y + my));
        const ax = sx | 0, ay = sy | 0, ex = sx - ax, ey = sy - ay;
        const q = 4 * (y * w + x), p = 3 * (y * w + x);
        if (ex || ey) {
          // Catmull–Rom weights of the four columns and rows around the point.
          const ex2 = ex * ex, ex3 = ex2 * ex, ey2 = ey * ey, ey3 = ey2 * ey;
          const kx0 = (-ex3 + 2 * ex2 - ex) / 2, kx1 = (3 * ex3 - 5 * ex2 + 2) / 2;
          const kx2 = (-3 * ex3 + 4 * ex2 + ex) / 2, kx3 = (ex3 - ex2) / 2;
          const i0 = 4 * Math.max(0, ax - 1), i1 = 4 * ax;
          const i2 = 4 * Math.min(w - 1, ax + 1), i3 = 4 * Math.min(w - 1, ax + 2);
          let m0 = 0, m1 = 0, m2 = 0;
          for (let j = 0; j < 4; j++) {
            const r = 4 * w * Math.min(h - 1, Math.max(0, ay + j - 1));
            const ky = j === 0 ? (-ey3 + 2 * ey2 - ey) / 2 : j === 1 ? (3 * ey3 - 5 * ey2 + 2) / 2
              : j === 2 ? (-3 * ey3 + 4 * ey2 + ey) / 2 : (ey3 - ey2) / 2;
            const c0 = kx0 * ky, c1 = kx1 * ky, c2 = kx2 * ky, c3 = kx3 * ky;
            const t0 = r + i0, t1 = r + i1, t2 = r + i2, t3 = r + i3;
            m0 += out[t0] * c0 + out[t1] * c1 + out[t2] * c2 + out[t3] * c3;
            m1 += out[t0 + 1] * c0 + out[t1 + 1] * c1 + out[t2 + 1] * c2 + out[t3 + 1] * c3;
            m2 += out[t0 + 2] * c0 + out[t1 + 2] * c1 + out[t2 + 2] * c2 + out[t3 + 2] * c3;
          }
          pull[p] = k * (m0 - src[q]); pull[p + 1] = k * (m1 - src[q + 1]); pull[p + 2] = k * (m2 - src[q + 2]);
          continue;
        }
        const bxp = Math.min(w - 1, ax + 1), byp = Math.min(h - 1, ay + 1);
        const s00 = 4 * (ay * w + ax), s01 = 4 * (ay * w + bxp), s10 = 4 * (byp * w + ax), s11 = 4 * (byp * w + bxp);
        const c00 = (1 - ex) * (1 - ey), c01 = ex * (1 - ey), c10 = (1 - ex) * ey, c11 = ex * ey;
        for (let c = 0; c < 3; c++) {
          const moved = out[s00 + c] * c00 + out[s01 + c] * c01 + out[s10 + c] * c10 + out[s11 + c] * c11;
          pull[p + c] = k * (moved - src[q + c]);
        }
      }
    }
    const shown = new Uint8ClampedArray(w * h * 4);
    for (let p = 0, q = 0; p < pull.length; p += 3, q += 4) {
      shown[q] = src[q] + pull[p]; shown[q + 1] = src[q + 1] + pull[p + 1]; shown[q + 2] = src[q + 2] + pull[p + 2];
      shown[q + 3] = 255;
    }
    last = { out: shown, luma: now, w, h };
    return new ImageData(new Uint8ClampedArray(shown), w, h);
  }

  return { next, reset: () => { last = null; } };
}
