"""AnimeGANv2 rewritten for speed: the graph the compiled and int8 backends export.

The function of :data:`anipaint.networks.animeganv2.PLAN` (the module's own layer plan), laid out for a CPU:

* channels-last (NHWC) memory throughout, so oneDNN runs every convolution without reorders and Inductor fuses
  each norm → LeakyReLU → reflect pad (→ 2x resize) chain between two convolutions into one or two loops.
  (Tried and dropped: NHWC *logical* tensors with the pads written as cat/flip and the resize as
  stack/reshape; Inductor generated slower loops for them, 0.88 s against 0.34 s at 512 px);
* convolutions run in ``dtype`` (bfloat16 on CPUs with AVX512_BF16: half the memory traffic, twice the
  multiply rate, fp32 accumulation inside oneDNN); chosen convolutions can be int8
  (:mod:`anipaint.engine.compile.int8`), written as quantize → dequantize → conv so Inductor's freezing passes lower
  them to oneDNN's VNNI kernels.

The input must already be padded to a multiple of 4 (the backend does that, as the module does).
"""

from __future__ import annotations

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers the quantized_decomposed ops
import torch.nn.functional as F
from torch import Tensor, nn

from anipaint.networks.animeganv2 import LAYER_NORM_EPS, PLAN, RESIDUAL, UPSAMPLE, ConvSpec

# The convolutions worth int8: the full- and half-resolution ones hold ~75 % of the multiply-adds.
HEAVY_CONVS = ("block_d.0", "block_d.1", "block_e.0", "block_e.1", "block_e.2")


def upsample2x_tf1(x: Tensor) -> Tensor:
    """TF1 ``resize_bilinear`` to exactly 2x (align_corners=False, half_pixel_centers=False), NCHW.

    ``src = dst * in / out`` in float32 as TF computes it, neighbours ``floor(src)`` and the next one clamped to
    the edge. Kept as this gather (not the network module's resize) because it exports shape-generic, and
    because Inductor compiles it well: an integer ``dst // 2`` form compiled 8x slower under freezing.
    """

    def axis(n: int) -> tuple[Tensor, Tensor, Tensor]:
        src = torch.arange(2 * n, dtype=torch.float32, device=x.device) * 0.5
        lo = src.floor().long().clamp(max=n - 1)
        hi = (lo + 1).clamp(max=n - 1)
        return lo, hi, (src - lo).to(x.dtype)

    h_lo, h_hi, h_frac = axis(x.shape[-2])
    w_lo, w_hi, w_frac = axis(x.shape[-1])
    rows = torch.lerp(x[..., h_lo, :], x[..., h_hi, :], h_frac.view(-1, 1))
    return torch.lerp(rows[..., w_lo], rows[..., w_hi], w_frac)


def _norm_act(x: Tensor, gamma: Tensor, beta: Tensor, act: bool = True) -> Tensor:
    """GroupNorm(1) over (C, H, W) with TF's epsilon, per-channel affine, LeakyReLU(0.2)."""
    x = F.group_norm(x, 1, gamma.to(x.dtype), beta.to(x.dtype), eps=LAYER_NORM_EPS)
    return F.leaky_relu(x, 0.2) if act else x


class V2Graph(nn.Module):
    """AnimeGANv2 for export: NHWC activations, ``dtype`` convolutions, optional int8 convolutions.

    ``forward`` takes and returns NCHW float32 tensors (channels-last memory; H and W multiples of 4).
    ``int8`` maps a conv prefix to its :class:`anipaint.engine.compile.int8.QuantConv`.
    """

    def __init__(self, state_dict: dict[str, Tensor], dtype: torch.dtype = torch.bfloat16, int8: dict | None = None):
        super().__init__()
        self.dtype = dtype
        self.int8 = dict(int8 or {})
        self._names: dict[str, str] = {}
        for key, value in state_dict.items():
            name = key.replace(".", "_")
            self._names[key] = name
            t = value.detach().float()
            if t.dim() == 4:  # conv weights: channels-last, in the compute dtype
                t = t.to(dtype).contiguous(memory_format=torch.channels_last)
            elif key.endswith(".1.bias"):
                t = t.to(dtype)  # conv bias follows the conv dtype
            self.register_buffer(name, t)
        for prefix, q in self.int8.items():
            base = prefix.replace(".", "_")
            self.register_buffer(f"{base}_qweight", q.qweight.contiguous(memory_format=torch.channels_last))
            self.register_buffer(f"{base}_wscale", q.wscale.float())
            self.register_buffer(f"{base}_wzero", torch.zeros_like(q.wscale, dtype=torch.int64))

    def _p(self, key: str) -> Tensor:
        return getattr(self, self._names[key])

    def _conv(self, x: Tensor, spec: ConvSpec) -> Tensor:
        if any(spec.pad):
            x = F.pad(x, spec.pad, mode="reflect")
        w = self._p(f"{spec.prefix}.1.weight")
        bias_key = f"{spec.prefix}.1.bias"
        bias = self._p(bias_key) if bias_key in self._names else None
        groups = x.shape[1] if w.shape[1] == 1 and x.shape[1] > 1 else 1
        q = self.int8.get(spec.prefix)
        if q is not None:
            return self._int8_conv(x, spec, q, bias, groups)
        return F.conv2d(x, w, bias, stride=spec.stride, groups=groups)

    def _int8_conv(self, x: Tensor, spec: ConvSpec, q, bias: Tensor | None, groups: int) -> Tensor:
        ops = torch.ops.quantized_decomposed
        base = spec.prefix.replace(".", "_")
        xq = ops.quantize_per_tensor.default(x.float(), q.scale, q.zero_point, 0, 255, torch.uint8)
        xd = ops.dequantize_per_tensor.default(xq, q.scale, q.zero_point, 0, 255, torch.uint8)
        wd = ops.dequantize_per_channel.default(
            getattr(self, f"{base}_qweight"), getattr(self, f"{base}_wscale"), getattr(self, f"{base}_wzero"),
            0, -128, 127, torch.int8,
        )
        y = F.conv2d(xd, wd, None if bias is None else bias.float(), stride=spec.stride, groups=groups)
        return y.to(self.dtype)

    def _cnl(self, x: Tensor, spec: ConvSpec) -> Tensor:
        x = self._conv(x, spec)
        return _norm_act(x, self._p(f"{spec.prefix}.2.weight"), self._p(f"{spec.prefix}.2.bias"))

    def forward(self, x: Tensor) -> Tensor:
        x = x.to(self.dtype)
        residual: Tensor | None = None
        for step in PLAN:
            if step == RESIDUAL:
                residual = x
            elif step == UPSAMPLE:
                x = upsample2x_tf1(x)
            elif isinstance(step, str) and step.startswith("project:"):
                prefix = step.split(":", 1)[1]
                out = F.conv2d(x, self._p(f"{prefix}.layers.2.weight"))
                out = _norm_act(out, self._p(f"{prefix}.layers.3.weight"), self._p(f"{prefix}.layers.3.bias"), False)
                x = residual + out if residual is not None and residual.shape == out.shape else out
                residual = None
            else:
                x = self._cnl(x, step)
        return torch.tanh(F.conv2d(x, self._p("out_layer.0.weight")).float())
