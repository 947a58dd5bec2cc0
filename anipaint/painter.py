"""One style's whole pipeline: imaging → preprocess → engine → faces → postprocess.

A :class:`Painter` is created once per style per process (:func:`get_painter`) and shared by every caller;
its model loads on first use (or :meth:`Painter.warm`) under a lock, so concurrent first requests load it once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from PIL import Image

from anipaint import imaging, postprocess, preprocess
from anipaint.engine import Engine
from anipaint.errors import ModelStoreError, OptionError
from anipaint.faces import blend as face_pass
from anipaint.faces import detect as face_detect
from anipaint.faces import portrait as portrait_mode
from anipaint.faces import segmentation
from anipaint.models import availability, helpers, store
from anipaint.models.registry import Style
from anipaint.options import PaintOptions
from anipaint.settings import Settings, get_settings

Progress = Callable[[str, float], None]
Segment = segmentation.Segmenter


@dataclass(frozen=True)
class PaintResult:
    """A painted picture with what it took: ``get_painter().paint_result("me.jpg").timings``."""

    image: Image.Image
    faces_found: int | None  # faces the face pass or portrait mode found; None when neither ran
    timings: dict[str, float]
    engine: str  # the backend this style's network ran on: torch, compiled, onnxruntime, strips, int8


class Painter:
    def __init__(self, style: Style, settings: Settings) -> None:
        self.style = style
        self.settings = settings
        self._engine: Engine | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Painter({self.style.id!r})"

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            with self._lock:
                if self._engine is None:
                    artefact = store.ensure_converted(self.style, self.settings)
                    self._engine = Engine(self.style, artefact, self.settings)
        return self._engine

    @property
    def loaded(self) -> bool:
        return self._engine is not None

    def reload_engine(self) -> None:
        """Open the style's engine again (e.g. its fast backend was just built): paints already running finish
        on the old one, the next ones use the new one."""
        if self._engine is not None:
            fresh = Engine(self.style, store.artefact_path(self.style, self.settings), self.settings)
            with self._lock:
                self._engine = fresh

    def warm(self) -> Painter:
        """Load the model now rather than on the first picture."""
        _ = self.engine
        return self

    def paint_array(self, rgb: np.ndarray, progress: Callable[[float], None] | None = None) -> np.ndarray:
        """RGB uint8 (H, W, 3) → painted RGB uint8 of the same size (no cap, no faces).

        ``progress`` receives the fraction done while a large picture is painted in strips or tiles."""
        return self.engine.run(rgb, progress)

    def paint_batch(self, crops: np.ndarray) -> np.ndarray:
        """(N, H, W, 3) uint8 → painted, same shape: one generator call where the network takes a batch."""
        return self.engine.run_batch(crops)

    def paint(self, image: imaging.ImageInput, options: PaintOptions | None = None, **fields: Any) -> Image.Image:
        """Paint a picture; the options are :meth:`paint_result`'s. Returns the picture only."""
        return self.paint_result(image, options, **fields).image

    def paint_result(
        self,
        image: imaging.ImageInput,
        options: PaintOptions | None = None,
        *,
        progress: Progress | None = None,
        **fields: Any,
    ) -> PaintResult:
        """Paint a picture with ``options`` (:class:`PaintOptions`; keyword arguments name its fields and override
        them). A style named in the options must be this painter's."""
        asked = replace(options, **fields) if options is not None else PaintOptions(**fields)
        if (asked.style not in (None, self.style.id)
                and availability.resolve(asked.style, self.settings).id != self.style.id):
            raise OptionError(f"this painter paints {self.style.id}, not {asked.style}: use get_painter(style)")
        return self._paint(image, asked.settled(self.settings), progress or (lambda stage, fraction: None))

    def _paint(self, image: imaging.ImageInput, options: PaintOptions, report: Progress) -> PaintResult:
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        report("decode", 0.05)
        img = imaging.load_image(image, max_pixels=self.settings.max_pixels)
        work = preprocess.to_work_image(img, options.max_side)
        background_painter = get_painter(options.background, self.settings) if options.background else None
        if background_painter is not None:
            check_background(background_painter.style)
        face_only = self.style.paints_faces_only  # a face model asked for a whole picture: it restyles the faces only
        portrait = options.portrait or face_only
        use_faces = not portrait and bool(options.faces)
        t1 = time.perf_counter()
        timings["decode"] = t1 - t0
        report("paint", 0.1)
        share = 0.5 if background_painter else 0.7
        if face_only:
            painted = work.rgb.copy()
        else:
            painted = self.paint_array(work.rgb, lambda done: report("paint", 0.1 + share * done))
        t2 = time.perf_counter()
        timings["paint"] = t2 - t1
        if background_painter is not None:
            report("background", 0.6)
            other = background_painter.paint_array(work.rgb, lambda done: report("background", 0.6 + 0.2 * done))
            mask = portrait_mode.person_mask(work.rgb, self._segmenter(), painted.shape[:2])
            painted = portrait_mode.composite(painted, other, mask)
            timings["background"] = time.perf_counter() - t2
        found: int | None = None
        if use_faces or portrait:
            t3 = time.perf_counter()
            report("faces", 0.8)
            painted, found = self._restyle_faces(work, painted, options.face_style, portrait)
            timings["faces"] = time.perf_counter() - t3
        report("encode", 0.95)
        result = postprocess.finish(painted, work.alpha, work.rgb, options.strength)
        timings["total"] = time.perf_counter() - t0
        report("done", 1.0)
        return PaintResult(result, found, timings, self.engine.backend_name)

    def _segmenter(self) -> Segment:
        return segmentation.load_segmenter(self.settings)

    def _restyle_faces(
        self, work: preprocess.WorkImage, painted: np.ndarray, face_style: str | None, portrait: bool
    ) -> tuple[np.ndarray, int | None]:
        """The face pass or portrait mode over ``painted``, and how many faces were found (None: no detector)."""
        model = helpers.install_face_detector(self.settings)
        if model is None:  # no detector model available: paint without the face pass
            if portrait:
                raise ModelStoreError("portrait mode needs the face detector (face/face_detection_yunet_*.onnx)")
            return painted, None
        detector = face_detect.get_face_detector(self.settings, model)
        if portrait:  # the face model was trained on level, FFHQ-aligned faces: refined landmarks
            found = detector.detect(work.source)
        else:
            found = face_pass.faces_as_painted(detector, work.source.shape, work.rgb)
        if not found:
            return painted, 0
        size = self.settings.face_size
        if portrait:
            face_painter = self if self.style.paints_faces_only else get_painter(self.settings.portrait_face_style,
                                                                             self.settings)
            out = portrait_mode.portrait_faces(work.source, painted, found, face_painter.paint_batch,
                                                self._segmenter(), face_size=size,
                                                paint_shape=face_painter.style.paint_shape)
        else:
            face_painter = get_painter(face_style, self.settings) if face_style else self
            out = face_pass.enhance_faces(work.source, painted, found, face_painter.paint_batch, face_size=size)
        return out, len(found)


_painters: dict[tuple[str, str], Painter] = {}
_painters_lock = threading.Lock()

def styles_used(options: PaintOptions, settings: Settings) -> list[str]:
    """The style ids a paint with these settled options runs: its style, then the face pass's, the background's or
    portrait mode's face model, as :meth:`Painter._paint` chooses them."""
    used = [options.style or settings.default_style]
    if options.portrait:
        used.append(settings.portrait_face_style)
    elif options.faces and options.face_style:
        used.append(options.face_style)
    if options.background:
        used.append(options.background)
    return list(dict.fromkeys(availability.resolve(name, settings).id for name in used))


def check_background(style: Style) -> None:
    """Raises OptionError for a style that cannot paint a background (a face model paints aligned crops only)."""
    if style.paints_faces_only:
        raise OptionError(f"{style.id} paints face crops only, not a background")


def loaded_painter(style_id: str, settings: Settings) -> Painter | None:
    """The painter for an exact style id if this process has already created it."""
    with _painters_lock:
        return _painters.get((style_id, str(settings.home)))


def get_painter(style: str | None = None, settings: Settings | None = None) -> Painter:
    """The shared painter for a style id or alias (default: settings.default_style): one per style per process.

    >>> from anipaint import get_painter
    >>> painter = get_painter("shinkai").warm()                          # doctest: +SKIP
    >>> painter.paint("me.jpg", max_side=1024).save("me-anime.png")       # doctest: +SKIP
    """
    s = settings if settings is not None else get_settings()
    resolved = availability.resolve(style, s)
    key = (resolved.id, str(s.home))
    with _painters_lock:
        painter = _painters.get(key)
        if painter is None:
            painter = _painters[key] = Painter(resolved, s)
    return painter
