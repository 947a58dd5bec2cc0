"""Side-by-side check of face enhancement: input | painted without faces | painted with faces.

    .venv/bin/python scripts/faces_side_by_side.py [--out out/faces] [--style v3-cute] [--max-side 512]

Paints each sample (the group photo; scikit-image's astronaut upright, rolled 30 degrees and cut in
half at the frame; coffee, which has no face) once at the capped size, then
restyles the faces at their own resolution with the same painter, and writes one PNG per sample. Prints the
faces found, the time enhancement adds per face, detection time, and the detector cache's hit rate (each
sample is detected twice, as a retry or style change would, so the second call must hit).

The painter is ``anipaint.get_painter(style)`` when the package provides it; otherwise the AnimeGANv3 tiny
Cute ONNX model is run directly with ONNX Runtime (a real model either way).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from anipaint.faces import FaceDetector, enhance_faces  # noqa: E402

SHARED = ROOT.parent / "shared"
YUNET = SHARED / "models" / "face" / "face_detection_yunet_2023mar_dynamic.onnx"
CUTE = SHARED / "models" / "animeganv3" / "AnimeGANv3_tiny_Cute.onnx"


def onnx_painter(model: Path = CUTE) -> Callable[[np.ndarray], np.ndarray]:
    """AnimeGANv3 ONNX: RGB uint8 in, RGB uint8 out, same size (padded by reflection to its stride of 32)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def paint(rgb: np.ndarray) -> np.ndarray:
        h, w = rgb.shape[:2]
        padded = cv2.copyMakeBorder(rgb, 0, -h % 32, 0, -w % 32, cv2.BORDER_REFLECT_101)
        x = padded[None].astype(np.float32) / 127.5 - 1
        y = session.run(None, {name: x})[0][0, :h, :w]
        return np.clip((y + 1) * 127.5 + 0.5, 0, 255).astype(np.uint8)

    return paint


def make_painter(style: str) -> tuple[str, Callable[[np.ndarray, int], np.ndarray], Callable[[np.ndarray], np.ndarray]]:
    """(label, paint(rgb, max_side) without face enhancement, paint_array(rgb) at the given size)."""
    try:
        from anipaint import get_painter

        painter = get_painter(style).warm()

        def capped_pkg(rgb: np.ndarray, side: int) -> np.ndarray:
            return np.asarray(painter.paint(Image.fromarray(rgb), max_side=side, faces=False).convert("RGB"))

        return f"anipaint {style}", capped_pkg, painter.paint_array
    except Exception as exc:  # the package's painter is not usable (yet): run the model directly
        print(f"(anipaint.get_painter({style!r}) unusable: {type(exc).__name__}; ONNX Runtime on {CUTE.name})")
        paint = onnx_painter()

        def capped(rgb: np.ndarray, side: int) -> np.ndarray:
            h, w = rgb.shape[:2]
            s = min(1.0, side / max(h, w))
            small = cv2.resize(rgb, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA) if s < 1 else rgb
            return paint(small)

        return "onnxruntime AnimeGANv3 tiny Cute", capped, paint


def samples() -> list[tuple[str, np.ndarray]]:
    import skimage.data

    group = np.asarray(Image.open(SHARED / "samples" / "group_pakutaso.jpg").convert("RGB"))
    astro = skimage.data.astronaut()
    rolled = cv2.warpAffine(
        astro, cv2.getRotationMatrix2D((224, 110), 30, 1.0), (512, 512), borderMode=cv2.BORDER_REFLECT_101
    )
    return [
        ("group", group),
        ("astronaut", astro),
        ("astronaut_rolled30", rolled),
        ("astronaut_border", np.ascontiguousarray(astro[:, 223:])),  # half the face out of frame
        ("coffee", skimage.data.coffee()),  # no face
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "faces")
    ap.add_argument("--style", default="v3-cute")
    ap.add_argument("--max-side", type=int, default=512)
    ap.add_argument("--face-size", type=int, default=512)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    label, paint, paint_face = make_painter(args.style)
    print(f"painter: {label}; max side {args.max_side}; face size {args.face_size}")
    detector = FaceDetector(YUNET, score_threshold=0.7, min_size=24, detect_max_side=1024, cache_size=16, cache_ttl=600)
    total_faces, total_added = 0, 0.0
    for name, rgb in samples():
        t0 = time.perf_counter()
        faces = detector.detect(rgb)
        t_detect = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = detector.detect(rgb)  # a retry / style change: must come from the cache
        t_hit = time.perf_counter() - t0
        assert len(again) == len(faces)
        plain = paint(rgb, args.max_side)
        t0 = time.perf_counter()
        enhanced = enhance_faces(rgb, plain, faces, lambda batch: np.stack([paint_face(c) for c in batch]),
                                 face_size=args.face_size)
        t_enh = time.perf_counter() - t0
        total_faces += len(faces)
        total_added += t_enh
        per_face = f"{t_enh / len(faces) * 1000:.0f} ms/face" if faces else "no faces"
        print(
            f"{name:10s} {rgb.shape[1]}x{rgb.shape[0]} -> {plain.shape[1]}x{plain.shape[0]}: "
            f"{len(faces)} face(s) {[round(f.box[2]) for f in faces]} px wide (source), "
            f"detect {t_detect * 1000:.0f} ms (cached {t_hit * 1000:.2f} ms), enhance {t_enh * 1000:.0f} ms "
            f"({per_face})"
        )
        h = plain.shape[0]
        shown = cv2.resize(rgb, (plain.shape[1], h), interpolation=cv2.INTER_AREA)
        Image.fromarray(np.hstack([shown, plain, enhanced])).save(args.out / f"{name}.png")
    stats = detector.cache_stats()
    print(
        f"faces found: {total_faces}; time added per face: {total_added / max(1, total_faces) * 1000:.0f} ms; "
        f"detector calls {stats['calls']}, cache hits {stats['hits']}, misses {stats['misses']}, "
        f"hit rate {stats['hit_rate']:.0%}"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
