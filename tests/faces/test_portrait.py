"""Portrait mode on real photos through the real pipeline: the AnimeGANv3 JP face model on each face, blended
inside the person segmentation; the background in its own style.

The plain style is v3-cute (the fastest); the face model, segmenter and detector are the store's real ones.
"""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np
import pytest
from PIL import Image

from anipaint import preprocess
from anipaint.errors import OptionError
from anipaint.faces import blend, get_face_detector, segmentation
from anipaint.faces.portrait import paint_window, person_mask, portrait_mask
from anipaint.models import availability, helpers
from anipaint.models.registry import get_style
from anipaint.painter import Painter, get_painter
from anipaint.settings import get_settings
from support.face_metrics import grad, seam_gradient
from support.paths import GROUP_PHOTO

skimage_data = pytest.importorskip("skimage.data")
pytestmark = pytest.mark.skipif(not GROUP_PHOTO.is_file(), reason="sample photo missing")

STYLE, BACKGROUND = "v3-cute", "v3-shinkai"
FACE_MODEL = get_style("v3-jp-face")


def rgb(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("RGB"))


@pytest.fixture(scope="module")
def painter(sources) -> Painter:
    return get_painter(STYLE).warm()


@pytest.fixture(scope="module")
def segment(sources):
    return segmentation.load_segmenter(get_settings())


@pytest.fixture(scope="module")
def detector(sources):
    settings = get_settings()
    return get_face_detector(settings, helpers.install_face_detector(settings))


class Run:
    """One photo painted plain and in portrait mode (and with a background style), plus what the tests measure."""

    def __init__(self, photo: np.ndarray, painter: Painter, detector, segment, max_side=512, background=None):
        self.photo = photo
        self.plain = rgb(painter.paint(Image.fromarray(photo), max_side=max_side, faces=False))
        result = painter.paint_result(Image.fromarray(photo), max_side=max_side, portrait=True, background=background)
        self.out, self.faces_found = rgb(result.image), result.faces_found
        self.faces = detector.detect(photo)
        shape = self.plain.shape
        self.masks = [portrait_mask(photo, shape, f, segment, paint_shape=FACE_MODEL.paint_shape) for f in self.faces]
        self.windows = [p.window for p in blend.place_faces(self.faces, photo.shape, shape, 512, False)]
        small = cv2.resize(photo, (shape[1], shape[0]), interpolation=cv2.INTER_AREA)
        self.person = person_mask(small, segment, shape[:2]) > 127

    def diff(self) -> np.ndarray:
        return np.abs(self.out.astype(np.float32) - self.plain).mean(axis=2)

    def away_from_faces(self, margin: int = 8) -> np.ndarray:
        near = np.zeros(self.plain.shape[:2], np.uint8)
        for x0, y0, x1, y1 in self.windows:
            near[max(0, y0 - margin) : y1 + margin, max(0, x0 - margin) : x1 + margin] = 1
        return near == 0


def assert_portrait_metrics(run: Run, expected_faces: int) -> dict[str, float]:
    """The issue's four measures; returns them for the report."""
    assert run.faces_found == len(run.faces) == expected_faces
    diff = run.diff()
    figures: dict[str, float] = {}
    h, w = diff.shape
    dilated = cv2.dilate(run.person.astype(np.uint8), np.ones((2 * (max(h, w) // 40) + 1,) * 2, np.uint8)) > 0
    for i, (face, mask, (x0, y0, x1, y1)) in enumerate(zip(run.faces, run.masks, run.windows, strict=True)):
        core = blend.face_mask(face, run.photo.shape, run.plain.shape) > 0.95
        figures[f"face {i} change"] = float(diff[core].mean())
        assert figures[f"face {i} change"] >= 12, figures  # the face really is another painting
        beside = np.zeros_like(dilated)
        beside[y0:y1, x0:x1] = True
        beside &= ~dilated
        if beside.sum() > 50:  # background around the head keeps the plain style: no pale grey from the model
            figures[f"face {i} background beside"] = float(diff[beside].mean())
            assert figures[f"face {i} background beside"] <= 4, figures
        seam, median = seam_gradient(mask, run.plain, run.out)
        figures[f"face {i} seam / median gradient"] = seam / median
        assert seam <= median, figures
    away = run.away_from_faces()
    figures["away from faces, max change"] = float(diff[away].max()) if away.any() else 0.0
    assert figures["away from faces, max change"] <= 1, figures
    return figures


@pytest.fixture(scope="module")
def group(painter, detector, segment) -> Run:
    return Run(np.asarray(Image.open(GROUP_PHOTO).convert("RGB")), painter, detector, segment)


@pytest.fixture(scope="module")
def astronaut(painter, detector, segment) -> Run:
    return Run(skimage_data.astronaut(), painter, detector, segment)


def test_group_photo_three_anime_faces(group):
    print(assert_portrait_metrics(group, 3))


def test_astronaut_anime_face(astronaut):
    print(assert_portrait_metrics(astronaut, 1))


def test_blend_weight_stays_inside_the_person(group, astronaut):
    """The face model's pale background never lands outside the person: the weight there is ~0."""
    for run in (group, astronaut):
        h, w = run.person.shape
        grown = cv2.dilate(run.person.astype(np.uint8), np.ones((2 * (max(h, w) // 60) + 1,) * 2, np.uint8)) > 0
        for mask in run.masks:
            assert mask[~grown].max() < 0.05
            assert mask.max() > 0.95  # and the face itself is pasted at full weight


def test_no_face_is_the_plain_style(painter):
    coffee = Image.fromarray(skimage_data.coffee())
    result = painter.paint_result(coffee, portrait=True)
    assert result.faces_found == 0
    assert np.array_equal(rgb(result.image), rgb(painter.paint(coffee, faces=False)))


def test_faces_under_min_size_left_to_the_plain_style(sources):
    settings = dataclasses.replace(get_settings(), face_min_size=200)  # the faces are ~110-130 px wide
    strict = Painter(availability.resolve(STYLE, settings), settings)
    photo = Image.open(GROUP_PHOTO)
    result = strict.paint_result(photo, portrait=True)
    assert result.faces_found == 0
    assert np.array_equal(rgb(result.image), rgb(strict.paint(photo, faces=False)))


def test_face_at_the_border(painter, detector, segment):
    half = np.ascontiguousarray(skimage_data.astronaut()[:, 223:])  # cut through the nose
    run = Run(half, painter, detector, segment)
    assert run.faces[0].box[0] < 5 and run.masks[0][:, 0].max() > 0.5  # the pasted face runs off the frame
    assert_portrait_metrics(run, 1)


def test_tilted_face(painter, detector, segment):
    src = skimage_data.astronaut()
    rot = cv2.getRotationMatrix2D((224, 110), 30, 1.0)
    run = Run(cv2.warpAffine(src, rot, (512, 512), borderMode=cv2.BORDER_REFLECT_101), painter, detector, segment)
    assert_portrait_metrics(run, 1)


def test_full_resolution_with_background_style(painter, detector, segment):
    """At full size (900 px, no cap) with the background in another style: crops from the source, the person
    mask at full size; inside the person (away from faces) the person's style, outside it the background's."""
    photo = np.asarray(Image.open(GROUP_PHOTO).convert("RGB"))
    run = Run(photo, painter, detector, segment, max_side=None, background=BACKGROUND)
    assert run.out.shape == photo.shape
    other = rgb(get_painter(BACKGROUND).paint(Image.fromarray(photo), max_side=None, faces=False))
    weight = person_mask(photo, segment, photo.shape[:2])
    away = run.away_from_faces()
    inside, outside = (weight == 255) & away, (weight == 0) & away
    assert inside.sum() > 0.9 * (run.person & away).sum() and outside.sum() > 100_000
    assert np.abs(run.out.astype(float) - run.plain)[inside].max() <= 1
    assert np.abs(run.out.astype(float) - other)[outside].max() <= 1
    inside = cv2.erode(run.person.astype(np.uint8), np.ones((41, 41), np.uint8)) > 0
    outside = cv2.dilate(run.person.astype(np.uint8), np.ones((41, 41), np.uint8)) == 0
    # the person/background edge is feathered: no step steeper than the two paintings' own edges
    edge = ~inside & ~outside
    g_out = np.median(grad(cv2.cvtColor(run.out, cv2.COLOR_RGB2GRAY))[edge])
    g_own = max(np.median(grad(cv2.cvtColor(x, cv2.COLOR_RGB2GRAY))[edge]) for x in (run.plain, other))
    assert g_out <= 1.2 * g_own + 0.5, (g_out, g_own)
    # and the faces are anime faces there too
    diff = np.abs(run.out.astype(np.float32) - other).mean(axis=2)
    for face in run.faces:
        assert diff[blend.face_mask(face, photo.shape, photo.shape) > 0.95].mean() >= 12


def test_face_model_alone_restyles_faces_only(group):
    """Asked to paint a whole picture, the face model changes the faces and leaves the rest the photo."""
    result = get_painter("v3-jp-face").paint_result(Image.open(GROUP_PHOTO))
    diff = np.abs(rgb(result.image).astype(float) - preprocess.to_work_image(Image.open(GROUP_PHOTO), 512).rgb)
    assert result.faces_found == 3
    assert diff[group.away_from_faces()].max() <= 1
    for mask in group.masks:
        assert diff[mask > 0.95].mean() >= 12


def test_face_model_paints_only_its_window_of_each_crop(painter, monkeypatch):
    """The face model is handed the middle of each 512 px aligned crop (its paint_shape: the one size its fast
    builds run at, so no crop falls back to the eager network), and the blend weight is 0 outside that middle."""
    face_painter = get_painter(FACE_MODEL.id).warm()
    shapes: list[tuple[int, ...]] = []
    run_batch = face_painter.engine.run_batch
    monkeypatch.setattr(face_painter.engine, "run_batch", lambda crops: shapes.append(crops.shape) or run_batch(crops))
    assert painter.paint_result(Image.open(GROUP_PHOTO), portrait=True).faces_found == 3
    assert shapes and all(s[1:3] == FACE_MODEL.paint_shape for s in shapes), shapes
    assert sum(s[0] for s in shapes) == 3
    y0, y1, x0, x1 = paint_window(512, FACE_MODEL.paint_shape)
    assert (y1 - y0, x1 - x0) == FACE_MODEL.paint_shape and x0 == 512 - x1  # centred across the face
    assert paint_window(384, FACE_MODEL.paint_shape)[1] - paint_window(384, FACE_MODEL.paint_shape)[0] == 336


def test_face_model_refused_as_background(painter):
    with pytest.raises(OptionError):
        painter.paint(Image.open(GROUP_PHOTO), portrait=True, background="v3-jp-face")
