"""``anipaint bench``: the speed table, measured on this machine.

One row per optimisation step, from the naive service (model loaded per request, default threads) to the
engine as served, each timed end to end on a 512 px photo: JPEG decode → resize → style → PNG encode. The
yardstick is the reference network written as plain eager fp32 calls (``animeganv2.reference_forward``); each
row is timed in turns with it in the same process (ref, row, ref, row, …) and its ratio is the quotient of
the two medians. Columns: median seconds per picture, ratio (reference ÷ row, so 3.0 = three times faster),
CPU % (100 = one core), peak RSS of one call (MB; the naive and 4096 px rows run in a child process and report
its whole peak), PSNR of the row's picture against the reference's. "noise" is the share of the cores other
processes used meanwhile; samples taken while the machine was busy are retried (:mod:`anipaint.engine.timing`).

Then: 256/512/1024 px with the served backend, 4096 px in tiles, the time face enhancement adds to the group
photo, and the v3 and v1 styles. ``--json PATH`` also writes everything as JSON, ``--profile`` a cProfile and
an operator profile of one 512 px paint, ``--quick`` fewer repeats. Child mode: ``python -m anipaint.bench
child naive|large ...`` (used by the table itself).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from anipaint.engine import timing
from anipaint.settings import Settings, get_settings

STYLE = "v2-hayao"
EXTRA_STYLES = ("v3-hayao", "v3-shinkai", "v3-cute", "v1-hayao")


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


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark for this process (Linux ≥ 4.0), so a row's own peak can be read."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _peak_rss_mb() -> float:
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


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _one_call_profile(fn: Callable[[], object]) -> tuple[float, float | None]:
    """CPU % and peak RSS (MB) of one call."""
    reset = _reset_peak_rss()
    c0, t0 = _cpu(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    return 100.0 * (_cpu() - c0) / wall, (_peak_rss_mb() if reset else None)


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
        work = preprocess.prepare(img, side)
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


def _photo_bytes(settings) -> bytes:
    path = Path(settings.sources).parent / "samples" / "group_pakutaso.jpg"
    if path.is_file():
        return path.read_bytes()
    from PIL import Image

    from anipaint.engine.int8 import synthetic_photo
    from anipaint.engine.tensors import from_tensor

    buf = io.BytesIO()
    Image.fromarray(from_tensor(synthetic_photo(900))).save(buf, format="JPEG", quality=92)
    return buf.getvalue()


# ---- child processes (isolated peak RSS) ----------------------------------------------------------------


def _child(argv: list[str]) -> int:
    """``naive <photo> <artefact> <n> <out.npy>`` or ``large <photo> <side> <exact|tiles>``; prints one JSON line."""
    kind = argv[0]
    if kind == "naive":
        photo, artefact, n, out = Path(argv[1]).read_bytes(), argv[2], int(argv[3]), argv[4]
        from anipaint.networks.animeganv2 import Generator

        def request() -> np.ndarray:  # what the seed's service did: load the model for every picture
            net = Generator()
            net.load_state_dict(torch.load(artefact, map_location="cpu", weights_only=True))
            return pipeline(photo, tensor_painter(net.eval()))()

        times, painted = [], None
        c0 = _cpu()
        for _ in range(n):
            t0 = time.perf_counter()
            painted = request()
            times.append(time.perf_counter() - t0)
        np.save(out, painted)
        cpu = 100.0 * (_cpu() - c0) / sum(times)
        print(json.dumps({"times": times, "cpu": cpu, "rss_mb": _peak_rss_mb()}))
        return 0
    if kind == "large":
        import dataclasses

        from PIL import Image

        from anipaint.painter import get_painter
        from anipaint.settings import get_settings

        side = int(argv[2])
        painter = get_painter(STYLE, dataclasses.replace(get_settings(), large_mode=argv[3])).warm()
        big = np.asarray(Image.open(argv[1]).convert("RGB").resize((side, side), Image.Resampling.BICUBIC))
        c0, t0 = _cpu(), time.perf_counter()
        painter.paint_array(big)
        wall = time.perf_counter() - t0
        print(json.dumps({"times": [wall], "cpu": 100.0 * (_cpu() - c0) / wall, "backend": painter.engine.backend_name,
                          "rss_mb": _peak_rss_mb()}))
        return 0
    print(f"unknown child {kind!r}", file=sys.stderr)
    return 2


def _run_child(*argv: str, timeout: float = 600) -> dict:
    out = subprocess.run([sys.executable, "-m", "anipaint.bench", "child", *argv], capture_output=True, text=True,
                         timeout=timeout, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"bench child {argv[0]} failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- the table ------------------------------------------------------------------------------------------


def _machine() -> dict:
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
    from anipaint.engine.cpu import cpu_flags

    info["flags"] = list(cpu_flags())
    info["threads"] = torch.get_num_threads()
    return info


def _fmt(rows: list[Row]) -> str:
    head = f"{'step':<52} {'s/img':>7} {'ratio':>6} {'CPU%':>5} {'RSS MB':>7} {'PSNR':>6} {'noise':>5}  note"
    lines = [head, "-" * len(head)]
    for r in rows:
        def f(v, spec):
            return format(v, spec) if v is not None else "—"

        lines.append(f"{r.name:<52} {f(r.seconds, '7.3f')} {f(r.ratio, '6.2f')} {f(r.cpu, '5.0f')} "
                     f"{f(r.rss_mb, '7.0f')} {f(r.psnr, '6.1f')} {f(r.noise, '5.0%')}  {r.note}")
    return "\n".join(lines)


def main(args, settings: Settings | None = None) -> int:
    """Run the table; ``settings`` as the CLI resolved them (default: from the environment)."""
    from PIL import Image

    from anipaint import store
    from anipaint.engine import Engine, backends, load_network, prepare, threads
    from anipaint.engine.graphs import V2Graph
    from anipaint.networks.animeganv2 import ReferenceV2
    from anipaint.quality import psnr
    from anipaint.registry import get_style

    quick = bool(getattr(args, "quick", False))
    rounds = 2 if quick else 3
    settings = settings or get_settings()
    threads.configure(settings.jobs, settings.threads)
    env = {**os.environ, "ANIPAINT_HOME": str(settings.home), "ANIPAINT_SOURCES": str(settings.sources)}
    os.environ.update(env)  # children and get_painter() see the same store
    started = time.perf_counter()
    style = get_style(STYLE)
    artefact = store.ensure_prepared(style, settings)
    print(f"building/measuring backends for {STYLE} (once per machine) …", file=sys.stderr, flush=True)
    auto = prepare(style, artefact, settings, "auto")
    photo = _photo_bytes(settings)
    photo_file = Path(tempfile.mkdtemp(prefix="anipaint-bench-")) / "photo.jpg"
    photo_file.write_bytes(photo)
    sd = torch.load(artefact, map_location="cpu", weights_only=True)
    reference = pipeline(photo, tensor_painter(ReferenceV2(sd)))
    want = reference()
    rows: list[Row] = []
    ref_times: list[float] = []

    def add(name: str, paint, note: str = "", pic=None) -> Row:
        run = pipeline(photo, paint)
        got = run()  # warm-up, and the picture for PSNR
        t_ref, t = paired(reference, run, rounds)
        ref_times.append(t_ref.seconds)  # each pairing's clean median
        cpu, rss = _one_call_profile(run)
        row = Row(name, t.seconds, t_ref.seconds / t.seconds, cpu, rss, psnr(got, want), t.foreign, note)
        rows.append(row)
        print(_fmt([row]).splitlines()[-1], file=sys.stderr, flush=True)
        return row

    # 1. the naive service, in a child process (its own memory and its own default thread setup)
    naive_npy = photo_file.with_suffix(".npy")
    t_before = timing.measure(reference, repeats=rounds)
    child = _run_child("naive", str(photo_file), str(artefact), str(rounds), str(naive_npy), timeout=900)
    t_after = timing.measure(reference, repeats=rounds)
    ref_naive = statistics.median([t_before.seconds, t_after.seconds])
    naive_s = statistics.median(child["times"])
    rows.append(Row("naive: model loaded per request, NCHW module", naive_s, ref_naive / naive_s, child["cpu"],
                    child["rss_mb"], psnr(np.load(naive_npy), want), None, "child process"))

    # 2. the reference itself and each step
    ref_row = Row("reference: plain eager fp32 calls (yardstick)", 0.0, 1.0, None, None, float("inf"), None)
    rows.append(ref_row)
    module = load_network(style, artefact)
    torch.set_flush_denormal(False)
    add("module loaded once, eager fp32 NCHW, denormals on", tensor_painter(module))
    torch.set_flush_denormal(True)
    add("+ thread policy, denormals flushed", tensor_painter(module), f"{torch.get_num_threads()} threads")
    add("+ channels-last memory (eager fp32)", tensor_painter(V2Graph(sd, torch.float32).eval(), True))
    add("+ bf16 convs (eager, AVX512_BF16)", tensor_painter(V2Graph(sd, torch.bfloat16).eval(), True))
    key = backends.engine_key(artefact)
    for name, label in (("onnxruntime", "ONNX Runtime fp32, all graph optimisations"),
                        ("compiled", "AOTInductor bf16 channels-last, fused norms"),
                        ("int8", "AOTInductor + int8 VNNI on the 5 heavy convs")):
        try:
            b = backends.open_named(name, style, artefact, settings, module, key)
        except Exception as exc:  # noqa: BLE001 - a backend this machine can't build is a row with a note
            rows.append(Row(label, float("nan"), note=f"unavailable: {exc}"))
            continue
        add(label, tensor_painter(b))
    engine = Engine(style, artefact, settings, backend="auto")
    served = add(f"engine as served (auto → {engine.backend_name})", engine.run, "Engine.run")
    ref_row.seconds = statistics.median(ref_times)
    ref_row.cpu, ref_row.rss_mb = _one_call_profile(reference)

    # 3. sizes, with the served engine against the reference at the same size
    long_side = max(Image.open(io.BytesIO(photo)).size)
    for side in (256, 512, 1024):
        src = photo
        if side > long_side:  # the pipeline never upscales: give it a photo that big
            buf = io.BytesIO()
            Image.open(io.BytesIO(photo)).convert("RGB").resize((side, side), Image.Resampling.LANCZOS).save(
                buf, format="JPEG", quality=95)
            src = buf.getvalue()
        ref_s = pipeline(src, tensor_painter(ReferenceV2(sd)), side)
        run = pipeline(src, engine.run, side)
        got = run()
        t_ref, t = paired(ref_s, run, 1 if side == 1024 and quick else 2)
        cpu, rss = _one_call_profile(run)
        note = "photo upscaled" if side > long_side else ""
        rows.append(Row(f"{side} px, served engine", t.seconds, t_ref.seconds / t.seconds, cpu, rss,
                        psnr(got, ref_s()), t.foreign, note))

    # 4. 4096 px at full resolution, in child processes for their peak RSS: exact (layer by layer, the
    # default) and independent tiles (faster, but each tile normalises with its own statistics)
    mp = 4096 * 4096 / 1e6
    per_mp_512 = served.seconds / (512 * 512 / 1e6)
    for mode, label in (("exact", "exact, layer-streamed"),
                        ("tiles", f"tiles {settings.tile_size}/{settings.tile_overlap}")):
        child = _run_child("large", str(photo_file), "4096", mode, timeout=900)
        backend = "strips" if mode == "exact" else child["backend"]
        rows.append(Row(f"4096 px {label} ({backend})", child["times"][0], None, child["cpu"], child["rss_mb"],
                        None, None, f"{child['times'][0] / mp:.2f} s/MP vs {per_mp_512:.2f} at 512 px; child process"))

    # 5. face enhancement: the group photo with and without
    from anipaint.painter import get_painter

    painter = get_painter(STYLE, settings).warm()
    if store.prepare_face_detector(settings) is not None:
        painter.paint(photo, faces=True)
        with_f, without = paired(lambda: painter.paint(photo, faces=True), lambda: painter.paint(photo, faces=False),
                                 rounds)
        note = f"{with_f.seconds:.2f} s with, {without.seconds:.2f} without"
        rows.append(Row("faces: time added per picture (group photo)", with_f.seconds - without.seconds,
                        noise=with_f.foreign, note=note))

    # 6. other styles, end to end at 512 px with their own backends
    for style_id in EXTRA_STYLES:
        other = get_style(style_id)
        if store.prepare([style_id], settings).get(style_id) != "ok":
            rows.append(Row(f"{style_id}", float("nan"), note="not available here"))
            continue
        p = get_painter(style_id, settings).warm()
        p.paint(photo, faces=False)
        t = timing.measure(lambda p=p: p.paint(photo, faces=False), repeats=rounds)
        cpu, rss = _one_call_profile(lambda p=p: p.paint(photo, faces=False))
        rows.append(Row(f"{style_id} ({other.architecture}, {p.engine.backend_name})", t.seconds,
                        ref_row.seconds / t.seconds, cpu, rss, None, t.foreign, "ratio: v2 reference ÷ this"))

    print(_fmt(rows))
    machine = _machine()
    print(f"\n{machine['cpu']}, {machine['cores']} cores, torch {machine['torch']}, "
          f"onnxruntime {machine.get('onnxruntime')}; flags {' '.join(machine['flags'])}; "
          f"{time.perf_counter() - started:.0f} s")
    if getattr(args, "json_path", None):
        Path(args.json_path).write_text(json.dumps(
            {"machine": machine, "auto": auto, "rows": [dataclasses.asdict(r) for r in rows]}, indent=2, default=str))
    if getattr(args, "profile", False):
        _profile(painter, photo, Path(args.json_path).with_suffix("") if getattr(args, "json_path", None) else None)
    return 0


def _profile(painter, photo: bytes, stem: Path | None) -> None:
    """cProfile (.prof) and a torch operator table (.txt) of one 512 px paint."""
    import cProfile
    import pstats

    stem = stem or Path("anipaint-bench")
    prof = stem.parent / f"{stem.name}-profile.prof"
    cProfile.runctx("painter.paint(photo, faces=False)", globals(), {"painter": painter, "photo": photo},
                    str(prof))
    out = io.StringIO()
    pstats.Stats(str(prof), stream=out).sort_stats("cumulative").print_stats(25)
    with torch.profiler.profile() as tp:
        painter.paint(photo, faces=False)
    table = tp.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
    text = stem.parent / f"{stem.name}-profile.txt"
    stages = ", ".join(f"{k} {v:.3f} s" for k, v in painter.last_timings.items())
    text.write_text(f"backend: {painter.engine.backend_name}; {stages}\n(a compiled backend's fused loops run inside "
                    f"its .so and are not in the operator table: the paint time minus the table's total is "
                    f"theirs)\n\n{table}\n\n{out.getvalue()}")
    print(f"profile written to {prof} and {text}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        sys.exit(_child(sys.argv[2:]))
    import argparse

    parser = argparse.ArgumentParser(prog="python -m anipaint.bench")
    parser.add_argument("--json", dest="json_path")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--quick", action="store_true")
    sys.exit(main(parser.parse_args()))
