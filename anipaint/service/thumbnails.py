"""One small sample picture per style, painted on first request and cached as PNG under ``<home>/thumbnails``.

The sample is the first photo in ``<sources>/../samples`` (a gradient when there is none), cropped square; a face
style (``kind="face"``, made for aligned face crops) gets the sample's largest face, aligned as the face pass does.
Painting happens on one background thread, one style at a time, so a page that asks for every thumbnail at
once never competes with real jobs for more than one core's worth of work; until a thumbnail is ready the
caller gets the unpainted sample and is told to ask again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from anipaint import imaging
from anipaint.models import store
from anipaint.models.registry import Style
from anipaint.settings import Settings

log = logging.getLogger("anipaint.service")

SIDE = 256  # shown at about 120 CSS pixels: sharp on 2x screens
VERSION = 2
_SAMPLE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")


def _gradient(side: int) -> Image.Image:
    """A soft sky-to-meadow picture for machines without sample photos."""
    y, x = np.mgrid[0:side, 0:side].astype(np.float32) / (side - 1)
    sky = np.stack([0.55 + 0.4 * y, 0.7 + 0.2 * y, 0.95 - 0.1 * y], axis=-1)
    hill = (y > 0.62 + 0.08 * np.sin(6.0 * x))[..., None]
    grass = np.stack([0.35 + 0.2 * x, 0.62 - 0.1 * y, 0.3 + 0.0 * x], axis=-1)
    sun = (((x - 0.72) ** 2 + (y - 0.25) ** 2) < 0.012)[..., None]
    rgb = np.where(hill, grass, np.where(sun, np.array([1.0, 0.92, 0.7]), sky))
    return Image.fromarray((np.clip(rgb, 0, 1) * 255).astype(np.uint8), "RGB")


class Thumbnails:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.dir = Path(settings.home) / "thumbnails"
        self._lock = threading.Lock()
        self._todo: queue.Queue[Style] = queue.Queue()
        self._pending: set[str] = set()
        self._failed: set[str] = set()
        self._thread: threading.Thread | None = None
        self._sample: Image.Image | None = None
        self._photo: Image.Image | None = None  # the whole sample photo, for face crops
        self._key = ""

    # -- the sample ---------------------------------------------------------------------------------------------
    def _sample_path(self) -> Path | None:
        folder = Path(self.settings.sources).parent / "samples"
        try:
            photos = sorted(p for p in folder.iterdir() if p.suffix.lower() in _SAMPLE_SUFFIXES)
        except OSError:
            return None
        return photos[0] if photos else None

    def sample(self) -> Image.Image:
        with self._lock:
            if self._sample is None:
                path = self._sample_path()
                img = None
                if path is not None:
                    try:
                        img = imaging.load_image(path).convert("RGB")
                        self._key = f"{path.name}:{path.stat().st_size}"
                    except Exception:  # an unreadable sample is not worth failing the page for
                        log.warning("cannot read sample %s; using a gradient", path)
                if img is None:
                    img, self._key = _gradient(SIDE), "gradient"
                self._photo = img
                self._sample = ImageOps.fit(img, (SIDE, SIDE), Image.Resampling.LANCZOS)
            return self._sample

    def sample_for(self, style: Style) -> Image.Image:
        """The picture a style's thumbnail paints: the square sample, or for a face style the largest face."""
        sample = self.sample()
        if not style.paints_faces_only:
            return sample
        from anipaint import faces
        from anipaint.models import helpers

        model = helpers.install_face_detector(self.settings)
        photo = np.asarray(self._photo if self._photo is not None else sample)
        found = faces.get_face_detector(self.settings, model).detect(photo) if model is not None else []
        if not found:
            return sample
        largest = max(found, key=lambda f: f.box[2] * f.box[3])
        crop, _ = faces.align_face(photo, largest, SIDE)
        return Image.fromarray(crop)

    def _path(self, style_id: str) -> Path:
        self.sample()
        digest = hashlib.sha1(f"{VERSION}:{SIDE}:{self._key}".encode()).hexdigest()[:10]
        return self.dir / f"{style_id}-{digest}.png"

    def placeholder(self, *, grey: bool = False) -> bytes:
        img = self.sample()
        if grey:
            img = ImageOps.grayscale(img).convert("RGB")
        return imaging.encode_png(img)

    # -- the painted thumbnails -----------------------------------------------------------------------------------
    def get(self, style: Style, available: bool) -> tuple[bytes, str]:
        """(PNG bytes, what they are): ``ready``, the painted thumbnail; ``pending``, a placeholder while it is
        painted; ``placeholder``, the unpainted sample of a style that cannot paint here (grey) or whose files come
        on first use (a thumbnail never downloads a style: that is a paint's choice)."""
        path = self._path(style.id)
        try:
            return path.read_bytes(), "ready"
        except FileNotFoundError:
            pass
        if not available or style.id in self._failed:
            return self.placeholder(grey=True), "placeholder"
        if store.needs_download(style, self.settings):
            return self.placeholder(), "placeholder"
        with self._lock:
            if style.id not in self._pending:
                self._pending.add(style.id)
                self._todo.put(style)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="anipaint-thumbnails", daemon=True)
                self._thread.start()
        return self.placeholder(), "pending"

    def _work(self) -> None:
        while True:
            style = self._todo.get()
            try:
                self._paint(style)
            except Exception:  # a style that cannot paint keeps its grey placeholder
                log.exception("thumbnail for %s failed", style.id)
                self._failed.add(style.id)
            finally:
                with self._lock:
                    self._pending.discard(style.id)

    def _paint(self, style: Style) -> None:
        from anipaint.painter import Painter, get_painter
        from anipaint.warmup import painting

        shared = get_painter(style.id, self.settings)
        # A style nobody has used yet gets a throwaway painter, so thumbnails don't keep every model in memory.
        painter = shared if shared.loaded else Painter(style, self.settings)
        with painting():
            img = painter.paint(self.sample_for(style), max_side=SIDE, faces=False)
        path = self._path(style.id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(imaging.encode_png(img.convert("RGB"), compress_level=9))
        os.replace(tmp, path)
