"""TensorFlow op semantics in torch, where PyTorch's own functions compute something different.

Shared by the graph executor (:mod:`anipaint.networks.graph_module`) and the named networks that mirror TF
graphs (:mod:`anipaint.networks.animeganv1`): bilinear resizing in TF's three coordinate modes, TF's SAME
padding rule, SYMMETRIC mirror padding and ``StridedSlice`` with its bit masks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def resize_axis(n_in: int, n_out: int, align_corners: bool, half_pixel: bool,
                 device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    """Source indices and weights for one axis, as TF's ``compute_interpolation_weights`` (float32 maths)."""
    if align_corners and n_out > 1:
        scale = (n_in - 1) / (n_out - 1)
    else:
        scale = n_in / n_out
    scale_t = torch.tensor(scale, dtype=torch.float32)  # TF holds the scale as float32
    dst = torch.arange(n_out, dtype=torch.float32)
    src = (dst + 0.5) * scale_t - 0.5 if half_pixel else dst * scale_t
    floor = src.floor()
    lo = floor.long().clamp(min=0, max=n_in - 1)
    hi = src.ceil().long().clamp(min=0, max=n_in - 1)
    frac = src - floor
    return lo.to(device), hi.to(device), frac.to(device)


def resize_bilinear(x: Tensor, size: tuple[int, int], align_corners: bool = False,
                    half_pixel_centers: bool = False, channels_last: bool = False,
                    stored_dtype: torch.dtype | None = None) -> Tensor:
    """TF ``ResizeBilinear`` on an NCHW tensor.

    With both flags False this is TF1's "asymmetric" sampling (``src = dst * in / out``, no half-pixel
    offset), which ``F.interpolate`` cannot express: its ``align_corners=False`` is the half-pixel mode.
    Neighbours are ``max(floor(src), 0)`` and ``min(ceil(src), in - 1)``; x is interpolated before y, as TF.
    ``channels_last`` computes a 2x upsampling as :func:`_double_channels_last` (the same values), for a
    compiler working on channels-last activations, rounded to ``stored_dtype`` if given.
    """
    # sizes stay symbolic while exporting (int() would pin them to the example's)
    out_h, out_w = (v if isinstance(v, torch.SymInt) else int(v) for v in size)
    if not align_corners and not half_pixel_centers:
        if channels_last and x.dim() == 4 and (out_h, out_w) == (2 * x.shape[-2], 2 * x.shape[-1]):
            return _double_channels_last(x, stored_dtype)
        fast = _resize_exact(_resize_exact(x, -1, out_w), -2, out_h)
        if fast is not None:
            return fast
    h_lo, h_hi, h_frac = resize_axis(x.shape[-2], out_h, align_corners, half_pixel_centers, x.device)
    w_lo, w_hi, w_frac = resize_axis(x.shape[-1], out_w, align_corners, half_pixel_centers, x.device)
    w_frac = w_frac.to(x.dtype)
    left = x.index_select(-1, w_lo)
    right = x.index_select(-1, w_hi)
    cols = left + (right - left) * w_frac
    top = cols.index_select(-2, h_lo)
    bottom = cols.index_select(-2, h_hi)
    return top + (bottom - top) * h_frac.to(x.dtype).view(-1, 1)


def _resize_exact(x: Tensor | None, dim: int, n_out: int) -> Tensor | None:
    """TF1 asymmetric resize along one axis for the ratios the generators use, without a gather.

    Gathers along the last axis (``index_select``) were 40 % of a v1 paint; the cases that occur are exact:
    same size; half size (``src = 2 * dst`` lands on pixels, weight 0); double size (even outputs copy the
    input, odd ones average a pixel with its right/lower neighbour, the last one with itself).
    Returns None for any other ratio, so the general path runs.
    """
    if x is None:
        return None
    n_in = x.shape[dim]
    if n_out == n_in:
        return x
    if n_in == 2 * n_out:
        return _every_other(x, dim)
    if n_out == 2 * n_in:
        nxt = torch.cat([x.narrow(dim, 1, n_in - 1), x.narrow(dim, n_in - 1, 1)], dim=dim)
        odd = x + (nxt - x) * 0.5
        d = dim % x.dim()
        shape = list(x.shape)
        shape[d] = n_out
        return torch.stack([x, odd], dim=d + 1).reshape(shape)
    return None


def _double_channels_last(x: Tensor, stored_dtype: torch.dtype | None = None) -> Tensor:
    """TF1's exact 2x upsampling of an NCHW tensor held channels-last, as four quarter pictures (even or odd
    rows × even or odd columns) read from one edge-padded copy and interleaved in NHWC order.

    The per-axis form (:func:`_resize_exact`) interleaves in NCHW order; on channels-last activations
    Inductor wrote each step to a float32 buffer and transposed it. v3-hayao's last upsampling with its
    norm, at 512 px on two cores: 78 ms per axis in NCHW order, 17 ms per axis in NHWC order, 11 ms so."""
    n, c, h, w = x.shape
    edge = F.pad(x, (0, 1, 0, 1), mode="replicate").permute(0, 2, 3, 1)  # NHWC, one more row and column
    here, right, down, down_right = edge[:, :h, :w], edge[:, :h, 1:], edge[:, 1:, :w], edge[:, 1:, 1:]
    even_odd = here + (right - here) * 0.5  # columns first, then rows, as TF
    below_odd = down + (down_right - down) * 0.5
    odd_even = here + (down - here) * 0.5
    odd_odd = even_odd + (below_odd - even_odd) * 0.5
    if stored_dtype is not None:  # each value rounded once, as it would be later: a quarter of the traffic saved
        here, even_odd, odd_even, odd_odd = (t.to(stored_dtype) for t in (here, even_odd, odd_even, odd_odd))
    rows = torch.stack([torch.stack([here, even_odd], dim=3), torch.stack([odd_even, odd_odd], dim=3)], dim=2)
    return rows.reshape(n, 2 * h, 2 * w, c).permute(0, 3, 1, 2)


def _every_other(x: Tensor, dim: int) -> Tensor:
    index = [slice(None)] * x.dim()
    index[dim % x.dim()] = slice(0, None, 2)
    return x[tuple(index)]


def same_padding(size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TF's SAME rule: output ``ceil(size / stride)``; the odd pixel of padding goes bottom/right."""
    out = -(-size // stride)
    effective = (kernel - 1) * dilation + 1
    total = max((out - 1) * stride + effective - size, 0)
    return total // 2, total - total // 2


def mirror_pad(x: Tensor, pads: list[tuple[int, int]], mode: str) -> Tensor:
    """``MirrorPad`` over any dims; ``pads[d] = (before, after)``. REFLECT excludes the edge, SYMMETRIC
    repeats it. Spatial REFLECT on 3-5-D tensors goes through ``F.pad``; anything else is built by slicing."""
    mode = mode.upper()
    nd = x.dim()
    active = [d for d in range(nd) if pads[d] != (0, 0)]
    if not active:
        return x
    if mode == "REFLECT" and 3 <= nd <= 5 and min(active) >= 2:
        flat: list[int] = []
        for d in range(nd - 1, 1, -1):  # F.pad lists the last dim first
            flat += list(pads[d])
        return F.pad(x, flat, mode="reflect")
    offset = 1 if mode == "REFLECT" else 0
    for d in active:
        before, after = pads[d]
        n = x.shape[d]
        parts = []
        if before:
            parts.append(x.narrow(d, offset, before).flip(d))
        parts.append(x)
        if after:
            parts.append(x.narrow(d, n - after - offset, after).flip(d))
        x = torch.cat(parts, d)
    return x


def strided_slice(x: Tensor, begin: list[int], end: list[int], strides: list[int], begin_mask: int = 0,
                  end_mask: int = 0, ellipsis_mask: int = 0, new_axis_mask: int = 0,
                  shrink_axis_mask: int = 0) -> Tensor:
    """TF ``StridedSlice`` with its bit masks (negative strides supported through ``flip``)."""
    n_spec = len(begin)
    # dims covered by an ellipsis: everything not named by the other (non-new-axis) specs
    named = sum(1 for i in range(n_spec) if not (ellipsis_mask >> i) & 1 and not (new_axis_mask >> i) & 1)
    dim = 0
    out_dims: list[tuple[str, object]] = []
    for i in range(n_spec):
        if (ellipsis_mask >> i) & 1:
            span = x.dim() - named
            out_dims += [("full", None)] * span
            dim += span
            continue
        if (new_axis_mask >> i) & 1:
            out_dims.append(("new", None))
            continue
        size = x.shape[dim]
        b, e, s = begin[i], end[i], strides[i]
        if (shrink_axis_mask >> i) & 1:
            out_dims.append(("take", b + size if b < 0 else b))
            dim += 1
            continue
        if s > 0:
            lo = 0 if (begin_mask >> i) & 1 else min(max(b + size if b < 0 else b, 0), size)
            hi = size if (end_mask >> i) & 1 else min(max(e + size if e < 0 else e, 0), size)
        else:
            lo = size - 1 if (begin_mask >> i) & 1 else min(max(b + size if b < 0 else b, -1), size - 1)
            hi = -1 if (end_mask >> i) & 1 else min(max(e + size if e < 0 else e, -1), size - 1)
        out_dims.append(("range", (lo, hi, s)))
        dim += 1
    out_dims += [("full", None)] * (x.dim() - dim)

    d = 0
    result = x
    for kind, arg in out_dims:
        if kind == "full":
            d += 1
        elif kind == "new":
            result = result.unsqueeze(d)
            d += 1
        elif kind == "take":
            result = result.select(d, int(arg))  # type: ignore[arg-type]
        else:
            lo, hi, s = arg  # type: ignore[misc]
            if s > 0:
                idx = torch.arange(lo, max(hi, lo), s, device=x.device)
            else:
                idx = torch.arange(lo, min(hi, lo), s, device=x.device)
            result = result.index_select(d, idx)
            d += 1
    return result
