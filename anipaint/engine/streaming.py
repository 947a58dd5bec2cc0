"""Full-resolution AnimeGAN v1/v2 in bounded memory that paints exactly what one untiled pass paints.

Independent tiles can't do that: every norm layer of these generators normalises over the *whole* picture (v2's
layer norm over H, W and C; v1's instance norm over H and W per channel), and a tile only sees itself, so tiles
come out 20-32 dB away from the untiled painting (smooth tone shifts, see ``benchmarks/tiling_psnr.py``). Here
the network runs one layer at a time over the whole picture, in strips of rows:

* each convolution reads the rows it needs from the previous layer (reflect-padded at the picture's edges, as the
  untiled network pads), applies that layer's norm and LeakyReLU on the fly, and writes its own output, strip by
  strip, to a file, accumulating the sums that its own norm needs;
* once the layer is complete its statistics are final, and the next layer normalises with them;
* 2x up- and downsampling happen on read, on just the rows a strip needs; a residual sum is written as its own
  layer once both of its terms are normalised.

Memory is one strip of input and output (a few MB) plus the model, whatever the picture's size; the activations
live in files in a temporary folder (float16, freed as soon as the next layer has read them; a 4096x4096 picture
needs ~2-4 GB of disk at the widest point). The operating system's page cache absorbs most of that I/O; it isn't
the process's memory. Convolutions run in bfloat16 where the CPU has it, so the result differs from the untiled
float32 network by bf16/float16 rounding only (~54-55 dB PSNR for v2), and seams can't exist.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from anipaint.engine.cpu import has_native_bf16
from anipaint.errors import ScratchSpaceError
from anipaint.networks import animeganv1 as v1
from anipaint.networks.animeganv2 import (
    LAYER_NORM_EPS,
    MIN_SIZE,
    PLAN,
    PORT_NORM_EPS,
    RESIDUAL,
    SIZE_MULTIPLE,
    UPSAMPLE,
    ConvSpec,
)
from anipaint.networks.padding import alignment_padding

STRIP_BYTES = 4 << 20  # float32 input rows per strip: small strips stay in cache (2048²: 9.3 s at 4 MB, 21 s at 48)
MIN_STRIP_ROWS = 8  # but not so few that a 7x7 kernel's 6 extra rows dominate
STORE_DTYPE = np.float16  # activations on disk: pre-norm values are O(10), so 11 bits of mantissa are plenty
WHAT_TO_DO = "point ANIPAINT_SCRATCH_DIR at a disk with room, or paint in tiles with ANIPAINT_LARGE_MODE=tiles"

Progress = Callable[[float], None]


def reflect(index: np.ndarray, n: int) -> np.ndarray:
    """Reflect-pad indices (no edge repeat, like ``F.pad(mode="reflect")``) into ``[0, n)``."""
    index = np.abs(index)
    return np.where(index >= n, 2 * (n - 1) - index, index)


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


def _hwc(x: Tensor) -> Tensor:
    """(1, C, rows, W) → its (rows, W, C) view (a plain view for channels-last memory)."""
    return x[0].permute(1, 2, 0)


class Source:
    """Something a convolution reads rows from: float32 (1, C, rows, W) channels-last slabs of chosen rows."""

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
    """One layer's output, NHWC rows in a file, with per-channel running sums and the norm to apply on read."""

    def __init__(self, folder: Path, name: str, height: int, width: int, channels: int) -> None:
        self.height, self.width, self.channels = height, width, channels
        self.path = folder / f"{name}.f16"
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self.row_bytes = width * channels * np.dtype(STORE_DTYPE).itemsize
        self.rows_written = 0
        self.total = torch.zeros(channels, dtype=torch.float64)  # per-channel sums, float64 across strips
        self.total_sq = torch.zeros(channels, dtype=torch.float64)
        self.on_read: Callable[[Tensor], Tensor] | None = None
        try:  # reserve the whole layer now: a full disk fails here, with a clear reason, not halfway
            os.posix_fallocate(self.fd, 0, height * self.row_bytes)
        except OSError as exc:
            self.release()
            free = shutil.disk_usage(folder).free
            raise ScratchSpaceError(
                f"not enough free disk for full-resolution painting: a {height * self.row_bytes / 1e9:.1f} GB "
                f"temporary layer does not fit in {folder.parent} ({free / 1e9:.1f} GB free); {WHAT_TO_DO}"
            ) from exc

    def write(self, row0: int, x: Tensor) -> None:
        """Store rows ``row0 …`` from an NCHW tensor and add them to the statistics."""
        hwc = _hwc(x).contiguous()  # a view when the conv wrote channels-last (most do)
        flat = (hwc if hwc.dtype == torch.float32 else hwc.float()).view(-1, self.channels)
        # per strip in float32, summed across strips in float64 (float64 reductions were 8x slower)
        self.total += flat.sum(0).double()
        self.total_sq += flat.square().sum(0).double()  # (einsum "nc,nc->c" was 30x slower)
        self.rows_written += x.shape[2]
        os.pwrite(self.fd, hwc.to(torch.float16).numpy(), row0 * self.row_bytes)

    def normalise(self, gamma: Tensor, beta: Tensor, eps: float, act: bool, per_channel: bool) -> None:
        """Statistics are complete: every later read is normalised with them (then LeakyReLU(0.2) if ``act``).

        ``per_channel``: instance norm (mean and variance over H, W per channel), else layer norm (over H, W, C).
        """
        if self.rows_written != self.height:
            raise RuntimeError(f"layer {self.path.stem}: {self.rows_written} of {self.height} rows written")
        count = self.height * self.width
        total, total_sq = self.total, self.total_sq
        if not per_channel:
            total, total_sq, count = total.sum(), total_sq.sum(), count * self.channels
        mean = total / count
        var = (total_sq / count - mean * mean).clamp(min=0.0)
        scale = gamma.double() * torch.rsqrt(var + eps)
        shift = (beta.double() - mean * scale).float().view(1, -1, 1, 1)
        scale = scale.float().view(1, -1, 1, 1)

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

    def __init__(self, inner: Source, align_corners: bool = False) -> None:
        self.inner = inner
        self.height, self.width, self.channels = 2 * inner.height, 2 * inner.width, inner.channels
        self.align_corners = align_corners
        # the column sampling is the same for every strip: work it out once
        wlo, whi, wfrac = self._coords(np.arange(self.width), inner.width)
        self._columns = (torch.from_numpy(wlo), torch.from_numpy(whi), torch.from_numpy(wfrac).view(1, -1, 1))

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
        slab = _hwc(self.inner.rows(need))
        top = slab.index_select(0, torch.from_numpy(np.searchsorted(need, lo)))
        bottom = slab.index_select(0, torch.from_numpy(np.searchsorted(need, hi)))
        x = torch.lerp(top, bottom, torch.from_numpy(frac).view(-1, 1, 1))
        wlo, whi, wfrac = self._columns
        x = torch.lerp(x.index_select(1, wlo), x.index_select(1, whi), wfrac)
        return padded_rows(x, left, right)

    def release(self) -> None:
        self.inner.release()


class Halved(Source):
    """Every second row and column: TF1 ``resize_bilinear`` to exactly half an even size samples just those."""

    def __init__(self, inner: Source) -> None:
        if inner.height % 2 or inner.width % 2:
            raise ValueError("Halved needs even sizes (the input is padded to a multiple of 4)")
        self.inner = inner
        self.height, self.width, self.channels = inner.height // 2, inner.width // 2, inner.channels

    def rows(self, index: np.ndarray, left: int = 0, right: int = 0) -> Tensor:
        return padded_rows(_hwc(self.inner.rows(2 * index))[:, ::2], left, right)

    def release(self) -> None:
        self.inner.release()


class Sum(Source):
    """``a + b``, summed on read (for a sum that is read once)."""

    def __init__(self, a: Source, b: Source) -> None:
        if (a.height, a.width, a.channels) != (b.height, b.width, b.channels):
            raise ValueError("Sum of sources of different shapes")
        self.a, self.b = a, b
        self.height, self.width, self.channels = b.height, b.width, b.channels

    def rows(self, index: np.ndarray, left: int = 0, right: int = 0) -> Tensor:
        return self.a.rows(index, left, right).add_(self.b.rows(index, left, right))

    def release(self) -> None:
        self.a.release()
        self.b.release()


def default_dtype() -> torch.dtype:
    """bfloat16 convolutions where the CPU multiplies bf16 natively (2.2x fp32 here), else float32."""
    return torch.bfloat16 if has_native_bf16() else torch.float32


def strip_rows(source: Source, stride: int) -> int:
    """Output rows per strip so that one strip's input is about ``STRIP_BYTES`` of float32."""
    per_row = source.width * source.channels * 4 * stride
    return max(MIN_STRIP_ROWS, STRIP_BYTES // max(1, per_row))


@dataclass
class _Run:
    """One paint's own state (several threads may paint with the same network at once)."""

    folder: Path
    progress: Progress | None
    layers_done: int = 0
    sums_done: int = 0


class StreamedNetwork:
    """The machinery: layers over row strips into temporary files, and ``paint`` around a network's ``body``.

    ``state_dict`` has the network module's key names; subclasses say how its layers connect.
    """

    eps = LAYER_NORM_EPS
    per_channel = False  # instance norm (v1) rather than layer norm (v2)
    layers = 1  # conv layers ``body`` runs, for progress

    def __init__(self, state_dict: dict[str, Tensor], dtype: torch.dtype | None = None,
                 folder: str | Path | None = None) -> None:
        self.dtype = dtype or default_dtype()
        self.folder = folder
        self.params: dict[str, Tensor] = {}
        for key, value in state_dict.items():
            value = value.detach().float()
            if value.dim() == 4:  # convolution weights: compute dtype, channels-last
                value = value.to(self.dtype).contiguous(memory_format=torch.channels_last)
            self.params[key] = value
        self._local = threading.local()  # one engine serves concurrent jobs: each paint keeps its own state

    @property
    def _run(self) -> _Run:
        run = getattr(self._local, "run", None)
        if run is None:
            raise RuntimeError("layers run inside paint()")
        return run

    # ---- building blocks used by ``body`` --------------------------------------------------------------

    def conv(self, source: Source, weight: str, pad: tuple[int, int, int, int] = (0, 0, 0, 0), stride: int = 1,
             bias: str | None = None, pointwise: str | None = None) -> Activation:
        """A (reflect-padded, strided, possibly depthwise) convolution, optionally followed by a 1x1 one."""
        w = self.params[weight]
        b = self.params[bias].to(self.dtype) if bias and bias in self.params else None
        pw = self.params[pointwise] if pointwise else None
        left, right, top, bottom = pad
        k_h, k_w = w.shape[-2:]
        out_h = (source.height + top + bottom - k_h) // stride + 1
        out_w = (source.width + left + right - k_w) // stride + 1
        groups = source.channels if w.shape[1] == 1 and source.channels > 1 else 1
        out_c = (pw if pw is not None else w).shape[0]
        run = self._run
        run.layers_done += 1
        out = Activation(run.folder, f"{run.layers_done:03d}-{weight}", out_h, out_w, out_c)
        step = strip_rows(source, stride)
        for row0 in range(0, out_h, step):
            row1 = min(out_h, row0 + step)
            padded = np.arange(row0 * stride, (row1 - 1) * stride + k_h)  # rows of the padded input
            x = source.rows(reflect(padded - top, source.height), left, right).to(self.dtype)
            with torch.inference_mode():
                y = F.conv2d(x, w, b, stride=stride, groups=groups)
                if pw is not None:
                    y = F.conv2d(y, pw)
                out.write(row0, y)
        if run.progress is not None:
            run.progress(min(1.0, run.layers_done / (self.layers + 1)))
        return out

    def normed(self, out: Activation, norm: str, act: bool = True, eps: float | None = None) -> Activation:
        """``out`` with its norm (``<norm>.weight``/``.bias``) and LeakyReLU applied on every later read."""
        out.normalise(self.params[f"{norm}.weight"], self.params[f"{norm}.bias"], self.eps if eps is None else eps,
                      act, self.per_channel)
        return out

    def written_sum(self, a: Source, b: Source) -> Activation:
        """``a + b`` written as a layer (a residual sum is read by several later layers); releases both."""
        run = self._run
        run.sums_done += 1
        out = Activation(run.folder, f"sum-{run.sums_done:03d}", b.height, b.width, b.channels)
        step = strip_rows(b, 1)
        for row0 in range(0, b.height, step):
            index = np.arange(row0, min(b.height, row0 + step))
            out.write(row0, a.rows(index).add_(b.rows(index)))
        a.release()
        b.release()
        return out

    # ---- the whole picture --------------------------------------------------------------------------------

    def body(self, picture: Source) -> Source:
        """The network from the padded picture to the input of its 1x1 output conv (normalised on read)."""
        raise NotImplementedError

    head = "out_layer.0.weight"

    def paint(self, rgb: np.ndarray, progress: Progress | None = None) -> np.ndarray:
        """RGB uint8 (H, W, 3) → painted RGB uint8, the same pixels one untiled pass would give."""
        height, width = rgb.shape[:2]
        if min(height, width) < MIN_SIZE:
            raise ValueError(f"input {height}x{width} is too small; the network needs at least {MIN_SIZE} pixels")
        pad_h, pad_w = alignment_padding(height, width, SIZE_MULTIPLE)
        padded = np.pad(rgb, ((0, pad_h), (0, pad_w), (0, 0)), mode="reflect") if pad_h or pad_w else rgb
        try:
            scratch = tempfile.TemporaryDirectory(prefix="anipaint-stream-", dir=self.folder)
        except OSError as exc:
            raise ScratchSpaceError(
                f"cannot create temporary files for full-resolution painting in {self.folder or tempfile.gettempdir()}"
                f" ({exc.strerror or exc}); {WHAT_TO_DO}"
            ) from exc
        with scratch as tmp:
            self._local.run = _Run(Path(tmp), progress)
            try:
                features = self.body(PictureSource(padded))
                result = self._head(features, height, width)
                features.release()
            finally:
                self._local.run = None
        if progress is not None:
            progress(1.0)
        return result

    def _head(self, source: Source, height: int, width: int) -> np.ndarray:
        """The 1x1 output conv and tanh, straight into uint8 rows (cropped back to the picture's size)."""
        out = np.empty((height, width, 3), np.uint8)
        weight = self.params[self.head]
        step = strip_rows(source, 1)
        for row0 in range(0, height, step):
            row1 = min(height, row0 + step)
            with torch.inference_mode():
                y = torch.tanh(F.conv2d(source.rows(np.arange(row0, row1)).to(self.dtype), weight).float())
            y = y[0, :, :, :width].add(1.0).mul(127.5).round().clamp(0, 255)
            out[row0:row1] = y.permute(1, 2, 0).to(torch.uint8).numpy()
        return out


class StreamedV2(StreamedNetwork):
    """AnimeGANv2 (:mod:`anipaint.networks.animeganv2` key names) layer by layer, following ``animeganv2.PLAN``.

    ``semantics`` "tf" or "port" selects the resize and the norm epsilon exactly as that module does.
    """

    layers = sum(1 for s in PLAN if isinstance(s, ConvSpec) or str(s).startswith("project:"))

    def __init__(self, state_dict: dict[str, Tensor], semantics: str = "tf", dtype: torch.dtype | None = None,
                 folder: str | Path | None = None) -> None:
        super().__init__(state_dict, dtype, folder)
        self.align_corners = semantics == "port"
        self.eps = PORT_NORM_EPS if semantics == "port" else LAYER_NORM_EPS

    def body(self, picture: Source) -> Source:
        source: Source = picture
        residual: Source | None = None
        for step in PLAN:
            if step == RESIDUAL:
                residual = source
            elif step == UPSAMPLE:
                source = Upsampled(source, self.align_corners)
            elif isinstance(step, str):  # "project:<prefix>": 1x1 conv, norm without activation, residual
                prefix = step.split(":", 1)[1]
                out = self.normed(self.conv(source, f"{prefix}.layers.2.weight"), f"{prefix}.layers.3", act=False)
                if source is not residual:
                    source.release()
                if residual is not None and residual.channels == out.channels:
                    source = self.written_sum(residual, out)
                else:
                    if residual is not None:
                        residual.release()
                    source = out
                residual = None
            else:
                out = self.conv(source, f"{step.prefix}.1.weight", step.pad, step.stride, bias=f"{step.prefix}.1.bias")
                if source is not residual:
                    source.release()
                source = self.normed(out, f"{step.prefix}.2")
        return source


class StreamedV1(StreamedNetwork):
    """AnimeGAN v1 (:mod:`anipaint.networks.animeganv1` key names) layer by layer, instance norms."""

    per_channel = True
    eps = v1.NORM_EPS
    layers = 4 + 4 + 1 + 8 * 3 + 1 + 3 + 3  # b1, b2, m.conv_in, eight residual blocks, m.conv_out, u2, u1
    head = "out.weight"

    def _cnl(self, source: Source, prefix: str) -> Activation:
        """``ConvNormLReLU``: reflect pad k//2, conv, instance norm (eps 1e-5), LeakyReLU; releases ``source``."""
        k = self.params[f"{prefix}.conv.weight"].shape[-1]
        out = self.normed(self.conv(source, f"{prefix}.conv.weight", (k // 2,) * 4), f"{prefix}.norm")
        source.release()
        return out

    def _sep(self, source: Source, prefix: str, stride: int = 1, release: bool = True) -> Activation:
        """``SeparableConv``: depthwise 3x3 + pointwise 1x1, instance norm (eps 1e-6), LeakyReLU."""
        pad = (0, 1, 0, 1) if stride == 2 else (1, 1, 1, 1)
        out = self.conv(source, f"{prefix}.depthwise.weight", pad, stride, pointwise=f"{prefix}.pointwise.weight")
        if release:
            source.release()
        return self.normed(out, f"{prefix}.norm", eps=v1.SEPARABLE_NORM_EPS)

    def _down(self, source: Source, prefix: str) -> Source:
        strided = self._sep(source, f"{prefix}.strided", stride=2, release=False)
        resized = self._sep(Halved(source), f"{prefix}.resized")  # releases ``source`` too
        return Sum(strided, resized)

    def body(self, picture: Source) -> Source:
        x = self._down(self._cnl(self._cnl(picture, "b1.conv1"), "b1.conv2"), "b1.down")
        x = self._down(self._sep(self._cnl(x, "b2.conv"), "b2.sep"), "b2.down")
        x = self._cnl(x, "m.conv_in")
        for i in range(8):
            p = f"m.res.{i}"
            y = self.normed(self.conv(x, f"{p}.expand.conv.weight"), f"{p}.expand.norm")
            dw = self.normed(self.conv(y, f"{p}.depthwise.weight", (1, 1, 1, 1)), f"{p}.norm1")
            y.release()
            projected = self.normed(self.conv(dw, f"{p}.project.weight"), f"{p}.norm2", act=False)
            dw.release()
            x = self.written_sum(x, projected)
        x = self._cnl(x, "m.conv_out")
        x = self._cnl(self._sep(self._sep(Upsampled(x), "u2.sep1"), "u2.sep2"), "u2.conv")
        return self._cnl(self._cnl(self._sep(Upsampled(x), "u1.sep"), "u1.conv1"), "u1.conv2")


def for_network(network: torch.nn.Module, folder: str | Path | None = None) -> StreamedNetwork | None:
    """The streamed version of an eager AnimeGAN v1/v2 module, or None for other architectures."""
    from anipaint.networks.animeganv1 import AnimeGANv1Generator
    from anipaint.networks.animeganv2 import Generator as V2

    if isinstance(network, V2):
        return StreamedV2(network.state_dict(), network.semantics, folder=folder)
    if isinstance(network, AnimeGANv1Generator):
        return StreamedV1(network.state_dict(), folder=folder)
    return None
