"""Finding faces on real photos: YuNet as OpenCV runs it, landmarks, alignment, the detection cache.

The painter is the package's own (``get_painter('v3-cute')``): a real generator paints, never a mock, and a painter
that cannot load fails these tests.
"""

from __future__ import annotations

import threading
import time

import cv2
import numpy as np
import pytest

from anipaint import faces as F
from anipaint.faces import align_face, blend, face_mask
from support.faces import (
    YUNET,
    YUNET_FIXED,
    assert_changes_inside_masks_only,
    capped,
    enhance_faces,
    make_detector,
    roll,
)
from support.paths import GROUP_PHOTO as GROUP

skimage_data = pytest.importorskip("skimage.data")
pytestmark = pytest.mark.skipif(not (YUNET.is_file() and GROUP.is_file()), reason="shared models/samples missing")


# --- detection ------------------------------------------------------------------------------------------------


def test_group_three_faces_with_plausible_landmarks(group, detector):
    faces = detector.detect(group)
    assert len(faces) == 3
    # box centres measured once on this photo (left man, centre man, woman); people do not move
    centres = sorted((f.box[0] + f.box[2] / 2, f.box[1] + f.box[3] / 2) for f in faces)
    for got, want in zip(centres, [(168, 325), (425, 281), (682, 449)], strict=True):
        assert np.hypot(got[0] - want[0], got[1] - want[1]) < 15
    for f in faces:
        assert f.score >= 0.7 and f.landmarks.shape == (5, 2)
        lm, (x, y, w, h) = f.landmarks, f.box
        assert np.all((lm[:, 0] > x - 0.05 * w) & (lm[:, 0] < x + 1.05 * w))
        assert np.all((lm[:, 1] > y - 0.05 * h) & (lm[:, 1] < y + 1.05 * h))
        assert max(lm[0, 1], lm[1, 1]) < min(lm[3, 1], lm[4, 1])  # eyes above the mouth
        assert lm[0:2, 1].mean() < lm[2, 1] < lm[3:5, 1].mean()  # nose between
        assert lm[0, 0] < lm[1, 0] and lm[3, 0] < lm[4, 0]  # subject's right is the image's left


def test_astronaut_eyes_where_the_pupils_are(detector):
    faces = detector.detect(skimage_data.astronaut())
    assert len(faces) == 1
    # Pupil centres measured once as the darkest point of the blurred grey image near each eye:
    # (204, 99) and (247, 102), which also match a visual check of the 3x zoom. YuNet's eye points sit on them.
    lm = faces[0].landmarks
    assert np.hypot(*(lm[0] - (204, 99))) < 5
    assert np.hypot(*(lm[1] - (247, 102))) < 5
    assert abs(roll(lm)) < 4


def test_detection_on_downscaled_copy_maps_back(group, detector):
    full = detector.detect(group)
    small = make_detector(detect_max_side=450).detect(group)  # detector sees 450 px, boxes in 900 px
    assert len(small) == 3
    for a, b in zip(sorted(full, key=lambda f: f.box[0]), sorted(small, key=lambda f: f.box[0]), strict=True):
        assert np.allclose(a.box, b.box, atol=0.1 * max(a.box[2:]))  # YuNet varies a little with scale
        assert np.abs(a.landmarks - b.landmarks).max() < 6  # refinement runs at full resolution


@pytest.mark.parametrize("model", [YUNET, YUNET_FIXED], ids=["dynamic", "fixed"])
def test_yunet_rows_are_opencvs_own(model, group):
    """Our YuNet (ONNX Runtime and the decoding in faces/yunet.py) against ``cv2.FaceDetectorYN`` running the same
    file: the same faces, boxes, landmarks and scores on real photos, whole, resized to odd sides (padding to 32)
    and as a refinement crop; and nothing where OpenCV finds nothing."""
    from anipaint.faces.yunet import YuNet

    if not model.is_file():
        pytest.skip(f"{model.name} missing")
    ours = YuNet(model, 0.5)
    pictures = {"group": group, "astronaut": skimage_data.astronaut(), "coffee": skimage_data.coffee(),
                "group 517x389": cv2.resize(group, (517, 389), interpolation=cv2.INTER_AREA),
                "refinement crop": np.ascontiguousarray(group[180:436, 340:596])}
    found = 0
    for name, rgb in pictures.items():
        bgr = np.ascontiguousarray(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
        if ours.fixed_side:  # letterboxed, as FaceDetector feeds a fixed model
            canvas = np.zeros((ours.fixed_side, ours.fixed_side, 3), np.uint8)
            canvas[: bgr.shape[0], : bgr.shape[1]] = bgr[: ours.fixed_side, : ours.fixed_side]
            bgr = canvas
        opencv = cv2.FaceDetectorYN.create(str(model), "", (bgr.shape[1], bgr.shape[0]), 0.5, 0.3, 5000)
        want = opencv.detect(bgr)[1]
        want = np.zeros((0, 15), np.float32) if want is None else want
        got = ours.detect(bgr)
        assert got.shape == want.shape, (name, got.shape, want.shape)
        assert np.abs(got - want).max(initial=0) < 0.01, name  # pixels and score (measured: 3e-5)
        found += len(got)
    assert found >= 5  # three in the group, the astronaut, the crop's face: the comparison saw faces


def test_fixed_size_model_finds_the_same_faces(group, detector):
    if not YUNET_FIXED.is_file():
        pytest.skip("fixed YuNet missing")
    fixed = make_detector(model=YUNET_FIXED).detect(group)
    assert len(fixed) == len(detector.detect(group)) == 3


def test_min_size_is_measured_in_source_pixels(group):
    # the faces are 110-130 px wide in the 900 px source (~65 px once capped at 512)
    assert len(make_detector(min_size=100).detect(group)) == 3
    assert make_detector(min_size=200).detect(group) == []


def test_rotated_face_found_and_aligned_level(detector):
    src = skimage_data.astronaut()
    upright = detector.detect(src)[0].landmarks
    rot = cv2.getRotationMatrix2D((224, 110), 30, 1.0)
    rotated = cv2.warpAffine(src, rot, (512, 512), borderMode=cv2.BORDER_REFLECT_101)
    faces = detector.detect(rotated)
    assert len(faces) == 1
    crop, matrix = align_face(rotated, faces[0], 512)
    assert crop.shape == (512, 512, 3)
    # the true eyes (upright detection carried through the known rotation) in the aligned crop are level
    truth = np.c_[upright, np.ones(5)] @ rot.T
    assert abs(roll(truth)) > 25  # the photo really is rolled
    assert abs(roll(np.c_[truth, np.ones(5)] @ matrix.T)) < 3
    # and centred: the eye midpoint sits where the FFHQ recipe puts it (centre column, just above the middle)
    eyes = (np.c_[truth[:2], np.ones(2)] @ matrix.T).mean(axis=0)
    assert abs(eyes[0] - 256) < 15 and 200 < eyes[1] < 256


def test_the_face_pass_finds_its_faces_in_the_picture_as_painted(group, detector):
    """One YuNet run on the 512 px picture the painter paints finds the group's three faces where the refined
    full-resolution detection does, in source pixels, and the minimum face size is still the source's."""
    painted_input = capped(group, 512)
    full = sorted(detector.detect(group), key=lambda f: f.box[0])
    found = sorted(blend.faces_as_painted(make_detector(), group.shape, painted_input), key=lambda f: f.box[0])
    assert len(found) == len(full) == 3
    for a, b in zip(full, found, strict=True):
        assert np.allclose(a.box, b.box, atol=0.1 * max(a.box[2:])), (a.box, b.box)
        assert np.abs(a.landmarks - b.landmarks).max() < 0.15 * a.box[2]  # YuNet's own, from 512 px
    assert len(blend.faces_as_painted(make_detector(min_size=100), group.shape, painted_input)) == 3
    assert blend.faces_as_painted(make_detector(min_size=200), group.shape, painted_input) == []


def test_one_run_detection_restyles_the_faces_where_refined_landmarks_do(group, detector, paint):
    """The pass paints each crop with the picture's own generator and pastes it back through the same
    transform, so it needs the faces' places and sizes, not level landmarks: YuNet's own (which read the
    rolled astronaut as nearly level) blend each face over the same region as the refined full-resolution ones
    (its core wholly, soft overlap ≥ 0.8; a face placed 10 % off scores 0.43-0.79) at the same crop size, and
    every face is restyled."""
    astronaut = skimage_data.astronaut()
    rot = cv2.getRotationMatrix2D((224, 110), 30, 1.0)
    rolled = cv2.warpAffine(astronaut, rot, (512, 512), borderMode=cv2.BORDER_REFLECT_101)
    for name, source in (("group", group), ("astronaut", astronaut), ("rolled astronaut", rolled)):
        painted_input = capped(source, 512)
        refined = sorted(detector.detect(source), key=lambda f: f.box[0])
        quick = sorted(blend.faces_as_painted(make_detector(), source.shape, painted_input), key=lambda f: f.box[0])
        assert len(quick) == len(refined) >= 1, name
        for want, got in zip(refined, quick, strict=True):
            a, b = (face_mask(f, source.shape, painted_input.shape) for f in (want, got))
            assert (b[a > 0.95] > 0.5).all(), name
            assert np.minimum(a, b).sum() / np.maximum(a, b).sum() >= 0.8, name
            sides = [blend.working_side(f, source.shape, painted_input.shape, 512) for f in (want, got)]
            assert abs(sides[0] - sides[1]) <= 16, (name, sides)
        plain = paint(painted_input)
        assert_changes_inside_masks_only(source, quick, plain, enhance_faces(source, plain, quick, paint))


# --- cache ----------------------------------------------------------------------------------------------------


def test_cache_hits_on_the_same_pixels(group):
    det = make_detector()
    first = det.detect(group)
    again = det.detect(group.copy())  # another array, same pixels: a retry or a style change
    assert det.calls == 1 and det.cache_hits == 1 and det.cache_misses == 1
    assert [f.box for f in again] == [f.box for f in first]
    det.detect(group[:, ::-1].copy())  # different pixels: a new detection
    assert det.calls == 2
    assert det.cache_stats()["hit_rate"] == pytest.approx(1 / 3)


def test_cache_is_bounded_and_expires(group):
    det = make_detector(cache_size=1, cache_ttl=600)
    astro = skimage_data.astronaut()
    det.detect(group), det.detect(astro), det.detect(group)
    assert det.calls == 3  # size 1: the astronaut evicted the group
    det = make_detector(cache_ttl=0.2)
    det.detect(astro)
    time.sleep(0.3)
    det.detect(astro)
    assert det.calls == 2


def test_detect_is_thread_safe(group):
    det = make_detector()
    astro = skimage_data.astronaut()
    results: list[tuple[int, int]] = []

    def work(img, n):
        results.append((n, len(det.detect(img))))

    threads = [threading.Thread(target=work, args=(img, n)) for n, img in [(3, group), (1, astro)] * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(n == found for n, found in results) and len(results) == 6
    assert det.cache_hits + det.cache_misses == 6 and det.calls == det.cache_misses >= 2


def test_shared_detector_per_settings():
    from anipaint.settings import Settings

    s = Settings()
    a, b = F.get_face_detector(s, YUNET), F.get_face_detector(s, YUNET)
    assert a is b
    other = Settings(face_score_threshold=0.8)
    assert F.get_face_detector(other, YUNET) is not a
