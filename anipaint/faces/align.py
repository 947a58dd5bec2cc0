"""Face alignment: the FFHQ-style square crop of a face out of the full-resolution source, and its transform.

Every later stage works in the aligned crop's coordinates and maps back with the 2x3 similarity returned here,
so the crop can be taken at any working size (:func:`crop_side` gives the size a face's own pixels support).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class Face:
    box: tuple[float, float, float, float]  # x, y, w, h in source pixels
    landmarks: np.ndarray  # (5, 2) source pixels: right eye, left eye, nose tip, right/left mouth corner
    score: float

    def scaled(self, sx: float, sy: float) -> Face:
        """The same face in a picture ``sx`` times as wide and ``sy`` times as tall (pixel-edge coordinates)."""
        x, y, w, h = self.box
        landmarks = self.landmarks * (sx, sy)
        landmarks.setflags(write=False)
        return Face((x * sx, y * sy, w * sx, h * sy), landmarks, self.score)


def as_rgb(img: np.ndarray) -> np.ndarray:
    if img.dtype != np.uint8:
        raise ValueError("Face detection expects a uint8 image.")
    if img.ndim == 2:
        return np.repeat(img[:, :, None], 3, axis=2)
    if img.ndim == 3 and img.shape[2] == 4:
        return img[:, :, :3]
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"Face detection expects an RGB image, got shape {img.shape}.")
    return img


def ffhq_quad(landmarks: np.ndarray) -> np.ndarray:
    """FFHQ crop square (4 corners: top-left, bottom-left, bottom-right, top-right) from YuNet's 5 points.

    The FFHQ recipe (Karras et al.) uses the eye centres and mouth corners: the square is rotated so the eyes
    are level, centred a little below the eyes and about 4 eye distances wide, leaving room for hair and chin.
    YuNet's "right eye" is the subject's right, i.e. the one on the image's left.
    """
    lm = np.asarray(landmarks, np.float64)
    eye_l, eye_r, mouth_l, mouth_r = lm[0], lm[1], lm[3], lm[4]  # image-left / image-right
    eye_avg = (eye_l + eye_r) / 2
    eye_to_eye = eye_r - eye_l
    eye_to_mouth = (mouth_l + mouth_r) / 2 - eye_avg
    x = eye_to_eye - np.flipud(eye_to_mouth) * (-1, 1)  # both cues to the roll, so one bad point matters less
    x /= np.hypot(*x) + 1e-9
    x *= max(np.hypot(*eye_to_eye) * 2.0, np.hypot(*eye_to_mouth) * 1.8)
    y = np.flipud(x) * (-1, 1)
    c = eye_avg + eye_to_mouth * 0.1
    return np.stack([c - x - y, c - x + y, c + x + y, c + x - y])


def quad_transform(quad: np.ndarray, size: int) -> np.ndarray:
    """2x3 similarity mapping the quad onto the ``size`` square (pixel centres at 0.5 .. size-0.5)."""
    dst = np.float32([[0, 0], [0, size], [size, size]]) - 0.5
    return cv2.getAffineTransform(quad[:3].astype(np.float32), dst).astype(np.float64)


def compose(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """2x3 affine ``a`` after ``b``."""
    return (np.vstack([a, (0, 0, 1)]) @ np.vstack([b, (0, 0, 1)]))[:2]


def scale_of(m: np.ndarray) -> float:
    return float(np.sqrt(abs(np.linalg.det(m[:, :2]))))


def crop_side(face: Face, largest: int = 512, multiple: int = 8, smallest: int = 128, scale: float = 1.0) -> int:
    """The working side of a face's aligned crop: the side its FFHQ square has in the source (times ``scale``),
    rounded up to a multiple of 8 (most generators' stride; one with a larger stride pads the rest itself), between
    ``smallest`` and ``largest``. A bigger crop would only upsample the same source pixels, at a cost growing with
    the square of its side: rounding up to 32 instead painted ~14 % more pixels on the group photo."""
    quad = ffhq_quad(face.landmarks)
    side = float(np.hypot(*(quad[3] - quad[0]))) * scale
    return int(np.clip(-(-side // multiple) * multiple, smallest, largest))


def align_face(source: np.ndarray, face: Face, face_size: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """The aligned ``face_size`` square crop of ``face`` from the full-resolution source, and its 2x3 transform
    (source pixels -> crop pixels). Parts outside the frame are filled by reflection, so a face at the border
    still gives the painter a whole-looking face; those parts are never blended back."""
    matrix = quad_transform(ffhq_quad(face.landmarks), face_size)
    return warp_from(source, matrix, face_size, face_size, cv2.BORDER_REFLECT_101), matrix


def warp_from(
    src: np.ndarray, matrix: np.ndarray, out_w: int, out_h: int, border: int, x0: int = 0, y0: int = 0
) -> np.ndarray:
    """``warpAffine`` that does not alias when shrinking: when the transform shrinks (a face bigger than the
    crop, or a 512 crop going back into a 60 px face), the needed region is first reduced with INTER_AREA.
    ``x0, y0`` is the origin of the output window in the transform's output space."""
    matrix = compose(np.array([[1, 0, -x0], [0, 1, -y0]], np.float64), matrix)
    k = scale_of(matrix)
    if k < 0.9:
        inv = cv2.invertAffineTransform(matrix)
        corners = np.array([[0, 0, 1], [out_w, 0, 1], [0, out_h, 1], [out_w, out_h, 1]], np.float64) @ inv.T
        sh, sw = src.shape[:2]
        left = int(np.clip(np.floor(corners[:, 0].min()) - 2, 0, sw - 1))
        top = int(np.clip(np.floor(corners[:, 1].min()) - 2, 0, sh - 1))
        right = int(np.clip(np.ceil(corners[:, 0].max()) + 3, left + 1, sw))
        bottom = int(np.clip(np.ceil(corners[:, 1].max()) + 3, top + 1, sh))
        region = src[top:bottom, left:right]
        rw, rh = max(1, round(region.shape[1] * k)), max(1, round(region.shape[0] * k))
        src = cv2.resize(region, (rw, rh), interpolation=cv2.INTER_AREA)
        fx, fy = region.shape[1] / rw, region.shape[0] / rh
        # reduced pixel (i, j) has its centre at region pixel ((i + .5) * fx - .5, ...), offset by left/top
        back = np.array([[fx, 0, 0.5 * fx - 0.5 + left], [0, fy, 0.5 * fy - 0.5 + top]], np.float64)
        matrix = compose(matrix, back)
    return cv2.warpAffine(src, matrix, (out_w, out_h), flags=cv2.INTER_LINEAR, borderMode=border)
