// @ts-check
// The server's long-side cap in the browser: anipaint/preprocess.py fit_long_side and Pillow's
// resize(LANCZOS, reducing_gap=3.0), step by step (an integer box reduce first where the picture is more than
// three times too big, then Lanczos-3 in 8-bit fixed point, horizontal pass first), so the device paints the
// picture the server would have painted, to within a level here and there.

const PRECISION_BITS = 32 - 8 - 2;
const ONE = 2 ** PRECISION_BITS;

// anipaint/preprocess.py fit_long_side: never upscales; 0 or null keeps the size.
/**
 * @param {number} width
 * @param {number} height
 * @param {number | null} maxSide
 * @returns {[number, number]}
 */
export function fitLongSide(width, height, maxSide) {
  if (!maxSide || Math.max(width, height) <= maxSide) return [width, height];
  const scale = maxSide / Math.max(width, height);
  // Python's round() rounds halves to even
  /** @param {number} v */
  const round = (v) => { const r = Math.round(v); return Math.abs(v % 1) === 0.5 && r % 2 ? r - 1 : r; };
  return [Math.max(1, round(width * scale)), Math.max(1, round(height * scale))];
}

/** @param {number} x */
const sinc = (x) => { if (x === 0) return 1; const px = x * Math.PI; return Math.sin(px) / px; };
/** @param {number} x */
const lanczos = (x) => (x > -3 && x < 3 ? sinc(x) * sinc(x / 3) : 0);

// Pillow's precompute_coeffs: for each output pixel the first input pixel, the count and fixed-point weights.
/**
 * @param {number} inSize
 * @param {number} in0
 * @param {number} in1
 * @param {number} outSize
 */
function coefficients(inSize, in0, in1, outSize) {
  const scale = (in1 - in0) / outSize;
  const filterscale = Math.max(scale, 1);
  const support = 3 * filterscale;
  const taps = Math.ceil(support) * 2 + 1;
  const bounds = new Int32Array(outSize * 2);
  const weights = new Int32Array(outSize * taps);
  const k = new Float64Array(taps);
  for (let xx = 0; xx < outSize; xx++) {
    const center = in0 + (xx + 0.5) * scale;
    let xmin = Math.trunc(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    let xmax = Math.trunc(center + support + 0.5);
    if (xmax > inSize) xmax = inSize;
    xmax -= xmin;
    let ww = 0;
    for (let x = 0; x < xmax; x++) { k[x] = lanczos((x + xmin - center + 0.5) / filterscale); ww += k[x]; }
    for (let x = 0; x < xmax; x++) {
      const w = ww !== 0 ? k[x] / ww : k[x];
      weights[xx * taps + x] = w < 0 ? Math.trunc(-0.5 + w * ONE) : Math.trunc(0.5 + w * ONE);
    }
    bounds[2 * xx] = xmin;
    bounds[2 * xx + 1] = xmax;
  }
  return { bounds, weights, taps };
}

/** @param {number} v */
const clip8 = (v) => { const r = Math.floor(v / ONE); return r < 0 ? 0 : r > 255 ? 255 : r; };

// One pass of `channels`-interleaved bytes along x (horizontal) or y.
/**
 * @param {Uint8Array} src
 * @param {number} w
 * @param {number} h
 * @param {number} channels
 * @param {number} outSize
 * @param {number} box0
 * @param {number} box1
 * @param {boolean} horizontal
 * @returns {Uint8Array}
 */
function pass(src, w, h, channels, outSize, box0, box1, horizontal) {
  const c = coefficients(horizontal ? w : h, box0, box1, outSize);
  const ow = horizontal ? outSize : w, oh = horizontal ? h : outSize;
  const out = new Uint8Array(ow * oh * channels);
  const acc = new Float64Array(channels);
  for (let y = 0; y < oh; y++) {
    for (let x = 0; x < ow; x++) {
      const o = horizontal ? x : y;
      const first = c.bounds[2 * o], count = c.bounds[2 * o + 1], base = o * c.taps;
      acc.fill(ONE / 2);
      for (let t = 0; t < count; t++) {
        const weight = c.weights[base + t];
        const p = horizontal ? (y * w + first + t) * channels : ((first + t) * w + x) * channels;
        for (let ch = 0; ch < channels; ch++) acc[ch] += src[p + ch] * weight;
      }
      const q = (y * ow + x) * channels;
      for (let ch = 0; ch < channels; ch++) out[q + ch] = clip8(acc[ch]);
    }
  }
  return out;
}

// Pillow's reduce(): each output pixel the rounded mean of its fx×fy block (the last ones may be smaller).
/**
 * @param {Uint8Array} src
 * @param {number} w
 * @param {number} h
 * @param {number} channels
 * @param {number} fx
 * @param {number} fy
 * @returns {{data: Uint8Array, w: number, h: number}}
 */
function reduce(src, w, h, channels, fx, fy) {
  const ow = Math.ceil(w / fx), oh = Math.ceil(h / fy);
  const out = new Uint8Array(ow * oh * channels);
  const acc = new Float64Array(channels);
  for (let y = 0; y < oh; y++) {
    const y0 = y * fy, y1 = Math.min(h, y0 + fy);
    for (let x = 0; x < ow; x++) {
      const x0 = x * fx, x1 = Math.min(w, x0 + fx);
      acc.fill(0);
      for (let yy = y0; yy < y1; yy++) {
        for (let xx = x0; xx < x1; xx++) {
          const p = (yy * w + xx) * channels;
          for (let ch = 0; ch < channels; ch++) acc[ch] += src[p + ch];
        }
      }
      const n = (y1 - y0) * (x1 - x0), q = (y * ow + x) * channels;
      for (let ch = 0; ch < channels; ch++) out[q + ch] = Math.floor((acc[ch] + n / 2) / n);
    }
  }
  return { data: out, w: ow, h: oh };
}

// Bytes of a w×h picture with `channels` interleaved → resized to ow×oh as Pillow's
// resize((ow, oh), LANCZOS, reducing_gap=3.0) does.
/**
 * @param {Uint8Array} src
 * @param {number} w
 * @param {number} h
 * @param {number} channels
 * @param {number} ow
 * @param {number} oh
 * @returns {Uint8Array}
 */
export function resizeLanczos(src, w, h, channels, ow, oh) {
  if (ow === w && oh === h) return src;
  const fx = Math.trunc(w / ow / 3) || 1, fy = Math.trunc(h / oh / 3) || 1;
  let data = src, iw = w, ih = h, bx = w, by = h;
  if (fx > 1 || fy > 1) {
    ({ data, w: iw, h: ih } = reduce(src, w, h, channels, fx, fy));
    bx = w / fx;
    by = h / fy;
  }
  if (ow !== iw || bx !== iw) { data = pass(data, iw, ih, channels, ow, 0, bx, true); iw = ow; }
  if (oh !== ih || by !== ih) data = pass(data, iw, ih, channels, oh, 0, by, false);
  return data;
}
