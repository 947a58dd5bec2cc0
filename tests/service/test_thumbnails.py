"""Style thumbnails: whole-picture styles paint the square sample; face styles paint the sample's largest face."""

from __future__ import annotations

import numpy as np
import pytest

from anipaint import faces
from anipaint.models import helpers
from anipaint.models.registry import all_styles
from anipaint.service.thumbnails import SIDE, Thumbnails
from anipaint.settings import reload_settings

FACE_STYLES = [s for s in all_styles() if s.paints_faces_only]


@pytest.fixture(scope="module")
def thumbs(prepared_store, group_photo) -> Thumbnails:
    return Thumbnails(reload_settings())


def test_whole_picture_styles_paint_the_square_sample(thumbs) -> None:
    style = next(s for s in all_styles() if not s.paints_faces_only)
    assert thumbs.sample_for(style) is thumbs.sample()
    assert thumbs.sample().size == (SIDE, SIDE)


@pytest.mark.parametrize("style", FACE_STYLES, ids=lambda s: s.id)
def test_face_styles_paint_an_aligned_face(thumbs, style) -> None:
    crop = np.asarray(thumbs.sample_for(style))
    assert crop.shape == (SIDE, SIDE, 3)
    settings = reload_settings()
    found = faces.get_face_detector(settings, helpers.install_face_detector(settings)).detect(crop)
    assert len(found) == 1  # one face, filling the crop as the face pass aligns it
    x, y, w, h = found[0].box
    assert w * h > 0.2 * SIDE * SIDE and abs(x + w / 2 - SIDE / 2) < SIDE / 6
