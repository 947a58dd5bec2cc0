"""The AnimeGANv2 Hayao table: one row per optimisation step, from the naive service to the engine as served.

The yardstick is the reference network written as plain eager fp32 calls (``animeganv2.reference_forward``);
each row is timed in turns with it (ref, row, ref, row, …) and its ratio is the quotient of the two medians
(reference ÷ row, so 3.0 = three times faster). Then 256/512/1024 px with the served backend, 4096 px exact and
in tiles (child processes, for their own peak RSS) and the time face enhancement adds to the group photo.
Child mode: ``python -m anipaint.cli.bench child naive|large ...``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from anipaint.cli.bench.measure import (
    Row,
    cpu_seconds,
    fmt,
    one_call_profile,
    paired,
    peak_rss_mb,
    pipeline,
    run_child,
    tensor_painter,
)
from anipaint.engine.runtime import timing

STYLE = "v2-hayao"


def child(argv: list[str]) -> int:
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
        c0 = cpu_seconds()
        for _ in range(n):
            t0 = time.perf_counter()
            painted = request()
            times.append(time.perf_counter() - t0)
        np.save(out, painted)
        cpu = 100.0 * (cpu_seconds() - c0) / sum(times)
        print(json.dumps({"times": times, "cpu": cpu, "rss_mb": peak_rss_mb()}))
        return 0
    if kind == "large":
        from PIL import Image

        from anipaint.painter import get_painter
        from anipaint.settings import get_settings

        side = int(argv[2])
        painter = get_painter(STYLE, dataclasses.replace(get_settings(), large_mode=argv[3])).warm()
        big = np.asarray(Image.open(argv[1]).convert("RGB").resize((side, side), Image.Resampling.BICUBIC))
        c0, t0 = cpu_seconds(), time.perf_counter()
        painter.paint_array(big)
        wall = time.perf_counter() - t0
        print(json.dumps({"times": [wall], "cpu": 100.0 * (cpu_seconds() - c0) / wall,
                          "backend": painter.engine.backend_name, "rss_mb": peak_rss_mb()}))
        return 0
    print(f"unknown child {kind!r}", file=sys.stderr)
    return 2


def v2_rows(settings, photo: bytes, rounds: int, quick: bool) -> tuple[list[Row], dict, object]:
    """The v2 table's rows, the auto record and the served painter (for the profile)."""
    from PIL import Image

    from anipaint.engine import Engine, backends, build_backends, builds, load_network
    from anipaint.engine.compile.v2_graph import V2Graph
    from anipaint.models import store
    from anipaint.models.registry import get_style
    from anipaint.networks.animeganv2 import ReferenceV2
    from anipaint.quality import psnr

    style = get_style(STYLE)
    artefact = store.ensure_converted(style, settings)
    print(f"building/measuring backends for {STYLE} (once per machine) …", file=sys.stderr, flush=True)
    auto = build_backends(style, artefact, settings, "auto")
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
        cpu, rss = one_call_profile(run)
        row = Row(name, t.seconds, t_ref.seconds / t.seconds, cpu, rss, psnr(got, want), t.foreign, note)
        rows.append(row)
        print(fmt([row]).splitlines()[-1], file=sys.stderr, flush=True)
        return row

    # 1. the naive service, in a child process (its own memory and its own default thread setup)
    naive_npy = photo_file.with_suffix(".npy")
    t_before = timing.measure(reference, repeats=rounds)
    child = run_child("naive", str(photo_file), str(artefact), str(rounds), str(naive_npy), timeout=900)
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
    key = builds.engine_key(artefact)
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
    ref_row.cpu, ref_row.rss_mb = one_call_profile(reference)

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
        cpu, rss = one_call_profile(run)
        note = "photo upscaled" if side > long_side else ""
        rows.append(Row(f"{side} px, served engine", t.seconds, t_ref.seconds / t.seconds, cpu, rss,
                        psnr(got, ref_s()), t.foreign, note))

    # 4. 4096 px at full resolution, in child processes for their peak RSS: strips (layer by layer, the
    # default) and independent tiles (faster, but each tile normalises with its own statistics)
    mp = 4096 * 4096 / 1e6
    per_mp_512 = served.seconds / (512 * 512 / 1e6)
    for mode, label in (("strips", "strips, layer by layer"),
                        ("tiles", f"tiles {settings.tile_size}/{settings.tile_overlap}")):
        child = run_child("large", str(photo_file), "4096", mode, timeout=900)
        backend = "strips" if mode == "strips" else child["backend"]
        rows.append(Row(f"4096 px {label} ({backend})", child["times"][0], None, child["cpu"], child["rss_mb"],
                        None, None, f"{child['times'][0] / mp:.2f} s/MP vs {per_mp_512:.2f} at 512 px; child process"))

    # 5. face enhancement: the group photo with and without
    from anipaint.models import helpers
    from anipaint.painter import get_painter

    painter = get_painter(STYLE, settings).warm()
    if helpers.install_face_detector(settings) is not None:
        painter.paint(photo, faces=True)
        with_f, without = paired(lambda: painter.paint(photo, faces=True), lambda: painter.paint(photo, faces=False),
                                 rounds)
        note = f"{with_f.seconds:.2f} s with, {without.seconds:.2f} without"
        rows.append(Row("faces: time added per picture (group photo)", with_f.seconds - without.seconds,
                        noise=with_f.foreign, note=note))

    return rows, auto, painter


def profile(painter, photo: bytes, stem: Path | None) -> None:
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
        timings = painter.paint_result(photo, faces=False).timings
    table = tp.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
    text = stem.parent / f"{stem.name}-profile.txt"
    stages = ", ".join(f"{k} {v:.3f} s" for k, v in timings.items())
    text.write_text(f"backend: {painter.engine.backend_name}; {stages}\n(a compiled backend's fused loops run inside "
                    f"its .so and are not in the operator table: the paint time minus the table's total is "
                    f"theirs)\n\n{table}\n\n{out.getvalue()}")
    print(f"profile written to {prof} and {text}")


