// @ts-check
// Style strength in the browser: the photo and the full-strength picture mixed in CIE L*a*b* (D65) with the
// same formulas as anipaint/postprocess.py, so the slider shows what `strength=` paints, without a request.
const RGB_TO_XYZ = [
  [0.4124564, 0.3575761, 0.1804375],
  [0.2126729, 0.7151522, 0.0721750],
  [0.0193339, 0.1191920, 0.9503041],
];
const WHITE = RGB_TO_XYZ.map((row) => row[0] + row[1] + row[2]);
const DELTA = 6 / 29;
const XYZ_TO_RGB = invert(RGB_TO_XYZ);
// sRGB byte → linear light, for every byte value (the decode side needs no more than 256 values).
const LINEAR = Float64Array.from({ length: 256 }, (_, i) => {
  const c = i / 255;
  return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
});

/** @typedef {number[][]} Matrix  3×3, by rows */

/**
 * @param {Matrix} m
 * @returns {Matrix}
 */
function invert(m) {
  const [[a, b, c], [d, e, f], [g, h, i]] = m;
  const A = e * i - f * h, B = f * g - d * i, C = d * h - e * g;
  const det = a * A + b * B + c * C;
  return [
    [A / det, (c * h - b * i) / det, (b * f - c * e) / det],
    [B / det, (a * i - c * g) / det, (c * d - a * f) / det],
    [C / det, (b * g - a * h) / det, (a * e - b * d) / det],
  ];
}

/** @param {number} t */
const f = (t) => (t > DELTA ** 3 ? Math.cbrt(t) : t / (3 * DELTA * DELTA) + 4 / 29);
/** @param {number} v */
const fInv = (v) => (v > DELTA ? v * v * v : 3 * DELTA * DELTA * (v - 4 / 29));
/** @param {number} lin */
const encode = (lin) => {
  const v = lin <= 0 ? 0 : lin >= 1 ? 1 : lin;
  const c = v <= 0.0031308 ? 12.92 * v : 1.055 * v ** (1 / 2.4) - 0.055;
  return Math.round(c * 255);
};

// RGBA bytes (ImageData.data) → L*a*b*, three floats per pixel.
/**
 * @param {Uint8ClampedArray} rgba
 * @returns {Float32Array}
 */
export function toLab(rgba) {
  const n = rgba.length >> 2;
  const lab = new Float32Array(n * 3);
  const [m0, m1, m2] = RGB_TO_XYZ;
  for (let p = 0; p < n; p++) {
    const r = LINEAR[rgba[4 * p]], g = LINEAR[rgba[4 * p + 1]], b = LINEAR[rgba[4 * p + 2]];
    const fx = f((m0[0] * r + m0[1] * g + m0[2] * b) / WHITE[0]);
    const fy = f((m1[0] * r + m1[1] * g + m1[2] * b) / WHITE[1]);
    const fz = f((m2[0] * r + m2[1] * g + m2[2] * b) / WHITE[2]);
    lab[3 * p] = 116 * fy - 16;
    lab[3 * p + 1] = 500 * (fx - fy);
    lab[3 * p + 2] = 200 * (fy - fz);
  }
  return lab;
}

// photo + s·(painted − photo) in L*a*b*, written as RGB into `out` (an ImageData's data; alpha untouched).
/**
 * @param {Float32Array} photoLab
 * @param {Float32Array} paintedLab
 * @param {number} s
 * @param {Uint8ClampedArray} out
 */
export function mix(photoLab, paintedLab, s, out) {
  const [m0, m1, m2] = XYZ_TO_RGB;
  const n = photoLab.length / 3;
  for (let p = 0; p < n; p++) {
    const k = 3 * p;
    const L = photoLab[k] + s * (paintedLab[k] - photoLab[k]);
    const A = photoLab[k + 1] + s * (paintedLab[k + 1] - photoLab[k + 1]);
    const B = photoLab[k + 2] + s * (paintedLab[k + 2] - photoLab[k + 2]);
    const fy = (L + 16) / 116;
    const x = fInv(fy + A / 500) * WHITE[0], y = fInv(fy) * WHITE[1], z = fInv(fy - B / 200) * WHITE[2];
    out[4 * p] = encode(m0[0] * x + m0[1] * y + m0[2] * z);
    out[4 * p + 1] = encode(m1[0] * x + m1[1] * y + m1[2] * z);
    out[4 * p + 2] = encode(m2[0] * x + m2[1] * y + m2[2] * z);
  }
}
