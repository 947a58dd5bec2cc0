"""The face model (v3-jp-face) on its fast backends.

Its graph computes a resize size in floating point, so it cannot be exported with symbolic sizes; its compiled
and ONNX Runtime builds are exported at its ``paint_shape``, the one size portrait mode paints (the middle of a
512 px aligned crop), and run any other size on the eager network. Checked on those windows of aligned face crops
from real photos against the ORIGINAL float16 ONNX file run by ONNX Runtime.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from anipaint.engine import backends, load_network
from anipaint.engine.tensors import batch_from_tensor
from anipaint.faces import get_face_detector
from anipaint.faces.align import align_face
from anipaint.faces.portrait import paint_window
from anipaint.models import helpers, store
from anipaint.models.registry import get_style
from anipaint.quality import faithful, far_share, psnr
from anipaint.settings import get_settings

ort = pytest.importorskip("onnxruntime")

STYLE = "v3-jp-face"
ORIGINAL = "animeganv3/AnimeGANv3_JP_face_v1.0_fp16.onnx"
FAST = ("compiled", "onnxruntime")


@pytest.fixture(scope="module")
def face_model(prepared_store, engine_builds):
    """The style, its artefact, eager network and auto record (builds and measures once, as `models prepare`)."""
    settings = get_settings()
    style = get_style(STYLE)
    artefact = store.artefact_path(style, settings)
    record = engine_builds(STYLE)
    return style, artefact, load_network(style, artefact), record


@pytest.fixture(scope="module")
def crops(sources, group_photo: Image.Image, astronaut: Image.Image) -> list[np.ndarray]:
    """What portrait mode hands the face model (RGB uint8): the painted window of the aligned 512 px crop of every
    face in the group photo and the astronaut."""
    settings = get_settings()
    detector = get_face_detector(settings, helpers.install_face_detector(settings))
    y0, y1, x0, x1 = paint_window(512, get_style(STYLE).paint_shape)
    out = []
    for photo in (np.asarray(group_photo), np.asarray(astronaut)):
        out.extend(np.ascontiguousarray(align_face(photo, face, 512)[0][y0:y1, x0:x1])
                   for face in detector.detect(photo))
    assert len(out) >= 4
    return out


def _nchw(rgb: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(rgb.astype(np.float32) / 127.5 - 1.0).permute(2, 0, 1)[None]


def test_fast_backends_match_the_original_file_on_face_crops(face_model, crops, sources) -> None:
    style, artefact, network, _ = face_model
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    original = ort.InferenceSession(str(sources / ORIGINAL), opts, providers=["CPUExecutionProvider"])
    inp = original.get_inputs()[0]
    references = []  # per crop: the input, the original file's output, the eager network's
    for crop in crops:
        x = _nchw(crop)
        want = original.run(None, {inp.name: x.permute(0, 2, 3, 1).numpy().astype(np.float16)})[0]
        with torch.inference_mode():
            references.append((x, want.astype(np.float32), network(x)))
    for name in FAST:
        backend = backends.open_named(name, style, artefact, get_settings(), network)
        assert backend.name == name and backend.fixed_size == style.paint_shape
        for i, (x, want, eager) in enumerate(references):
            with torch.inference_mode():
                got = backend(x)
            assert psnr(got.permute(0, 2, 3, 1).numpy(), want, peak=2.0) >= 35.0, (name, i)
            ours, theirs = batch_from_tensor(got), batch_from_tensor(eager)
            db, far = psnr(ours, theirs), far_share(ours, theirs)
            assert faithful(db, far), (name, i, round(db, 1), f"{far:.4%} far off")


def test_other_sizes_run_on_the_eager_network(face_model, crops) -> None:
    """A fixed-size build must never be handed another size (it would read past its buffers): a 256 px crop
    and an odd-sized one come back exactly as the eager network paints them."""
    style, artefact, network, _ = face_model
    small = np.asarray(Image.fromarray(crops[0]).resize((256, 256), Image.Resampling.LANCZOS))
    odd = crops[0][:437, :371]
    with torch.inference_mode():
        eager = [(_nchw(rgb), network(_nchw(rgb))) for rgb in (small, odd)]
    for name in FAST:
        backend = backends.open_named(name, style, artefact, get_settings(), network)
        for x, want in eager:
            with torch.inference_mode():
                assert torch.equal(backend(x), want), (name, tuple(x.shape))


def test_auto_measures_the_face_model_at_its_crop_size_and_picks_a_good_one(face_model) -> None:
    record = face_model[3]
    results = record["results"]
    assert set(results) == {"torch", *FAST}, record  # no int8: it is not faithful on aligned faces
    assert all("error" not in r for r in results.values()), record
    assert results[record["choice"]]["faithful"] and record["choice"] in record["why"], record
