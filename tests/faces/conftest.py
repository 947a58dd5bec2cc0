"""The face tests' fixtures: the group photo, a detector, v3-cute's real painter, and the face pass's results on
the group photo and the astronaut, each made once per module."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from anipaint.faces import FaceDetector
from support.faces import CachedPainter, capped, enhance_faces, make_detector
from support.paths import GROUP_PHOTO as GROUP


@pytest.fixture(scope="module")
def paint(prepared_store) -> CachedPainter:
    """The package's own painter: a painter that cannot load fails these tests rather than being replaced."""
    from anipaint import get_painter

    return CachedPainter(get_painter("v3-cute").warm().paint_array)


@pytest.fixture(scope="module")
def group() -> np.ndarray:
    return np.asarray(Image.open(GROUP).convert("RGB"))


@pytest.fixture(scope="module")
def detector() -> FaceDetector:
    return make_detector()


@pytest.fixture(scope="module")
def group_result(group, detector, paint):
    faces = detector.detect(group)
    plain = paint(capped(group, 512))
    return faces, plain, enhance_faces(group, plain, faces, paint)


@pytest.fixture(scope="module")
def astro_result(detector, paint):
    src = pytest.importorskip("skimage.data").astronaut()
    faces = detector.detect(src)
    plain = paint(src)
    return src, faces, plain, enhance_faces(src, plain, faces, paint)
