"""The browser's live-view models: a style's device model with its convolutions in int8, for the camera's frames only.

ONNX Runtime Web's WebAssembly build runs quantised convolutions (``QLinearConv``, its integer GEMM in 128-bit SIMD)
faster than float ones where a network's convolutions are wide: v3-hayao's run at 256 × 192 took 0.78× the float
model's time in one worker (docs/benchmarks.md, "The live camera"), v3-cute's 0.97× (its convolutions are narrow and
the quantise/dequantise steps around them cost what the integer GEMM saves). So a live model is made from the device
model's float32 graph (its norms and upsamplings already rewritten, :mod:`.device_models`) by ONNX Runtime's own
static quantiser (``onnxruntime.quantization.quantize_static``, QDQ format, uint8 activations, int8 weights per output
channel, min/max ranges calibrated on real photos), every ``Conv`` and nothing else, and it is kept only when

- it is faithful to the float32 file on the check photos (:func:`anipaint.quality.faithful`: ≥ 40 dB, almost no
  pixel more than 32 levels off), and
- native ONNX Runtime here, on one thread, runs it in at most :data:`SPEEDUP` of the float graph's time: the
  browser's gain follows native's (v3-hayao 0.56× native → 0.78× in WebAssembly; v3-cute 0.80× → 0.97×), and the
  browser cannot be timed while the model is made.

A picture taken while live (``Take picture``) is painted by the full device model, never by this one. The file and its
record (``live-<key>-v<version>.onnx`` / ``.json``) sit beside the device model's; a record with no file says the
style has no live model (the live view then paints with the device model).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from anipaint.engine import builds
from anipaint.engine.onnx import device_models
from anipaint.models import store
from anipaint.models.registry import Style
from anipaint.settings import Settings

LIVE_VERSION = 1  # bump when the recipe below changes
NAME = "live"
SPEEDUP = 0.7  # kept when native ONNX Runtime runs it in at most this share of the float graph's time
CALIBRATION_SIDE = 256  # the live view's usual working size
CALIBRATION_PHOTOS = 6


@dataclass(frozen=True)
class LiveModel:
    """A style's live-view model, or (``file`` None) the decision that it has none."""

    style: str
    file: str | None
    sha256: str | None
    bytes: int | None
    psnr: float | None  # against the float32 file, worst check photo
    far: float | None  # the share of pixels more than 32 levels off on that photo
    native_ratio: float | None  # native ONNX Runtime's time for it ÷ the float graph's, at 256 × 192
    version: int = LIVE_VERSION


def _record_path(style: Style, settings: Settings, key: str) -> Path:
    return builds.build_file(NAME, f"-v{LIVE_VERSION}.json", style, settings, key)


def read(style: Style, settings: Settings) -> LiveModel | None:
    """The style's live model if one has been made for its current weights (and its file is still there)."""
    artefact = store.artefact_path(style, settings)
    if device_models.unsupported(style) or not artefact.is_file():
        return None
    try:
        key = builds.cached_engine_key(artefact)
        model = LiveModel(**json.loads(_record_path(style, settings, key).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if model.file is None or not (builds.cache_dir(style, settings) / model.file).is_file():
        return None
    return model


def path_of(model: LiveModel, style: Style, settings: Settings) -> Path:
    return builds.cache_dir(style, settings) / str(model.file)


def decided(style: Style, settings: Settings) -> LiveModel | None:
    """The record of the decision (with or without a file), or None if not made yet."""
    artefact = store.artefact_path(style, settings)
    try:
        return LiveModel(**json.loads(_record_path(style, settings, builds.cached_engine_key(artefact)).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def ensure(style: Style, settings: Settings) -> LiveModel:
    """The style's live-model decision, made now if missing (after its device model, made first if need be)."""
    device = device_models.ensure(style, settings)
    found = decided(style, settings)
    if found is not None:
        return found
    key = builds.cached_engine_key(store.artefact_path(style, settings))
    return builds.made_once(_record_path(style, settings, key).with_suffix(".lock"),
                            lambda: decided(style, settings), lambda: _make(style, settings, device, key))


def _make(style: Style, settings: Settings, device: device_models.DeviceModel, key: str) -> LiveModel:
    import onnx

    started = time.monotonic()
    fp32 = device_models.float_build(style, settings, key)
    graph, _ = device_models.rewritten_graph(fp32)
    with tempfile.TemporaryDirectory() as tmp:
        float_path = Path(tmp) / "float.onnx"
        onnx.save(graph, str(float_path))
        data = _quantise(float_path, graph.graph.input[0].name, _calibration(settings, device), Path(tmp))
        multiple = None if device.min_cells == 1 else device.multiple
        worst = device_models.worst_psnr(fp32, data, settings, multiple)
        ratio = _native_ratio(float_path, data, graph.graph.input[0].name, device.multiple)
    keep = worst is not None and _faithful(worst) and ratio <= SPEEDUP
    out = builds.build_file(NAME, f"-v{LIVE_VERSION}.onnx", style, settings, key)
    if keep:
        device_models.write_whole(out, data)
    model = LiveModel(
        style=style.id, file=out.name if keep else None, sha256=hashlib.sha256(data).hexdigest() if keep else None,
        bytes=len(data) if keep else None, psnr=None if worst is None else round(min(worst[0], 100.0), 2),
        far=None if worst is None else worst[1], native_ratio=round(ratio, 3),
    )
    device_models.write_whole(_record_path(style, settings, key), json.dumps(asdict(model), indent=1).encode())
    seconds = time.monotonic() - started
    builds.log.debug("built %s in %.1f s", out, seconds, extra={"build_path": str(out), "build_seconds": seconds})
    return model


def _faithful(worst: tuple[float, float]) -> bool:
    from anipaint.quality import faithful

    return faithful(*worst)


def _calibration(settings: Settings, device: device_models.DeviceModel) -> list[np.ndarray]:
    """Real photos at the live view's size, padded as the worker pads them, NCHW float32 in [-1, 1]."""
    from anipaint.engine.compile.int8 import photos, synthetic_photo
    from anipaint.networks.padding import pad_to_multiple

    found = photos(settings, "calibrate", side=CALIBRATION_SIDE, limit=CALIBRATION_PHOTOS) or [
        synthetic_photo(CALIBRATION_SIDE, seed) for seed in range(3)]
    return [pad_to_multiple(x.float(), device.multiple, min_cells=device.min_cells).numpy() for x in found]


def _quantise(float_path: Path, input_name: str, calibration: list[np.ndarray], tmp: Path) -> bytes:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Photos(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = iter([{input_name: x} for x in calibration])

        def get_next(self) -> dict | None:
            return next(self.left, None)

    prepared, quantised = tmp / "prepared.onnx", tmp / "quantised.onnx"
    quant_pre_process(str(float_path), str(prepared), skip_symbolic_shape=True)
    quantize_static(str(prepared), str(quantised), Photos(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax, op_types_to_quantize=["Conv"])
    return quantised.read_bytes()


def _native_ratio(float_path: Path, data: bytes, input_name: str, multiple: int, rounds: int = 8) -> float:
    """Native ONNX Runtime's fastest time for the quantised model ÷ the float one's, rounds alternated, 256 × 192,
    on one thread: on two, the ratio swung by ±0.1 between runs on a shared machine (v3-cute 0.57–0.81), on one it
    held within ±0.01 (v3-hayao 0.55–0.56, v3-cute 0.79–0.81) on a quiet machine; the fastest of the rounds rather
    than their median, as the test suite's second worker once pushed v3-hayao's median ratio to 0.702."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, -(-192 // multiple) * multiple, 256)).astype(np.float32)
    sessions = [ort.InferenceSession(str(float_path), options, providers=["CPUExecutionProvider"]),
                ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])]
    times: list[list[float]] = [[], []]
    for i in range(rounds + 1):
        for s, t in zip(sessions, times, strict=True):
            t0 = time.perf_counter()
            s.run(None, {input_name: x})
            if i:
                t.append(time.perf_counter() - t0)
    return float(min(times[1]) / min(times[0]))


def make_note(style: Style, settings: Settings) -> str:
    """Make the style's live model now if it can have one; its line (``""`` when it cannot have a device model)."""
    if device_models.unsupported(style):
        return ""
    try:
        model = ensure(style, settings)
    except Exception as exc:  # noqa: BLE001 - reported in the line; the live view paints with the device model
        return f"live model failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
    if model.file is None:
        return f"no int8 live model (native {model.native_ratio}× the float time, {model.psnr} dB)"
    return f"int8 live model, {(model.bytes or 0) / 1e6:.1f} MB"
