"""Run an ONNX generator (AnimeGANv3 tiny Cute) with ONNX Runtime behind a torch-module-like call.

``OnnxGenerator(path)(x)`` takes and returns NCHW tensors in [-1, 1], like the torch generators; the
layout change to the model's NHWC happens here, once per call. The session is created once (CPU provider,
intra-op threads as given, inter-op 1 so concurrent jobs don't oversubscribe the cores). Any input size: the
image is reflect-padded at the bottom/right to the model's stride multiple (16 for Cute: four stride-2 convs;
other sizes make its skip additions fail; tiny images to two multiples) and the output cropped back. A model
with a fixed batch of 1 is run image by image.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import Tensor

from anipaint.networks.padding import pad_to_multiple


def session_options(threads: int = 0, spinning: bool = True) -> ort.SessionOptions:
    """How every ONNX Runtime session here runs: ``threads`` intra-op (0: ORT picks), inter-op 1 and sequential
    execution (concurrent jobs must not oversubscribe the cores), all graph optimisations, denormals as zero.
    ``spinning=False`` lets idle threads sleep instead of stealing the core from another job's threads."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = int(threads) if threads else 0
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.set_denormal_as_zero", "1")
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    return opts


class OnnxGenerator:
    def __init__(self, path: Path | str, threads: int | None = None, size_multiple: int | None = None) -> None:
        self.path = Path(path)
        opts = session_options(threads or 0)
        self.session = ort.InferenceSession(str(self.path), opts, providers=["CPUExecutionProvider"])
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        self.output_name = self.session.get_outputs()[0].name
        shape = list(inp.shape)
        self.nhwc = len(shape) == 4 and shape[-1] == 3  # tf2onnx exports keep TF's NHWC
        self.fixed_batch = isinstance(shape[0], int) and shape[0] > 0
        if not size_multiple:
            size_multiple = model_size_multiple(onnx.load(str(self.path), load_external_data=False))
        self.size_multiple = int(size_multiple)

    def eval(self) -> OnnxGenerator:  # parity with torch modules
        return self

    def __call__(self, x: Tensor) -> Tensor:
        return self.forward(x)

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4 or x.shape[1] != 3:
            raise ValueError(f"expected [N,3,H,W], got {tuple(x.shape)}")
        h, w = x.shape[-2:]
        xp = pad_to_multiple(x.detach().float().cpu(), self.size_multiple, min_cells=2)
        arr = xp.permute(0, 2, 3, 1).numpy() if self.nhwc else xp.numpy()
        batches = [arr[i : i + 1] for i in range(arr.shape[0])] if self.fixed_batch else [arr]
        outs = [self.session.run([self.output_name], {self.input_name: np.ascontiguousarray(b)})[0]
                for b in batches]
        y = torch.from_numpy(np.concatenate(outs, axis=0))
        if self.nhwc:
            y = y.permute(0, 3, 1, 2)
        return y[..., :h, :w].contiguous().to(device=x.device, dtype=x.dtype)


def model_size_multiple(model: onnx.ModelProto) -> int:
    """Largest product of Conv strides on any path from the inputs: the spatial alignment the model needs
    (its skip additions fail unless every stride-2 level divides evenly; 16 for the tiny Cute model)."""
    factor: dict[str, int] = {}
    best = 1
    for node in model.graph.node:  # ONNX requires topological order
        f = max((factor.get(i, 1) for i in node.input if i), default=1)
        if node.op_type == "Conv":
            for attr in node.attribute:
                if attr.name == "strides":
                    f *= max(attr.ints)
        for out in node.output:
            factor[out] = f
        best = max(best, f)
    return best
