"""What every bench table shares: the row, the pipeline under test, paired timing, CPU and peak-RSS probes.

Each row is timed end to end on a photo (JPEG decode → resize → style → PNG encode) in turns with its
yardstick in the same process, so drifting load from other processes hits both alike
(:mod:`anipaint.engine.runtime.timing`); "noise" is the share of the cores other processes used meanwhile.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from anipaint.engine.runtime import timing


@dataclasses.dataclass
class Row:
    name: str
    seconds: float
    ratio: float | None = None
    cpu: float | None = None  # % of one core
    rss_mb: float | None = None
    psnr: float | None = None
    noise: float | None = None  # share of the cores other processes used
    note: str = ""


# ---- measuring ------------------------------------------------------------------------------------------


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark for this process (Linux ≥ 4.0), so a row's own peak can be read."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """This process's peak RSS. VmHWM, not ru_maxrss: Linux carries ru_maxrss over ``execve``, so a child
    started by a big parent would report the parent's peak."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def one_call_profile(fn: Callable[[], object]) -> tuple[float, float | None]:
    """CPU % and peak RSS (MB) of one call."""
    reset = reset_peak_rss()
    c0, t0 = cpu_seconds(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    return 100.0 * (cpu_seconds() - c0) / wall, (peak_rss_mb() if reset else None)


def paired(reference: Callable[[], object], candidate: Callable[[], object], rounds: int) -> tuple:
    """Time reference and candidate in turns; (ref Timing, candidate Timing)."""
    got = timing.alternate({"ref": reference, "cand": candidate}, rounds=rounds)
    return got["ref"], got["cand"]


# ---- the pipeline under test ----------------------------------------------------------------------------


def pipeline(photo: bytes, paint: Callable[[np.ndarray], np.ndarray], side: int = 512) -> Callable[[], np.ndarray]:
    """decode → cap the long side → paint → PNG encode; returns the painted array (for PSNR)."""
    from anipaint import imaging, postprocess, preprocess

    def run() -> np.ndarray:
        img = imaging.load_image(photo)
        work = preprocess.to_work_image(img, side)
        painted = paint(work.rgb)
        imaging.encode_png(postprocess.finish(painted, work.alpha))
        return painted

    return run


def tensor_painter(fn: Callable[[torch.Tensor], torch.Tensor], channels_last: bool = False):
    from anipaint.engine.tensors import from_tensor, to_tensor

    def paint(rgb: np.ndarray) -> np.ndarray:
        x = to_tensor(rgb)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            return from_tensor(fn(x))

    return paint


def photo_bytes(settings) -> bytes:
    path = Path(settings.sources).parent / "samples" / "group_pakutaso.jpg"
    if path.is_file():
        return path.read_bytes()
    from PIL import Image

    from anipaint.engine.compile.int8 import synthetic_photo
    from anipaint.engine.tensors import from_tensor

    buf = io.BytesIO()
    Image.fromarray(from_tensor(synthetic_photo(900))).save(buf, format="JPEG", quality=92)
    return buf.getvalue()


# ---- child processes (isolated peak RSS) ----------------------------------------------------------------


def run_child(*argv: str, timeout: float = 600) -> dict:
    out = subprocess.run([sys.executable, "-m", "anipaint.cli.bench", "child", *argv], capture_output=True, text=True,
                         timeout=timeout, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"bench child {argv[0]} failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- output ---------------------------------------------------------------------------------------------


def machine() -> dict:
    info = {"python": platform.python_version(), "torch": torch.__version__, "cores": os.cpu_count()}
    try:
        import onnxruntime as ort

        info["onnxruntime"] = ort.__version__
    except ImportError:
        pass
    try:
        with open("/proc/cpuinfo") as fh:
            info["cpu"] = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        info["cpu"] = platform.processor()
    from anipaint.engine.runtime.cpu import cpu_flags

    info["flags"] = list(cpu_flags())
    info["threads"] = torch.get_num_threads()
    return info


def fmt(rows: list[Row]) -> str:
    head = f"{'step':<52} {'s/img':>7} {'ratio':>6} {'CPU%':>5} {'RSS MB':>7} {'PSNR':>6} {'noise':>5}  note"
    lines = [head, "-" * len(head)]
    for r in rows:
        def f(v, spec):
            return format(v, spec) if v is not None else "—"

        lines.append(f"{r.name:<52} {f(r.seconds, '7.3f')} {f(r.ratio, '6.2f')} {f(r.cpu, '5.0f')} "
                     f"{f(r.rss_mb, '7.0f')} {f(r.psnr, '6.1f')} {f(r.noise, '5.0%')}  {r.note}")
    return "\n".join(lines)


