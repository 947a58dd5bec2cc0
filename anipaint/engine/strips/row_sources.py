"""Where a strip executor's convolutions read rows from: the picture, a layer's file, resized or summed views.

Every source hands out float32 (1, C, rows, W) channels-last slabs of chosen rows, columns reflect-padded on
request. A layer's output lives in a :class:`RowFile` (float16 rows in a temporary file, the whole layer reserved
up front so a full disk fails before the layer starts); :class:`Activation` adds the per-channel sums its norm
needs and applies that norm on every read.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from anipaint.errors import ScratchSpaceError

STORE_DTYPE = np.float16  # activations on disk: pre-norm values are O(10), so 11 bits of mantissa are plenty
WHAT_TO_DO = "point ANIPAINT_SCRATCH_DIR at a disk with room, or paint in tiles with ANIPAINT_LARGE_MODE=tiles"

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


class RowFile:
    """A layer's rows in a temporary float16 file: ``row_elems`` values a row, the whole layer reserved at once."""

    def __init__(self, folder: Path, name: str, height: int, row_elems: int) -> None:
        self.path = folder / f"{name}.f16"
        self.height, self.row_elems = height, row_elems
        self.row_bytes = row_elems * np.dtype(STORE_DTYPE).itemsize
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:  # reserve the whole layer now: a full disk fails here, with a clear reason, not halfway
            os.posix_fallocate(self.fd, 0, height * self.row_bytes)
        except OSError as exc:
            self.release()
            free = shutil.disk_usage(folder).free
            raise ScratchSpaceError(
                f"not enough free disk for full-resolution painting: a {height * self.row_bytes / 1e9:.1f} GB "
                f"temporary layer does not fit in {folder.parent} ({free / 1e9:.1f} GB free); {WHAT_TO_DO}"
            ) from exc

    def write(self, row0: int, rows: Tensor) -> None:
        """Store rows ``row0 …`` (any tensor whose elements are whole rows, row-major)."""
        os.pwrite(self.fd, rows.contiguous().to(torch.float16).numpy(), row0 * self.row_bytes)

    def read(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo … hi - 1`` as a (rows, row_elems) float16 array."""
        slab = np.empty((hi - lo, self.row_elems), STORE_DTYPE)
        if os.preadv(self.fd, [slab], lo * self.row_bytes) != slab.nbytes:
            raise OSError(f"short read from {self.path}")
        return slab

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self.path.unlink(missing_ok=True)


class Activation(Source):
    """One layer's output, NHWC rows in a file, with per-channel running sums and the norm to apply on read."""

    def __init__(self, folder: Path, name: str, height: int, width: int, channels: int) -> None:
        self.height, self.width, self.channels = height, width, channels
        self.file = RowFile(folder, name, height, width * channels)
        self.rows_written = 0
        self.total = torch.zeros(channels, dtype=torch.float64)  # per-channel sums, float64 across strips
        self.total_sq = torch.zeros(channels, dtype=torch.float64)
        self.on_read: Callable[[Tensor], Tensor] | None = None

    def write(self, row0: int, x: Tensor) -> None:
        """Store rows ``row0 …`` from an NCHW tensor and add them to the statistics."""
        hwc = _hwc(x).contiguous()  # a view when the conv wrote channels-last (most do)
        flat = (hwc if hwc.dtype == torch.float32 else hwc.float()).view(-1, self.channels)
        # per strip in float32, summed across strips in float64 (float64 reductions were 8x slower)
        self.total += flat.sum(0).double()
        self.total_sq += flat.square().sum(0).double()  # (einsum "nc,nc->c" was 30x slower)
        self.rows_written += x.shape[2]
        self.file.write(row0, hwc)

    def normalise(self, gamma: Tensor, beta: Tensor, eps: float, act: bool, per_channel: bool) -> None:
        """Statistics are complete: every later read is normalised with them (then LeakyReLU(0.2) if ``act``).

        ``per_channel``: instance norm (mean and variance over H, W per channel), else layer norm (over H, W, C).
        """
        if self.rows_written != self.height:
            raise RuntimeError(f"layer {self.file.path.stem}: {self.rows_written} of {self.height} rows written")
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
        slab = self.file.read(lo, hi).reshape(hi - lo, self.width, self.channels)
        if len(index) != hi - lo or index[0] != lo:
            slab = slab[index - lo]
        x = padded_rows(torch.from_numpy(slab), left, right)
        return self.on_read(x) if self.on_read is not None else x

    def release(self) -> None:
        self.file.release()


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


