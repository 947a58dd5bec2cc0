"""Static int8 for the heavy AnimeGANv2 convolutions, and the photos used to calibrate and check backends.

Weights: symmetric int8 per output channel (scale = max |w| / 127). Activations: asymmetric uint8 per tensor,
the range measured on real photos at the input of each quantised conv (after norm, LeakyReLU and reflect pad).
The layer norm in front of each conv keeps those ranges stable from picture to picture, so a min/max over a few
photos is enough. Only :data:`anipaint.engine.compile.v2_graph.HEAVY_CONVS` (block_d and block_e: ~75 % of the
multiply-adds) are quantised. On an AVX512-VNNI machine (bf16 everywhere else) this gave PSNR
46 dB against the fp32 reference but only ~6 % less time than all-bf16: at these sizes the convs are limited by
memory traffic (fp32 outputs), not by multiply rate. Quantising every conv (ONNX Runtime QDQ) fell to 32-34 dB.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from anipaint.engine.compile.v2_graph import HEAVY_CONVS, V2Graph
from anipaint.engine.tensors import to_tensor
from anipaint.networks.animeganv2 import ConvSpec
from anipaint.settings import Settings

# skimage.data photos (a test dependency): calibration and checking use different pictures where possible.
CALIBRATION_PHOTOS = ("chelsea", "rocket", "astronaut")
PHOTO_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")


@dataclass(frozen=True)
class QuantConv:
    scale: float  # input activation scale (uint8)
    zero_point: int
    qweight: Tensor  # int8, per output channel
    wscale: Tensor  # float32 [out_channels]


def _fit(rgb: np.ndarray, side: int) -> Tensor:
    """uint8 HxWx3 → float NCHW in [-1, 1], long side ``side`` (antialiased), each side a multiple of 4."""

    x = to_tensor(rgb)
    h, w = x.shape[-2:]
    scale = side / max(h, w)
    size = (max(8, round(h * scale) // 4 * 4), max(8, round(w * scale) // 4 * 4))
    return F.interpolate(x, size=size, mode="bilinear", antialias=True, align_corners=False).clamp(-1, 1)


def synthetic_photo(side: int = 512, seed: int = 0) -> Tensor:
    """A photo-like test picture (smooth colour fields, edges, texture) for machines with no photos at all."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, side), torch.linspace(-1, 1, side), indexing="ij")
    base = torch.stack([0.6 * xx, 0.5 * yy, 0.4 * (xx * yy)], 0)
    blobs = sum(
        torch.exp(-(((xx - cx) ** 2 + (yy - cy) ** 2) / r)) * c.view(3, 1, 1)
        for cx, cy, r, c in (
            (*torch.rand(2, generator=g) * 2 - 1, 0.02 + 0.2 * torch.rand(1, generator=g), torch.rand(3, generator=g))
            for _ in range(12)
        )
    )
    edges = ((xx * 3).floor() % 2 * 0.3 - 0.15) * (yy > 0)
    noise = 0.05 * torch.randn(3, side, side, generator=g)
    return (base + blobs + edges + noise).clamp(-1, 1).unsqueeze(0).float()


# See its README: what they are and their terms.
CHECK_PHOTO_DIR = Path(__file__).resolve().parent.parent / "check_photos"


def packaged_photos(side: int) -> list[Tensor]:
    """The photos shipped with the package to check backends on (a flat sky, porcelain and a wall, skin)."""
    from PIL import Image

    out = []
    for path in sorted(CHECK_PHOTO_DIR.glob("*.jpg")):
        with Image.open(path) as im:
            out.append(_fit(np.asarray(im.convert("RGB")), side))
    return out


def photos(settings: Settings, role: str = "check", side: int = 512, limit: int = 3) -> list[Tensor]:
    """Real photos for calibrating (``role="calibrate"``) or checking backends, long side ``side``.

    Sources, in order: the project's sample folder (``<sources>/../samples``) and, when scikit-image is
    installed, its sample photos. Empty if no photo is found (callers fall back to :func:`synthetic_photo`).
    """
    arrays: list[np.ndarray] = []
    samples = settings.samples_dir
    if samples.is_dir():
        from PIL import Image

        for path in sorted(samples.iterdir()):
            if path.suffix.lower() in PHOTO_SUFFIXES:
                with Image.open(path) as im:
                    arrays.append(np.asarray(im.convert("RGB")))
    try:
        import skimage.data as data
    except ImportError:
        data = None
    if data is not None:
        for name in CALIBRATION_PHOTOS if role == "calibrate" else ():
            try:
                arrays.append(np.asarray(getattr(data, name)())[..., :3])
            except Exception:  # noqa: BLE001 - a missing optional sample is not an error
                continue
    if role == "calibrate" and len(arrays) > 1:
        arrays = arrays[1:]  # keep the first sample photo (the usual test photo) out of calibration
    return [_fit(a, side) for a in arrays[:limit]]


class _Recorder(V2Graph):
    """The fp32 graph that records the input range of chosen convs."""

    def __init__(self, state_dict: dict[str, Tensor], prefixes: tuple[str, ...]) -> None:
        super().__init__(state_dict, torch.float32)
        self.ranges: dict[str, tuple[float, float]] = {p: (0.0, 0.0) for p in prefixes}

    def _conv(self, x: Tensor, spec: ConvSpec) -> Tensor:
        if spec.prefix in self.ranges:
            lo, hi = self.ranges[spec.prefix]
            self.ranges[spec.prefix] = (min(lo, float(x.min())), max(hi, float(x.max())))
        return super()._conv(x, spec)


def quantize_weight(w: Tensor) -> tuple[Tensor, Tensor]:
    """Symmetric per-output-channel int8: (int8 weight, float32 scales)."""
    scale = w.float().abs().amax(dim=tuple(range(1, w.dim()))).clamp_min(1e-12) / 127.0
    q = torch.round(w.float() / scale.view(-1, *([1] * (w.dim() - 1)))).clamp(-127, 127).to(torch.int8)
    return q, scale


def calibrate(
    state_dict: dict[str, Tensor], pictures: list[Tensor], prefixes: tuple[str, ...] = HEAVY_CONVS
) -> dict[str, QuantConv]:
    """Per-conv int8 parameters from the activation ranges seen on ``pictures`` (NCHW, [-1, 1])."""
    if not pictures:
        raise ValueError("int8 calibration needs at least one photo")
    rec = _Recorder(state_dict, prefixes).eval()
    with torch.inference_mode():
        for x in pictures:
            rec(x)
    out: dict[str, QuantConv] = {}
    for prefix, (lo, hi) in rec.ranges.items():
        lo, hi = min(lo, 0.0), max(hi, 0.0)  # the range must hold 0 exactly (the reflect pads copy values)
        scale = max(hi - lo, 1e-6) / 255.0
        qweight, wscale = quantize_weight(state_dict[f"{prefix}.1.weight"])
        out[prefix] = QuantConv(scale, int(round(-lo / scale)), qweight, wscale)
    return out
