"""Full-resolution AnimeGANv2 in bounded memory that paints exactly what one untiled pass paints.

Independent tiles can't do that: every layer norm of the generator normalises over the *whole* picture, and a
tile only sees itself, so tiles come out 23-30 dB away from the untiled painting (smooth tone shifts, see
``benchmarks/tiling_psnr.py``). Here the network runs one layer at a time over the whole picture, in strips of
rows:

* each convolution reads the rows it needs from the previous layer (reflect-padded at the picture's edges, as the
  untiled network pads), applies that layer's norm and LeakyReLU on the fly, and writes its own output, strip by
  strip, to a file, accumulating the sum and sum of squares that its own norm needs;
* once the layer is complete its statistics are final, and the next layer normalises with them;
* 2x upsampling happens on read, on just the rows a strip needs; a residual sum is written as its own layer
  once both of its terms are normalised.

Memory is one strip of input and output (~tens of MB) plus the model, whatever the picture's size; the
activations live in files in a temporary folder (float16, freed as soon as the next layer has read them; a
4096x4096 picture needs ~4.3 GB of disk at the widest point). The operating system's page cache absorbs most
of that I/O; it isn't the process's memory. The result differs from the untiled network only by float16
storage and summation order (≥ 45 dB PSNR), so seams can't exist. It costs about the eager network's time:
there is no compiled version of a strip.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from anipaint.engine.graphs import PLAN, ConvSpec
from anipaint.networks.animeganv2 import LAYER_NORM_EPS, MIN_SIZE, SIZE_MULTIPLE

STRIP_BYTES = 4 << 20  # float32 input rows per strip: small strips stay in cache (2048²: 9.3 s at 4 MB, 21 s at 48)
MIN_STRIP_ROWS = 8  # but not so few that a 7x7 kernel's 6 extra rows dominate
STORE_DTYPE = np.float16  # activations on disk: pre-norm values are O(10), so 11 bits of mantissa are plenty

Progress = Callable[[float], None]


def reflect(index: np.ndarray, n: int) -> np.ndarray:
    """Reflect-pad indices (no edge repeat, like ``F.pad(mode="reflect")``) into ``[0, n)``."""
    index = np.abs(index)
    return np.where(index >= n, 2 * (n - 1) - index, index)


class Source:
    """Something a convolution reads rows from: NCHW float32 channels-last slabs of chosen rows."""

    height: int
    width: int
    channels: int

    def rows(self, index: np.ndarray, left: int = 0, right: int = 0) -> Tensor:
        """Rows ``index`` (already reflected into range), columns reflect-padded by ``left`` and ``right``."""
        raise NotImplementedError

    def release(self) -> None:
        """Its storage is no longer needed."""


class PictureSource(Source):
    """The input picture (uint8 H×W×3, already padded to a multiple of 4) as [-1, 1] floats."""

    def __init__(self, rgb: np.ndarray) -> None:
        self.rgb = rgb
        self.height, self.width = rgb.shape[:2]
        self.channels = 3

    def rows(self, index: np.ndarray, left: int = 0, right: int = 0) -> Tensor:
        x = padded_rows(torch.from_numpy(np.ascontiguousarray(self.rgb[index])), left, right)
        return x.div_(127.5).sub_(1.0)


class Activation(Source):
    """One layer's output, NHWC rows in a file, with running statistics and the norm to apply on read."""

    def __init__(self, folder: Path, name: str, height: int, width: int, channels: int) -> None:
        self.height, self.width, self.channels = height, width, channels
        self.path = folder / f"{name}.f16"
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self.row_bytes = width * channels * np.dtype(STORE_DTYPE).itemsize
        try:  # reserve the whole layer now: a full disk fails here, before any work, not halfway
            os.posix_fallocate(self.fd, 0, height * self.row_bytes)
        except OSError:
            self.release()
            raise
        self.count = 0
        self.mean = 0.0  # running mean and sum of squared deviations (Chan et al.'s pairwise update), float64
        self.m2 = 0.0
        self.on_read: Callable[[Tensor], Tensor] | None = None

    def write(self, row0: int, x: Tensor) -> None:
        """Store rows ``row0 …`` from an NCHW tensor and add them to the statistics."""
        hwc = x[0].permute(1, 2, 0).contiguous()  # a view when the conv wrote channels-last (most do)
        flat = hwc.view(-1) if hwc.dtype == torch.float32 else hwc.float().view(-1)
        # per strip in float32 (sum and dot are ~25x faster than var_mean here), combined in float64
        n = flat.numel()
        mean = float(flat.sum()) / n
        var = max(0.0, float(torch.dot(flat, flat)) / n - mean * mean)
        total = self.count + n
        delta = mean - self.mean
        self.mean += delta * n / total
        self.m2 += var * n + delta * delta * self.count * n / total
        self.count = total
        os.pwrite(self.fd, hwc.to(torch.float16).numpy(), row0 * self.row_bytes)

    def normalise(self, gamma: Tensor, beta: Tensor, act: bool, eps: float) -> None:
        """Statistics are complete: every later read is layer-normed with them (then LeakyReLU if ``act``)."""
        if self.count != self.height * self.width * self.channels:
            raise RuntimeError(f"layer {self.path.stem}: {self.count} values written, expected a full layer")
        rstd = 1.0 / np.sqrt(self.m2 / self.count + eps)
        scale = (gamma.double() * rstd).float().view(1, -1, 1, 1)
        shift = (beta.double() - self.mean * gamma.double() * rstd).float().view(1, -1, 1, 1)

        def on_read(x: Tensor) -> Tensor:  # in place: x is a fresh buffer
            x.mul_(scale).add_(shift)
            return F.leaky_relu_(x, 0.2) if act else x

        self.on_read = on_read

    def rows(self, index: np.ndarray, left: int = 0, right: int = 0) -> Tensor:
        lo, hi = int(index.min()), int(index.max()) + 1
        slab = np.empty((hi - lo, self.width, self.channels), STORE_DTYPE)
        if os.preadv(self.fd, [slab], lo * self.row_bytes) != slab.nbytes:
            raise OSError(f"short read from {self.path}")
        if len(index) != hi - lo or index[0] != lo:
            slab = slab[index - lo]
        x = padded_rows(torch.from_numpy(slab), left, right)
        return self.on_read(x) if self.on_read is not None else x

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self.path.unlink(missing_ok=True)


class Upsampled(Source):
    """A source at exactly twice the size, resized on read (TF1 or the port's align_corners sampling)."""

    def __init__(self, inner: Source, align_corners: bool) -> None:
        self.inner = inner
        self.height, self.width, self.channels = 2 * inner.height, 2 * inner.width, inner.channels
        self.align_corners = align_corners

    def _coords(self, out: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.align_corners:
            src = out.astype(np.float64) * ((n - 1) / (2 * n - 1) if n > 1 else 0.0)
        else:  # TF1: src = dst * in / out, computed in float32 as TF (and graphs.upsample2x_tf1) does
            src = out.astype(np.float32) * np.float32(0.5)
        lo = np.minimum(np.floor(src).astype(np.int64), n - 1)
        hi = np.minimum(lo + 1, n - 1)
        return lo, hi, (src - lo).astype(np.float32)

    def rows(self, index: np.ndarray, left: int = 0, right: int = 0) -> Tensor:
        lo, hi, frac = self._coords(index, self.inner.height)
        need = np.union1d(lo, hi)
        # (rows, W, C) views: gathers along H and W then move whole channel vectors, not strided scalars
        slab = self.inner.rows(need)[0].permute(1, 2, 0)
        top = slab.index_select(0, torch.from_numpy(np.searchsorted(need, lo)))
        bottom = slab.index_select(0, torch.from_numpy(np.searchsorted(need, hi)))
        x = torch.lerp(top, bottom, torch.from_numpy(frac).view(-1, 1, 1))
        wlo, whi, wfrac = self._coords(np.arange(self.width), self.inner.width)
        x = torch.lerp(x.index_select(1, torch.from_numpy(wlo)), x.index_select(1, torch.from_numpy(whi)),
                       torch.from_numpy(wfrac).view(1, -1, 1))
        return padded_rows(x, left, right)

    def release(self) -> None:
        self.inner.release()


def padded_rows(hwc: Tensor, left: int, right: int) -> Tensor:
    """(rows, W, C) → float32 (1, C, rows, left + W + right) channels-last, columns reflect-padded.

    Written into one fresh buffer (conversion and padding in one copy): ``F.pad(mode="reflect")`` on
    channels-last slabs cost as much as the convolutions.
    """
    rows, width, channels = hwc.shape
    out = torch.empty((1, channels, rows, left + width + right), memory_format=torch.channels_last)
    view = out[0].permute(1, 2, 0)  # (rows, cols, C) over the same memory
    view[:, left : left + width].copy_(hwc)
    if left:
        view[:, :left].copy_(view[:, left + 1 : 2 * left + 1].flip(1))
    if right:
        view[:, left + width :].copy_(view[:, left + width - 1 - right : left + width - 1].flip(1))
    return out


def default_dtype() -> torch.dtype:
    """bfloat16 convolutions where the CPU multiplies bf16 natively (2.2x fp32 here), else float32."""
    from anipaint.engine.backends import cpu_flags

    return torch.bfloat16 if {"avx512_bf16", "amx_bf16"} & set(cpu_flags()) else torch.float32


def strip_rows(source: Source, stride: int) -> int:
    """Output rows per strip so that one strip's input is about ``STRIP_BYTES`` of float32."""
    per_row = source.width * source.channels * 4 * stride
    return max(MIN_STRIP_ROWS, STRIP_BYTES // max(1, per_row))


class StreamedV2:
    """AnimeGANv2 run layer by layer over row strips (see the module docstring).

    ``state_dict`` uses the port's key names (:class:`anipaint.networks.animeganv2.Generator`); ``semantics``
    "tf" or "port" selects the resize and the norm epsilon exactly as that module does.
    """

    def __init__(self, state_dict: dict[str, Tensor], semantics: str = "tf", dtype: torch.dtype | None = None,
                 folder: str | Path | None = None) -> None:
        self.dtype = dtype or default_dtype()
        self.params = {k: v.detach().float() for k, v in state_dict.items()}
        for key, value in self.params.items():
            if value.dim() == 4 or key.endswith(".1.bias"):  # convolution weights and biases: compute dtype
                self.params[key] = value.to(self.dtype).contiguous(
                    memory_format=torch.channels_last if value.dim() == 4 else torch.contiguous_format)
        self.align_corners = semantics == "port"
        self.eps = 1e-5 if semantics == "port" else LAYER_NORM_EPS
        self.folder = folder

    def _conv_layer(self, source: Source, folder: Path, name: str, weight: Tensor, bias: Tensor | None,
                    pad: tuple[int, int, int, int], stride: int, tick: Callable[[], None]) -> Activation:
        left, right, top, bottom = pad
        k_h, k_w = weight.shape[-2:]
        out_h = (source.height + top + bottom - k_h) // stride + 1
        out_w = (source.width + left + right - k_w) // stride + 1
        groups = source.channels if weight.shape[1] == 1 and source.channels > 1 else 1
        out = Activation(folder, name, out_h, out_w, weight.shape[0])
        step = strip_rows(source, stride)
        for row0 in range(0, out_h, step):
            row1 = min(out_h, row0 + step)
            padded = np.arange(row0 * stride, (row1 - 1) * stride + k_h)  # rows of the padded input
            x = source.rows(reflect(padded - top, source.height), left, right)
            with torch.inference_mode():
                out.write(row0, F.conv2d(x.to(self.dtype), weight, bias, stride=stride, groups=groups))
        tick()
        return out

    def paint(self, rgb: np.ndarray, progress: Progress | None = None) -> np.ndarray:
        """RGB uint8 (H, W, 3) → painted RGB uint8, the same pixels one untiled pass would give."""
        height, width = rgb.shape[:2]
        if min(height, width) < MIN_SIZE:
            raise ValueError(f"input {height}x{width} is too small; AnimeGANv2 needs at least {MIN_SIZE}x{MIN_SIZE}")
        pad_h, pad_w = -height % SIZE_MULTIPLE, -width % SIZE_MULTIPLE
        padded = np.pad(rgb, ((0, pad_h), (0, pad_w), (0, 0)), mode="reflect") if pad_h or pad_w else rgb
        steps = sum(1 for s in PLAN if isinstance(s, ConvSpec) or str(s).startswith("project:")) + 1
        done = [0]

        def tick() -> None:
            done[0] += 1
            if progress is not None:
                progress(done[0] / steps)

        p = self.params
        with tempfile.TemporaryDirectory(prefix="anipaint-stream-", dir=self.folder) as tmp:
            folder = Path(tmp)
            source: Source = PictureSource(padded)
            residual: Source | None = None
            for i, step in enumerate(PLAN):
                if step == "ir":
                    residual = source
                elif step == "up":
                    source = Upsampled(source, self.align_corners)
                elif isinstance(step, str):  # "project:<prefix>": 1x1 conv, norm without activation, residual
                    prefix = step.split(":", 1)[1]
                    out = self._conv_layer(source, folder, f"{i}", p[f"{prefix}.layers.2.weight"], None,
                                           (0, 0, 0, 0), 1, tick)
                    out.normalise(p[f"{prefix}.layers.3.weight"], p[f"{prefix}.layers.3.bias"], False, self.eps)
                    if source is not residual:
                        source.release()
                    if residual is not None and residual.channels == out.channels:
                        source = self._add(residual, out, folder, f"{i}-sum")
                        out.release()
                    else:
                        source = out
                    if residual is not None:
                        residual.release()
                    residual = None
                else:
                    out = self._conv_layer(source, folder, f"{i}", p[f"{step.prefix}.1.weight"],
                                           p.get(f"{step.prefix}.1.bias"), step.pad, step.stride, tick)
                    out.normalise(p[f"{step.prefix}.2.weight"], p[f"{step.prefix}.2.bias"], True, self.eps)
                    if source is not residual:
                        source.release()
                    source = out
            result = self._head(source, height, width)
            source.release()
            tick()
        return result

    @staticmethod
    def _add(a: Source, b: Source, folder: Path, name: str) -> Activation:
        """The residual sum of two normalised sources, written once (it is read by the next three layers)."""
        out = Activation(folder, name, b.height, b.width, b.channels)
        step = strip_rows(b, 1)
        for row0 in range(0, b.height, step):
            index = np.arange(row0, min(b.height, row0 + step))
            out.write(row0, a.rows(index) + b.rows(index))
        return out

    def _head(self, source: Source, height: int, width: int) -> np.ndarray:
        """The 1x1 output conv and tanh, straight into uint8 rows (cropped back to the picture's size)."""
        out = np.empty((height, width, 3), np.uint8)
        weight = self.params["out_layer.0.weight"]
        step = strip_rows(source, 1)
        for row0 in range(0, height, step):
            row1 = min(height, row0 + step)
            with torch.inference_mode():
                y = torch.tanh(F.conv2d(source.rows(np.arange(row0, row1)).to(self.dtype), weight).float())
            y = y[0, :, :, :width].add(1.0).mul(127.5).round().clamp(0, 255)
            out[row0:row1] = y.permute(1, 2, 0).to(torch.uint8).numpy()
        return out
