"""The form of an imported graph that Inductor compiles (graph_program.for_network(..., compiled=True)): its
upsamplings interleaved in channels-last order, its per-channel statistics reduced by rows first, its tanh
as a logistic and its narrow wide convolutions run by columns. All are rewrites for speed, so all must give
the eager network's picture, at any size a package runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from anipaint.engine import load_network
from anipaint.engine.compile import column_convs, graph_program, precision
from anipaint.engine.tensors import to_tensor
from anipaint.models import store
from anipaint.models.registry import get_style
from anipaint.networks import graph_exec
from anipaint.networks.graph_exec import Val
from anipaint.networks.graph_ops import resize_bilinear
from anipaint.networks.ir import Node
from anipaint.settings import reload_settings


@pytest.mark.parametrize("h,w", [(1, 1), (3, 5), (17, 9), (64, 48)])
def test_a_channels_last_upsampling_is_tf1s_exactly_and_stays_channels_last(h, w) -> None:
    x = torch.randn(2, 7, h, w).contiguous(memory_format=torch.channels_last)
    got = resize_bilinear(x, (2 * h, 2 * w), channels_last=True)
    want = resize_bilinear(x, (2 * h, 2 * w))  # TF1's asymmetric rule, one axis then the other
    assert torch.equal(got, want)  # the same float operations in the same order: bit for bit
    # the layout is the point: Inductor keeps a channels-last result in channels-last loops
    assert got.is_contiguous(memory_format=torch.channels_last)


def test_an_upsampling_stored_in_bfloat16_is_rounded_once() -> None:
    x = torch.randn(1, 16, 9, 7).contiguous(memory_format=torch.channels_last)
    got = resize_bilinear(x, (18, 14), channels_last=True, stored_dtype=torch.bfloat16)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, resize_bilinear(x, (18, 14)).to(torch.bfloat16))


@pytest.mark.parametrize("h,w", [(2, 2), (3, 5), (17, 9)])
def test_an_upsampling_and_its_reflect_pad_as_one_loop_give_the_same_picture(h, w) -> None:
    from anipaint.engine.compile.padded_upsample import padded_double
    from anipaint.networks.graph_ops import mirror_pad

    x = torch.randn(1, 5, h, w).contiguous(memory_format=torch.channels_last)
    want = mirror_pad(resize_bilinear(x, (2 * h, 2 * w)), [(0, 0), (0, 0), (1, 1), (1, 1)], "REFLECT")
    got = padded_double(x)
    assert got.shape == want.shape
    # the pad's first row and column average the same two values the other way round: float rounding only
    assert (got - want).abs().max().item() < 1e-6
    assert torch.equal(got[..., 1:, 1:], want[..., 1:, 1:])
    assert torch.equal(padded_double(x, torch.bfloat16)[..., 1:, 1:], want[..., 1:, 1:].to(torch.bfloat16))


def test_only_values_that_bf16_convolutions_alone_read_are_stored_in_bf16() -> None:
    from anipaint.networks.ir import Graph

    def node(name, op, *inputs):
        return Node(name=name, op=op, inputs=list(inputs), attrs={})

    nodes = [node("x", "Placeholder"), node("up", "ResizeBilinear", "x"), node("pad", "MirrorPad", "up"),
             node("conv", "Conv2D", "pad", "w"), node("up2", "ResizeBilinear", "conv"),
             node("conv2", "Conv2D", "up2", "w"), node("add", "AddV2", "up2", "conv2"),  # up2 read twice
             node("up3", "ResizeBilinear", "add"), node("conv3", "Conv2D", "up3", "w")]  # an fp32 conv
    graph = Graph(nodes=nodes, inputs=["x"], outputs=["conv3"], consts={})
    stored = precision.read_by_bf16_convs_only(graph, {"conv", "conv2"})
    assert stored == {"up", "pad"}  # x is read by an upsampling, up2 by an add too, up3 by an fp32 conv


def test_the_compiled_forms_tanh_and_statistics_are_the_eager_ones() -> None:
    ctx = graph_exec.Context(graph=None, shapes=None, record=None, memo={}, at_reference=True,
                             rewrites=frozenset(graph_program.REWRITES))
    t = torch.linspace(-20, 20, 100_001)
    tanh = graph_exec.OPS["Tanh"](ctx, Node(name="t", op="Tanh", inputs=[], attrs={}), [Val(t, False)]).t
    assert (tanh - torch.tanh(t)).abs().max().item() < 1e-6
    x = torch.randn(1, 32, 37, 53).contiguous(memory_format=torch.channels_last) * 3 + 5
    axes = Val(torch.tensor([1, 2]), False)
    for op, want in (("Mean", x.mean(dim=(2, 3), keepdim=True)), ("Sum", x.sum(dim=(2, 3), keepdim=True))):
        node = Node(name="m", op=op, inputs=[], attrs={"keep_dims": True})
        got = graph_exec.OPS[op](ctx, node, [Val(x, True), axes]).t
        assert got.shape == want.shape
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-5), op


def _node(strides=(1, 1, 1, 1), dilations=(1, 1, 1, 1), op="Conv2D") -> Node:
    return Node(name="c", op=op, inputs=[], attrs={"strides": list(strides), "dilations": list(dilations)})


def test_only_narrow_wide_stride_1_convolutions_run_by_columns() -> None:
    weight = lambda out, cin, k: torch.zeros(out, cin, k, k)  # noqa: E731
    assert column_convs.by_columns_pays(_node(), weight(3, 32, 7))  # a generator's last layer: 2 blocks, not 7
    assert column_convs.by_columns_pays(_node(), weight(3, 32, 3))
    assert not column_convs.by_columns_pays(_node(), weight(32, 32, 3))  # 6 blocks either way
    assert not column_convs.by_columns_pays(_node(), weight(3, 32, 1))
    assert not column_convs.by_columns_pays(_node(strides=(1, 2, 2, 1)), weight(3, 32, 7))
    assert not column_convs.by_columns_pays(_node(dilations=(1, 2, 2, 1)), weight(3, 32, 7))
    assert not column_convs.by_columns_pays(_node(op="DepthwiseConv2dNative"), weight(3, 1, 7))


def test_a_column_weight_puts_column_j_of_output_o_at_channel_o_times_kw_plus_j() -> None:
    w = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    columns = column_convs.column_weight(w)
    assert columns.shape == (10, 3, 4, 1)
    for o in range(2):
        for j in range(5):
            assert torch.equal(columns[o * 5 + j, :, :, 0], w[o, :, :, j])


@pytest.mark.parametrize("style_id", ["v3-hayao", "v3-cute"])
def test_the_compiled_form_paints_what_the_eager_network_paints(style_id, prepared_store, group_photo) -> None:
    """float32 convolutions, so any difference is the rewrites' own, at sizes that are not square and not
    powers of two (odd sizes at the deep levels, where the upsampling's clamped edge matters)."""
    style = get_style(style_id)
    network = load_network(style, store.artefact_path(style, reload_settings()))
    module, multiple = graph_program.for_network(network, compiled=True)
    plain, _ = graph_program.for_network(network)
    assert module._columns, "the last 7×7 layer to three channels runs by columns"
    assert not plain._columns, "the ONNX export keeps the graph's own convolutions"
    assert module._padded and not plain._padded, "the upsamplings and their pads run as one loop when compiled"
    # the bench's steps build with a prefix of the rewrites: without "columns" the convolution stays whole
    first, _ = graph_program.for_network(network, rewrites=graph_program.REWRITES[:1])
    assert not first._columns and first.rewrites == {"quad_upsample"}
    with pytest.raises(ValueError, match="unknown rewrites"):
        graph_program.for_network(network, rewrites=["faster"])
    rgb = np.asarray(group_photo.convert("RGB"))
    # with bf16 convolutions, upsamplings stored in bf16 change no value: the convolutions round them anyway
    fast, _ = graph_program.for_network(network, torch.bfloat16, compiled=True)
    assert fast._stored_bf16
    x = to_tensor(np.ascontiguousarray(rgb[:4 * multiple * 5, :5 * multiple * 3]))
    with torch.inference_mode():
        stored = fast(x)
        fast._stored_bf16 = frozenset()
        assert torch.equal(stored, fast(x))
    for h, w in [(5 * multiple * 8, 7 * multiple * 5), (3 * multiple * 13, 3 * multiple * 11)]:
        x = to_tensor(np.ascontiguousarray(rgb[:h, :w]))
        with torch.inference_mode():
            want, got = network(x), module(x)
        assert got.shape == want.shape
        assert (got - want).abs().max().item() < 1e-4, (style_id, h, w)
