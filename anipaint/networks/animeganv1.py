"""The AnimeGAN (v1) generator in PyTorch, read off the TF graph of the TF.js exports (``generator/G_MODEL``).

Modules carry the TF scope names (``b1``, ``b2``, ``m`` with ``r1``..``r8``, ``u2``, ``u1``, ``out``) and each
leaf knows the TF constants behind its parameters, so :meth:`AnimeGANv1Generator.from_graph` maps an imported
graph onto the state dict by name (``strict=True``) and checks that every float constant was used.

What the graph computes, and this module reproduces:

* conv blocks: MirrorPad REFLECT, Conv2D VALID without bias, instance norm, LeakyReLU(0.2). The instance norm
  is TF's decomposed one (mean and biased variance over H, W per channel; ``x * g*rsqrt(v+eps) + (b - m*...)``)
  with eps 1e-5 for ``InstanceNorm`` scopes and 1e-6 inside ``SeparableConv2d`` scopes (constants checked);
* separable convs: depthwise 3x3 then pointwise 1x1, both without bias;
* down blocks ``b1``/``b2`` add two branches: a stride-2 separable conv on the input padded by one pixel at the
  bottom/right only, and a separable conv after resizing to ``(H // 2, W // 2)``;
* ``m``: a conv, eight inverted residual blocks (1x1 expand to 512, depthwise 3x3, 1x1 project back to 256,
  no activation after the projection) and a conv;
* up blocks resize to exactly 2x with TF1 ``resize_bilinear`` (asymmetric sampling, no half-pixel offset);
* the head is a 1x1 conv and tanh.

Any input size: the output of the graph is ``4 * (H // 4)`` by ``4 * (W // 4)``, so the input is reflect-padded
at the bottom/right to a multiple of 4 (at least 8) and the output cropped back, exactly as the graph executor
does, so both give the same pixels at every size.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from anipaint.networks.graph_ops import resize_bilinear
from anipaint.networks.padding import pad_to_multiple

TF_PREFIX = "generator/G_MODEL/"
NORM_EPS = 1e-5  # tf.contrib.layers.instance_norm default, the graph's InstanceNorm*/instancenorm/add/y
SEPARABLE_NORM_EPS = 1e-6  # the instance norm inside the SeparableConv2d scopes
SIZE_MULTIPLE = 4  # two stride-2 levels


class InstanceNorm(nn.Module):
    """TF's decomposed instance norm with affine ``gamma``/``beta`` (stored as weight/bias)."""

    def __init__(self, channels: int, eps: float, tf_scope: str) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.tf_names = {"weight": (f"{tf_scope}/gamma", "vector"), "bias": (f"{tf_scope}/beta", "vector")}
        self.tf_eps = f"{tf_scope}/instancenorm/add/y"

    def forward(self, x: Tensor) -> Tensor:
        mean = x.mean(dim=(2, 3), keepdim=True)
        var = torch.square(x - mean).mean(dim=(2, 3), keepdim=True)
        scale = torch.rsqrt(var + self.eps) * self.weight.view(1, -1, 1, 1)
        return x * scale + (self.bias.view(1, -1, 1, 1) - mean * scale)


class ConvNormLReLU(nn.Module):
    """MirrorPad + Conv2D (no bias) + instance norm + LeakyReLU(0.2)."""

    def __init__(self, cin: int, cout: int, kernel: int, conv_scope: str, norm_scope: str) -> None:
        super().__init__()
        self.pad = kernel // 2
        self.conv = nn.Conv2d(cin, cout, kernel, bias=False)
        self.conv.tf_names = {"weight": (f"{conv_scope}/weights", "conv")}  # type: ignore[assignment]
        self.norm = InstanceNorm(cout, NORM_EPS, norm_scope)

    def forward(self, x: Tensor) -> Tensor:
        if self.pad:
            x = F.pad(x, (self.pad,) * 4, mode="reflect")
        return F.leaky_relu(self.norm(self.conv(x)), 0.2)


class SeparableConv(nn.Module):
    """(Padding) + depthwise 3x3 + pointwise 1x1 + instance norm (eps 1e-6) + LeakyReLU(0.2)."""

    def __init__(self, cin: int, cout: int, scope: str, stride: int = 1) -> None:
        super().__init__()
        # stride 2: TF pads [0, 1] (bottom/right only), so output = floor(H / 2) like the resize branch
        self.padding = (0, 1, 0, 1) if stride == 2 else (1, 1, 1, 1)
        self.depthwise = nn.Conv2d(cin, cin, 3, stride, groups=cin, bias=False)
        self.depthwise.tf_names = {"weight": (f"{scope}/depthwise_weights", "depthwise")}  # type: ignore[assignment]
        self.pointwise = nn.Conv2d(cin, cout, 1, bias=False)
        self.pointwise.tf_names = {"weight": (f"{scope}/pointwise_weights", "conv")}  # type: ignore[assignment]
        self.norm = InstanceNorm(cout, SEPARABLE_NORM_EPS, f"{scope}/InstanceNorm")

    def forward(self, x: Tensor) -> Tensor:
        x = self.pointwise(self.depthwise(F.pad(x, self.padding, mode="reflect")))
        return F.leaky_relu(self.norm(x), 0.2)


class Downsample(nn.Module):
    """Sum of a strided separable conv and a separable conv on the input resized to half (floor) size."""

    def __init__(self, cin: int, cout: int, strided_scope: str, resized_scope: str) -> None:
        super().__init__()
        self.strided = SeparableConv(cin, cout, strided_scope, stride=2)
        self.resized = SeparableConv(cin, cout, resized_scope)

    def forward(self, x: Tensor) -> Tensor:
        half = resize_bilinear(x, (x.shape[2] // 2, x.shape[3] // 2))
        return self.strided(x) + self.resized(half)


class InvertedResBlock(nn.Module):
    """``m/rN``: 1x1 expand + norm + lrelu, depthwise 3x3 + norm ``1`` + lrelu, 1x1 project + norm ``2``, add."""

    def __init__(self, scope: str, channels: int = 256, expanded: int = 512) -> None:
        super().__init__()
        name = scope.rsplit("/", 1)[-1]
        self.expand = ConvNormLReLU(channels, expanded, 1, f"{scope}/Conv", f"{scope}/InstanceNorm")
        self.depthwise = nn.Conv2d(expanded, expanded, 3, groups=expanded, bias=False)
        self.depthwise.tf_names = {"weight": (f"{scope}/{name}/w", "depthwise")}  # type: ignore[assignment]
        self.norm1 = InstanceNorm(expanded, NORM_EPS, f"{scope}/1")
        self.project = nn.Conv2d(expanded, channels, 1, bias=False)
        self.project.tf_names = {"weight": (f"{scope}/Conv_1/weights", "conv")}  # type: ignore[assignment]
        self.norm2 = InstanceNorm(channels, NORM_EPS, f"{scope}/2")

    def forward(self, x: Tensor) -> Tensor:
        y = self.expand(x)
        y = F.leaky_relu(self.norm1(self.depthwise(F.pad(y, (1, 1, 1, 1), mode="reflect"))), 0.2)
        return x + self.norm2(self.project(y))


def _up2(x: Tensor) -> Tensor:
    return resize_bilinear(x, (2 * x.shape[2], 2 * x.shape[3]))


class B1(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = ConvNormLReLU(3, 64, 3, "b1/Conv", "b1/InstanceNorm")
        self.conv2 = ConvNormLReLU(64, 64, 3, "b1/Conv_1", "b1/InstanceNorm_1")
        self.down = Downsample(64, 128, "b1/SeparableConv2d", "b1/SeparableConv2d_1")

    def forward(self, x: Tensor) -> Tensor:
        return self.down(self.conv2(self.conv1(x)))


class B2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = ConvNormLReLU(128, 128, 3, "b2/Conv", "b2/InstanceNorm")
        self.sep = SeparableConv(128, 128, "b2/SeparableConv2d")
        self.down = Downsample(128, 256, "b2/SeparableConv2d_1", "b2/SeparableConv2d_2")

    def forward(self, x: Tensor) -> Tensor:
        return self.down(self.sep(self.conv(x)))


class M(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv_in = ConvNormLReLU(256, 256, 3, "m/Conv", "m/InstanceNorm")
        self.res = nn.Sequential(*[InvertedResBlock(f"m/r{i}") for i in range(1, 9)])
        self.conv_out = ConvNormLReLU(256, 256, 3, "m/Conv_1", "m/InstanceNorm_1")

    def forward(self, x: Tensor) -> Tensor:
        return self.conv_out(self.res(self.conv_in(x)))


class U2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.sep1 = SeparableConv(256, 128, "u2/SeparableConv2d")
        self.sep2 = SeparableConv(128, 128, "u2/SeparableConv2d_1")
        self.conv = ConvNormLReLU(128, 128, 3, "u2/Conv", "u2/InstanceNorm")

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(self.sep2(self.sep1(_up2(x))))


class U1(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.sep = SeparableConv(128, 128, "u1/SeparableConv2d")
        self.conv1 = ConvNormLReLU(128, 64, 3, "u1/Conv", "u1/InstanceNorm")
        self.conv2 = ConvNormLReLU(64, 64, 3, "u1/Conv_1", "u1/InstanceNorm_1")

    def forward(self, x: Tensor) -> Tensor:
        return self.conv2(self.conv1(self.sep(_up2(x))))


class AnimeGANv1Generator(nn.Module):
    """``forward(x: [N,3,H,W] in [-1,1]) -> [N,3,H,W] in [-1,1]``, any H and W."""

    size_multiple = SIZE_MULTIPLE

    def __init__(self) -> None:
        super().__init__()
        self.b1 = B1()
        self.b2 = B2()
        self.m = M()
        self.u2 = U2()
        self.u1 = U1()
        self.out = nn.Conv2d(64, 3, 1, bias=False)
        self.out.tf_names = {"weight": ("Conv/weights", "conv")}  # type: ignore[assignment]

    def forward(self, x: Tensor) -> Tensor:
        h, w = x.shape[-2:]
        x = pad_to_multiple(x, SIZE_MULTIPLE, min_cells=2)  # at least 8: the 1/4-scale maps reflect one pixel
        y = torch.tanh(self.out(self.u1(self.u2(self.m(self.b2(self.b1(x)))))))
        return y[..., :h, :w]

    # ------------------------------------------------------------------------------------------ import

    def tf_mapping(self) -> dict[str, tuple[str, str]]:
        """state-dict key -> (TF constant name, layout kind)."""
        mapping: dict[str, tuple[str, str]] = {}
        for prefix, module in self.named_modules():
            for local, (tf_name, kind) in getattr(module, "tf_names", {}).items():
                mapping[f"{prefix}.{local}" if prefix else local] = (TF_PREFIX + tf_name, kind)
        return mapping

    @classmethod
    def from_graph(cls, graph: Any) -> AnimeGANv1Generator:
        """Build from an imported AnimeGAN v1 graph (``anipaint.networks.ir.Graph``)."""
        net = cls()
        consts = graph.consts
        state: dict[str, Tensor] = {}
        used: set[str] = set()
        for key, (tf_name, kind) in net.tf_mapping().items():
            if tf_name not in consts:
                raise KeyError(f"AnimeGAN v1 graph lacks constant {tf_name}")
            value = torch.from_numpy(consts[tf_name].copy()).float()
            if kind == "conv":  # HWIO -> OIHW
                value = value.permute(3, 2, 0, 1)
            elif kind == "depthwise":  # H,W,C,1 -> C,1,H,W
                value = value.permute(2, 3, 0, 1)
            state[key] = value.contiguous()
            used.add(tf_name)
        for module in net.modules():  # the epsilons are fixed in code; make sure the file agrees
            if isinstance(module, InstanceNorm):
                eps_name = TF_PREFIX + module.tf_eps
                if eps_name in consts:
                    if abs(float(consts[eps_name]) - module.eps) > 1e-3 * module.eps:
                        raise ValueError(f"{eps_name} = {float(consts[eps_name])}, expected {module.eps}")
                    used.add(eps_name)
        unused = [k for k, v in consts.items() if v.dtype.kind == "f" and k not in used]
        if unused:
            raise ValueError(f"float constants not mapped onto the network: {unused[:5]}")
        net.load_state_dict(state, strict=True)
        return net.eval()

Generator = AnimeGANv1Generator  # the name the engine and the v2 module share
