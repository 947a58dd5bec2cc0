"""The face pass on real photos with a real AnimeGAN model: what it restyles, and how it blends.

The painter is the package's own (``get_painter('v3-cute')``): a real generator paints, never a mock, and a painter
that cannot load fails these tests.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from anipaint import faces as F
from anipaint.faces import Face, blend, face_mask
from support.face_metrics import grad, seam_gradient
from support.faces import (
    YUNET,
    assert_changes_inside_masks_only,
    capped,
    enhance_faces,
    make_detector,
)
from support.paths import GROUP_PHOTO as GROUP

skimage_data = pytest.importorskip("skimage.data")
pytestmark = pytest.mark.skipif(not (YUNET.is_file() and GROUP.is_file()), reason="shared models/samples missing")


# --- restyle and blend ----------------------------------------------------------------------------------------


def test_no_face_picture_unchanged_one_detector_call(paint):
    det = make_detector()
    coffee = skimage_data.coffee()
    faces = det.detect(coffee)
    assert faces == [] and det.calls == 1
    plain = paint(capped(coffee, 512))
    before = paint.calls
    out = enhance_faces(coffee, plain, faces, paint)
    assert paint.calls == before and np.array_equal(out, plain) and out is not plain


def test_group_restyle_changes_face_regions_only(group, group_result):
    faces, plain, out = group_result
    assert out.shape == plain.shape == (512, 512, 3)
    assert_changes_inside_masks_only(group, faces, plain, out)
    # the masks sit on the faces: scale 512/900 folded into the transform
    for f in faces:
        m = face_mask(f, group.shape, plain.shape)
        ys, xs = np.nonzero(m > 0.95)
        cx, cy = (f.box[0] + f.box[2] / 2) * 512 / 900, (f.box[1] + f.box[3] / 2) * 512 / 900
        assert abs(xs.mean() - cx) < 10 and abs(ys.mean() - cy) < 12


def test_astronaut_restyle_changes_face_region_only(astro_result):
    src, faces, plain, out = astro_result
    assert len(faces) == 1
    assert_changes_inside_masks_only(src, faces, plain, out)


def test_no_seam(group, group_result, astro_result):
    faces, plain, out = group_result
    checks = [(group, f, plain, out) for f in faces]
    src, afaces, aplain, aout = astro_result
    checks.append((src, afaces[0], aplain, aout))
    for source, face, p, o in checks:
        m = face_mask(face, source.shape, p.shape)
        seam, median = seam_gradient(m, p, o)
        assert seam <= median, (seam, median)
        # and the output's own gradient on the ring is the content's, not an added edge
        ring = (m > 0.4) & (m < 0.6)
        g_out = np.median(grad(cv2.cvtColor(o, cv2.COLOR_RGB2GRAY))[ring])
        g_plain = np.median(grad(cv2.cvtColor(p, cv2.COLOR_RGB2GRAY))[ring])
        assert g_out <= 1.2 * g_plain + 0.5
        # no colour shift around the face: mean Lab difference on the ring stays small
        lab = [cv2.cvtColor(x.astype(np.float32) / 255, cv2.COLOR_RGB2Lab)[ring] for x in (o, p)]
        assert np.abs(lab[0].mean(axis=0) - lab[1].mean(axis=0)).max() < 3


def test_seam_measure_sees_a_hard_paste(group, group_result, paint, monkeypatch):
    """The seam check is not vacuous: pasting the same faces with a hard-edged mask and no colour match fails."""
    faces, plain, _ = group_result
    soft = blend.crop_mask
    monkeypatch.setattr(blend, "crop_mask", lambda size: (soft(size) > 0.02).astype(np.float32))
    monkeypatch.setattr(blend, "_match_colour", lambda face, ref, weight: face)
    hard = enhance_faces(group, plain, faces, paint)
    ratios = [np.divide(*seam_gradient(face_mask(f, group.shape, plain.shape), plain, hard)) for f in faces]
    assert min(ratios) > 2, ratios


def test_face_at_the_border(detector, paint):
    src = np.ascontiguousarray(skimage_data.astronaut()[:, 223:])  # cut through the nose: half a face
    faces = detector.detect(src)
    assert len(faces) == 1 and faces[0].box[0] < 5
    plain = paint(src)
    out = enhance_faces(src, plain, faces, paint)
    m = face_mask(faces[0], src.shape, plain.shape)
    assert m[:, 0].max() > 0.9  # the face really runs off the frame
    assert_changes_inside_masks_only(src, faces, plain, out)
    seam, median = seam_gradient(m, plain, out)
    assert seam <= median


def test_faces_mostly_or_wholly_outside_the_frame(astro_result, paint):
    src, faces, plain, _ = astro_result
    f = faces[0]
    for dx in (-230, -400):  # 20 % of the face left in the frame; then none of it
        moved = Face((f.box[0] + dx, *f.box[1:]), f.landmarks + (dx, 0), f.score)
        out = enhance_faces(src, plain, [moved], paint)
        assert out.shape == plain.shape
        assert_changes_inside_masks_only(src, [moved], plain, out, min_change=0)
    assert np.array_equal(out, plain)


def test_small_painted_faces_still_restyled_tiny_ones_skipped(group, group_result, paint):
    faces = group_result[0]
    before = paint.calls
    small = paint(capped(group, 128))  # faces ~17 px wide in the painted picture, 110-130 px in the source
    batches = paint.batches
    out = enhance_faces(group, small, faces, paint)
    assert paint.calls - before == 1 + 3 and paint.batches == batches + 1  # the three faces in one batch
    assert not np.array_equal(out, small)
    before = paint.calls
    tiny = capped(group, 32)  # ~4 px faces: nothing would show
    assert np.array_equal(enhance_faces(group, tiny, faces, paint), tiny) and paint.calls == before


def test_crops_painted_at_the_faces_own_resolution(group, group_result):
    """The group's faces are ~210-240 px squares in the source: at full resolution each crop paints at its own
    face's side (256 or 224), not 512; in a 512 px picture (the faces shown at ~0.57x) at most
    ``blend.OVERSAMPLE`` (1.25) times the size the face is shown at; a face bigger than the crop size is
    reduced to it."""
    faces = group_result[0]
    sides = [F.align.crop_side(f, 512) for f in faces]
    assert all(192 <= s <= 256 for s in sides), sides
    assert len(set(sides)) > 1, sides  # the faces differ in size: one side for all would overpaint some
    full = blend.place_faces(faces, group.shape, group.shape, 512)
    assert [p.side for p in full] == sides
    shown = 512 / group.shape[1]
    small = blend.place_faces(faces, group.shape, (512, 512), 512)
    for face, placement, own in zip(faces, small, sides, strict=True):
        painted_side = np.hypot(*np.diff(F.align.ffhq_quad(face.landmarks)[[0, 3]], axis=0)[0]) * shown
        wanted = blend.OVERSAMPLE * painted_side
        assert wanted <= placement.side < min(own + 1, wanted + 8), (placement.side, own)  # no more than it needs
    assert sum(p.side ** 2 for p in small) <= 0.5 * 512 * 512  # the three crops: at most half the picture
    big = Face(faces[0].box, faces[0].landmarks * 4, faces[0].score)  # the same face in a 3600 px photo
    assert F.align.crop_side(big, 512) == 512
