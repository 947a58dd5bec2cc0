"""The live camera on the device: headless Chromium (WebAssembly), its fake camera playing a real clip, the page's
camera.js painting it in device.js's worker, against the same frames painted one by one.

    .venv/bin/python benchmarks/camera_live.py [--styles v3-cute,v3-hayao] [--seconds 20] [--memory 120]
        [--clip dog_foliage.mp4] [--json artifacts/camera/camera_live.json]
        [--replay-only [--sets '[{}, {"subpixel": false}]']] [--sizes 192,256,320 [--repeat 3]]
        [--memory-only [--memory-fps 12] [--memory-side 320]]

For each style, at a fixed working size of 256 × 192 (4:3, the clip's centre):
- ``live fps``: painted frames a second while live (camera.js's own count over the last two seconds, sampled once a
  second, median), frames dropped (camera frames that came while one was painted: never queued);
- ``infer fps``: the same worker painting one 256 × 192 frame after another (device.js's paintFrame: transfer,
  tensor, run, pixels back), nothing else: the most a live loop could reach; ``run`` is the network's run alone;
  with the style's live model (int8, where the server made one) and, after it, with its full model;
  ``native``: onnxruntime in Python running the same model on the same size, this process, the same cores;
- ``latency``: from the camera frame's capture (requestVideoFrameCallback's captureTime) to its painting being
  put on the canvas, median of the last 30;
- steadiness: Lai et al.'s warping error (anipaint.media.temporal, as benchmarks/video_steadiness.py measures
  clips) of what was shown (steady.js on) and of the same frames as the network painted them, each alone (the
  onFrame ``raw``), and of the input itself; sharpness (mean gradient) shown against one by one;
- then an adaptive run of the first style (targetFps 12, up to 512): the size it settles on and its frame rate;
- ``--sets``: the steady.js option sets the replay compares (the shipped defaults are ``{}``);
- ``--sizes``: only live fps against inference alone at each of these long sides, per style (``--repeat`` pairs
  each), with where a live frame's time goes (camera.js's ``stats().stages``);
- ``--memory S``: the first style live for S seconds (adaptive, target ``--memory-fps``, up to ``--memory-side``;
  with ``--memory-only`` after 20 frames to load the model and warm it): every 15 s the resident memory of
  Chromium's renderer processes (the page and its worker, the runtime's WebAssembly memory included) and the
  page's and the painting worker's JS heaps, each after a garbage collection (DevTools protocol; the worker reached
  as a target of its own).
A strip of consecutive live frames (input, one by one, steady) goes to artifacts/camera/<style>-strip.png.
A real server (background preparation off) serves the page and the models; missing device models are made first.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from anipaint.engine.onnx import device_models, live_models
from anipaint.media import temporal
from anipaint.models import store
from anipaint.models.registry import get_style
from anipaint.settings import get_settings

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))
from device_paint import ARGS, CHROMIUM, _native, _server  # noqa: E402

from support.camera import FAKE_MEDIA, fake_camera_file  # noqa: E402

SIDE, WIDTH, HEIGHT = 256, 256, 192
KEEP = 48  # consecutive live frames kept for the warping error
# (clip, every n-th frame, sensor noise σ) replayed: a hand-held pan, and a tripod shot with a webcam's noise
REPLAYS = [("realshort.mp4", 2, 0.0), ("dog_foliage.mp4", 3, 2.5)]

# Live at a fixed size for `seconds`: stats each second, and `keep` consecutive frames (after `skip`) as PNGs.
LIVE = """async ([style, side, seconds, skip, keep, steady]) => {
  const { startCamera } = await import("/static/camera.js");
  const png = (image) => {
    const c = new OffscreenCanvas(image.width, image.height);
    c.getContext("2d").putImageData(image, 0, 0);
    return c.convertToBlob({ type: "image/png" }).then((b) => new Promise((resolve) => {
      const r = new FileReader(); r.onload = () => resolve(r.result); r.readAsDataURL(b);
    }));
  };
  const frames = [];
  let seen = 0;
  const live = await startCamera({ style, maxSide: side, minSide: side, steady, onFrame: (f) => {
    seen++;
    if (seen > skip && frames.length < keep) frames.push([png(f.input), png(f.raw), png(f.painted)]);
  } });
  const samples = [];
  for (let t = 0; t < seconds; t++) {
    await new Promise((r) => setTimeout(r, 1000));
    samples.push(live.stats());
  }
  live.stop();
  const kept = [];
  for (const f of frames) kept.push(await Promise.all(f));
  return { samples, frames: kept };
}"""
# The worker painting one frame after another, nothing else.
INFER = """async ([style, w, h, rounds, live = true]) => {
  const { paintFrame } = await import("/static/device.js");
  const base = new Uint8ClampedArray(w * h * 4).map((_, i) => (i % 4 === 3 ? 255 : (i * 37) % 251));
  const walls = [], runs = [];
  for (let i = 0; i < rounds + 3; i++) {
    const t0 = performance.now();
    const got = await paintFrame(new ImageData(new Uint8ClampedArray(base), w, h), { style, live });
    if (i >= 3) { walls.push(performance.now() - t0); runs.push(got.runMs); }
  }
  return { walls, runs };
}"""
# Whether the fake camera's frames carry a capture time (latency is measured from it; else from the hand-over).
CAPTURE_TIME = """async () => {
  const stream = await navigator.mediaDevices.getUserMedia({ video: true });
  const v = document.createElement("video"); v.muted = true; v.srcObject = stream; await v.play();
  const meta = await new Promise((resolve) => v.requestVideoFrameCallback((_, m) => resolve(m)));
  stream.getTracks().forEach((t) => t.stop());
  return "captureTime" in meta;
}"""
# The clip's frames (RGBA, base64) painted one by one in the worker, then steadied by steady.js with each set of
# options in turn: the same frames and paintings for every set, no timing involved.
REPLAY = """async ([style, w, h, frames, optionSets]) => {
  const { paintFrame } = await import("/static/device.js");
  const { createSteadier } = await import("/static/steady.js");
  const png = (image) => {
    const c = new OffscreenCanvas(w, h);
    c.getContext("2d").putImageData(image, 0, 0);
    return c.convertToBlob({ type: "image/png" }).then((b) => new Promise((resolve) => {
      const r = new FileReader(); r.onload = () => resolve(r.result); r.readAsDataURL(b);
    }));
  };
  const inputs = frames.map((b64) => new ImageData(Uint8ClampedArray.from(atob(b64), (c) => c.charCodeAt(0)), w, h));
  const raw = [];
  for (const input of inputs) {
    raw.push((await paintFrame(new ImageData(new Uint8ClampedArray(input.data), w, h), { style })).painted);
  }
  const out = { raw: await Promise.all(raw.map(png)), steady: [], ms: [] };
  for (const options of optionSets) {
    const steadier = createSteadier(options);
    const shown = [];
    const t0 = performance.now();
    for (let i = 0; i < inputs.length; i++) shown.push(steadier.next(inputs[i], raw[i]));
    out.ms.push((performance.now() - t0) / inputs.length);
    out.steady.push(await Promise.all(shown.map(png)));
  }
  return out;
}"""
ADAPTIVE = """async ([style, seconds]) => {
  const { startCamera } = await import("/static/camera.js");
  const live = await startCamera({ style, targetFps: 12, maxSide: 512 });
  const samples = [];
  for (let t = 0; t < seconds; t++) { await new Promise((r) => setTimeout(r, 1000)); samples.push(live.stats()); }
  live.stop();
  return samples;
}"""
START = """async ([style, targetFps, maxSide]) => {
  const { startCamera } = await import("/static/camera.js");
  window.live = await startCamera({ style, targetFps, maxSide });
}"""


def _renderers_rss() -> int:
    """The resident memory of this process's Chromium renderers (the page and its worker run in one), bytes."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            if b"--type=renderer" in Path(f"/proc/{pid}/cmdline").read_bytes():
                rss = Path(f"/proc/{pid}/statm").read_text().split()[1]
                total += int(rss) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            continue
    return total


class _WorkerHeap:
    """The painting worker's JS heap after a garbage collection, through the page's DevTools session: a dedicated
    worker is a target of its own, reached by the (non-flat) ``Target.sendMessageToTarget`` route."""

    def __init__(self, cdp) -> None:
        self.cdp, self.replies, self.next_id = cdp, {}, 1
        self.sessions: list[str] = []
        cdp.on("Target.receivedMessageFromTarget", self._received)
        cdp.on("Target.attachedToTarget", lambda e: self.sessions.append(e["sessionId"])
               if e["targetInfo"]["type"] == "worker" else None)
        cdp.send("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": False})

    def _received(self, event: dict) -> None:
        message = json.loads(event["message"])
        if "id" in message:
            self.replies[message["id"]] = message.get("result", {})

    def _call(self, session: str, method: str, params: dict | None = None, wait: float = 10.0) -> dict | None:
        import time

        ident, self.next_id = self.next_id, self.next_id + 1
        self.cdp.send("Target.sendMessageToTarget", {"sessionId": session, "message": json.dumps(
            {"id": ident, "method": method, "params": params or {}})})
        until = time.monotonic() + wait
        while ident not in self.replies and time.monotonic() < until:
            self.cdp.send("Runtime.evaluate", {"expression": "0"})  # lets the session's events arrive
            time.sleep(0.05)
        return self.replies.pop(ident, None)

    def used(self) -> int | None:
        """Bytes, summed over the page's workers; None where none answered."""
        sizes = []
        for session in self.sessions:
            self._call(session, "HeapProfiler.collectGarbage")
            got = self._call(session, "Runtime.getHeapUsage")
            if got:
                sizes.append(int(got["usedSize"]))
        return sum(sizes) if sizes else None


def _memory(page, style: str, seconds: int, every: int, target_fps: float, max_side: int) -> list[dict]:
    """Live for `seconds`: every `every` s, the renderers' resident memory and the page's and the worker's JS
    heaps after a GC."""
    import time

    cdp = page.context.new_cdp_session(page)
    workers = _WorkerHeap(cdp)
    page.evaluate(START, [style, target_fps, max_side])
    rows = []
    started = time.monotonic()
    for t in range(0, seconds + 1, every):
        time.sleep(max(0.0, started + t - time.monotonic()))
        cdp.send("HeapProfiler.collectGarbage")
        heap = cdp.send("Runtime.getHeapUsage")["usedSize"]
        stats = page.evaluate("window.live.stats()")
        rows.append({"t": t, "renderer_rss": _renderers_rss(), "page_heap": heap, "worker_heap": workers.used(),
                     "painted": stats["painted"],
                     "fps": stats["fps"], "side": stats["side"]})
    page.evaluate("window.live.stop()")
    return rows


def _mb(size: int | None) -> str:
    return "unread" if size is None else f"{size / 1e6:.1f} MB"


def _image(data_url: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data_url.split(",", 1)[1]))).convert("RGB"))


def _strip(path: Path, frames: list[list[np.ndarray]]) -> None:
    rows = [np.concatenate([f[k] for f in frames[10:14]], axis=1) for k in range(3)]
    Image.fromarray(np.concatenate(rows, axis=0)).save(path)


def clip_rgba(path: Path, width: int, height: int, step: int, count: int, noise: float = 0.0) -> list[np.ndarray]:
    """Every ``step``-th frame of the clip, its centre at ``width``:``height``, mirrored as the live view shows a
    camera, as RGBA: ``count`` of them; ``noise``: a webcam's sensor noise added (Gaussian, this σ in 0–255, fresh
    each frame, seeded)."""
    import av

    rng = np.random.default_rng(0)
    out = []
    with av.open(str(path)) as container:
        for i, frame in enumerate(container.decode(video=0)):
            if i % step:
                continue
            img = frame.to_image()
            w, h = img.size
            scale = min(w / width, h / height)
            cw, ch = width * scale, height * scale
            box = ((w - cw) / 2, (h - ch) / 2, (w + cw) / 2, (h + ch) / 2)
            small = img.resize((width, height), Image.Resampling.BILINEAR, box=box)
            rgba = np.asarray(small.transpose(Image.Transpose.FLIP_LEFT_RIGHT).convert("RGBA")).astype(np.float32)
            rgba[..., :3] += rng.normal(0, noise, rgba[..., :3].shape) if noise else 0
            out.append(np.clip(np.rint(rgba), 0, 255).astype(np.uint8))
            if len(out) >= count:
                break
    return out


def replay(page, style: str, frames: list[np.ndarray], option_sets: list[dict]) -> dict:
    """steady.js on the clip's frames painted one by one: per option set, the warping errors and sharpness."""
    h, w = frames[0].shape[:2]
    got = page.evaluate(REPLAY, [style, w, h, [base64.b64encode(f.tobytes()).decode() for f in frames], option_sets])
    inputs = [f[..., :3] for f in frames]
    raw = [_image(u) for u in got["raw"]]
    shown = [[_image(u) for u in seq] for seq in got["steady"]]
    errors = temporal.warping_errors(inputs, [raw, inputs, *shown])
    raw_sharp = temporal.sharpness(raw)
    return {"one_by_one": errors[0], "input": errors[1], "sets": [
        {"options": o, "warping": e, "ratio": e / errors[0], "sharpness_ratio": temporal.sharpness(seq) / raw_sharp,
         "ms": ms} for o, e, seq, ms in zip(option_sets, errors[2:], shown, got["ms"], strict=True)],
        "frames": [inputs, raw, *shown]}


def by_size(page, styles: list[str], sides: list[int], seconds: int, repeat: int = 1) -> list[dict]:
    """Live fps (steady on) at each fixed long side, against the worker painting that size alone, same page;
    ``repeat`` pairs of each (live, then alone), as this machine's speed drifts by ±20 % within minutes."""
    rows = []
    for style_id in styles:
        # The model loaded and run first, and the runtime's hot code optimised (the first few seconds of runs are
        # slower while the browser recompiles it), so that neither figure carries the start.
        page.evaluate(INFER, [style_id, WIDTH, HEIGHT, 20])
        for side in sides:
            for _ in range(repeat):
                live = page.evaluate(LIVE, [style_id, side, seconds, 0, 0, True])
                last = live["samples"][-1]
                infer = page.evaluate(INFER, [style_id, last["width"], last["height"], 8])
                stages = last["stages"]
                row = {"style": style_id, "size": f"{last['width']}x{last['height']}",
                       "live_fps": statistics.median(s["fps"] for s in live["samples"][len(live["samples"]) // 3:]),
                       "infer_fps": 1000 / statistics.median(infer["walls"]),
                       "infer_run_ms": statistics.median(infer["runs"]), "stages": stages,
                       "latency_ms": last["latencyMs"]}
                rows.append(row)
                print(f"{style_id} at {row['size']}: live {row['live_fps']:.1f} fps, inference alone "
                      f"{row['infer_fps']:.1f} fps ({row['live_fps'] / row['infer_fps']:.2f}×); live, ms a frame: "
                      f"grab {stages['grabMs']:.1f}, worker {stages['paintMs']:.1f} (run {stages['runMs']:.1f}; "
                      f"alone {row['infer_run_ms']:.1f}), steady {stages['steadyMs']:.1f}, draw "
                      f"{stages['drawMs']:.1f}; latency {row['latency_ms']:.0f} ms", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--styles", default="v3-cute,v3-hayao")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--memory", type=int, default=0, metavar="S")
    parser.add_argument("--memory-only", action="store_true", help="only the memory run")
    parser.add_argument("--memory-fps", type=float, default=12, help="the memory run's target frame rate")
    parser.add_argument("--memory-side", type=int, default=320, help="the memory run's largest long side")
    parser.add_argument("--repeat", type=int, default=1, help="--sizes: pairs of live and alone per size")
    parser.add_argument("--replay-only", action="store_true", help="only the replayed steadiness")
    parser.add_argument("--sizes", default="", metavar="SIDES",
                        help="only live fps against inference alone at these long sides, e.g. 192,256,320")
    parser.add_argument("--sets", type=json.loads, default=[{}, {"motion": False}], metavar="JSON",
                        help='steady.js option sets to replay, e.g. \'[{}, {"subpixel": false}]\'')
    parser.add_argument("--clip", default="dog_foliage.mp4")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    settings = get_settings()
    styles = [s for s in args.styles.split(",") if s]
    out_dir = REPO / "artifacts" / "camera"
    out_dir.mkdir(parents=True, exist_ok=True)
    rgb = (np.arange(HEIGHT * WIDTH * 3).reshape(HEIGHT, WIDTH, 3) * 37 % 251).astype(np.uint8)
    native = {}
    for style_id in styles:
        style = get_style(style_id)
        store.ensure_converted(style, settings)
        model = device_models.ensure(style, settings)
        native[style_id] = _native(device_models.path_of(model, style, settings), rgb, 10)
        live = live_models.ensure(style, settings)  # made here if missing; kept only where it pays
        if live.file:
            native[f"{style_id} live"] = _native(live_models.path_of(live, style, settings), rgb, 10)
    from playwright.sync_api import sync_playwright

    report: dict = {"clip": args.clip, "size": f"{WIDTH}x{HEIGHT}", "cores": os.cpu_count(), "styles": {}}
    with tempfile.TemporaryDirectory() as tmp, _server(styles[0]) as url, sync_playwright() as p:
        camera = fake_camera_file(settings.samples_dir / args.clip, Path(tmp) / "camera.y4m", 320, 240, seconds=8)
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=[*ARGS, "--disable-gpu", *FAKE_MEDIA,
                                          f"--use-file-for-fake-video-capture={camera}"])
        page = browser.new_page()
        page.set_default_timeout(900_000)
        page.goto(url + "/")
        if not page.evaluate("crossOriginIsolated"):
            raise RuntimeError("the page is not cross-origin isolated: WebAssembly would run on one thread")
        report["capture_time"] = page.evaluate(CAPTURE_TIME)
        if args.sizes:
            report["sizes"] = by_size(page, styles, [int(x) for x in args.sizes.split(",")], args.seconds,
                                      args.repeat)
        for style_id in [] if args.memory_only or args.replay_only or args.sizes else styles:
            # Live first: the runtime's code is then as optimised for the inference-alone rounds as for the live view
            # (measured the other way round, the first rounds ran slower than the live loop's).
            live = page.evaluate(LIVE, [style_id, SIDE, args.seconds, 10, KEEP, True])
            infer = page.evaluate(INFER, [style_id, WIDTH, HEIGHT, 20])
            full = page.evaluate(INFER, [style_id, WIDTH, HEIGHT, 10, False])  # the full model, as Take picture
            settled = live["samples"][len(live["samples"]) // 3:]  # past the start (the model, the first runs)
            frames = [[_image(u) for u in f] for f in live["frames"]]
            inputs, raw, shown = ([f[k] for f in frames] for k in range(3))
            raw_error, steady_error, input_error = temporal.warping_errors(inputs, [raw, shown, inputs])
            _strip(out_dir / f"{style_id}-strip.png", frames)
            wall = statistics.median(infer["walls"])
            row = {
                "live_fps": statistics.median(s["fps"] for s in settled),
                "infer_fps": 1000 / wall, "infer_ms": wall, "run_ms": statistics.median(infer["runs"]),
                "native_ms": native.get(f"{style_id} live", native[style_id]) * 1000,
                "native_full_ms": native[style_id] * 1000,
                "full_infer_fps": 1000 / statistics.median(full["walls"]),
                "full_run_ms": statistics.median(full["runs"]),
                "latency_ms": statistics.median(s["latencyMs"] for s in settled),
                "painted": live["samples"][-1]["painted"], "dropped": live["samples"][-1]["dropped"],
                "size": f"{live['samples'][-1]['width']}x{live['samples'][-1]['height']}",
                "frames_measured": len(frames),
                "warping": {"one_by_one": raw_error, "steady": steady_error, "input": input_error},
                "warping_ratio": steady_error / raw_error,
                "sharpness_ratio": temporal.sharpness(shown) / temporal.sharpness(raw),
            }
            report["styles"][style_id] = row
            print(f"{style_id} at {row['size']}: live {row['live_fps']:.1f} fps (inference alone "
                  f"{row['infer_fps']:.1f} fps: {row['infer_ms']:.0f} ms a frame, run {row['run_ms']:.0f} ms = "
                  f"{row['run_ms'] / row['native_ms']:.2f}× native onnxruntime's {row['native_ms']:.0f} ms); "
                  f"latency {row['latency_ms']:.0f} ms ({row['latency_ms'] * row['live_fps'] / 1000:.2f} frame times); "
                  f"painted {row['painted']}, dropped {row['dropped']}")
            print(f"  the full model (Take picture's): inference alone {row['full_infer_fps']:.1f} fps, "
                  f"run {row['full_run_ms']:.0f} ms ({row['run_ms'] / row['full_run_ms']:.2f}× for the live model) = "
                  f"{row['full_run_ms'] / row['native_full_ms']:.2f}× native's {row['native_full_ms']:.0f} ms")
            print(f"  warping error over {len(frames)} live frames: one by one {raw_error:.4f}, steady "
                  f"{steady_error:.4f} ({row['warping_ratio']:.2f}×), input {input_error:.4f}; sharpness "
                  f"{row['sharpness_ratio']:.3f}× one by one")
        # Steadiness replayed: the clips' frames (every `step`-th, as a live view at that share of 30 fps sees them)
        # painted one by one, then steady.js as shipped and without its motion search.
        report["replay"] = []
        for clip, step, noise in [] if args.memory_only or args.sizes else REPLAYS:
            frames = clip_rgba(settings.samples_dir / clip, WIDTH, HEIGHT, step, 30, noise)
            for style_id in styles:
                got = replay(page, style_id, frames, args.sets)
                sets = [{k: v for k, v in st.items() if k != "frames"} for st in got["sets"]]
                report["replay"].append({"clip": clip, "step": step, "noise": noise, "style": style_id,
                                         "one_by_one": got["one_by_one"], "input": got["input"], "sets": sets})
                print(f"replay {clip} every {step}. frame{f' + noise σ {noise}' if noise else ''}, {style_id}: "
                      f"one by one {got['one_by_one'] * 1000:.3f}e-3 (input {got['input'] * 1000:.3f}e-3); steady "
                      + "; ".join(f"{st['options'] or 'shipped'} {st['ratio']:.2f}× sharpness "
                                  f"{st['sharpness_ratio']:.3f}× {st['ms']:.1f} ms a frame" for st in sets))
                if style_id == styles[-1] and clip == REPLAYS[0][0]:
                    inputs, raw, shown = got["frames"][0], got["frames"][1], got["frames"][2]
                    _strip(out_dir / f"replay-{clip.split('.')[0]}-{style_id}-strip.png",
                           [[a, b, c] for a, b, c in zip(inputs, raw, shown, strict=True)])
        if not (args.memory_only or args.replay_only or args.sizes):
            adaptive = page.evaluate(ADAPTIVE, [styles[0], max(10, args.seconds)])
            last = adaptive[-1]
            report["adaptive"] = {"style": styles[0], "size": f"{last['width']}x{last['height']}",
                                  "fps": statistics.median(s["fps"] for s in adaptive[len(adaptive) // 2:]),
                                  "sizes": [s["side"] for s in adaptive]}
            print(f"adaptive ({styles[0]}, target 12 fps, up to 512): settled at {report['adaptive']['size']}, "
                  f"{report['adaptive']['fps']:.1f} fps; long side each second {report['adaptive']['sizes']}")
        if args.memory:
            if args.memory_only:  # the model loaded and its code optimised first, as in a live view's later minutes
                page.evaluate(INFER, [styles[0], WIDTH, HEIGHT, 20])
            rows = _memory(page, styles[0], args.memory, 15, args.memory_fps, args.memory_side)
            report["memory"] = rows
            for r in rows:
                print(f"  memory at {r['t']:4d} s: renderer RSS {r['renderer_rss'] / 1e6:6.1f} MB, page JS heap "
                      f"{r['page_heap'] / 1e6:.1f} MB, worker JS heap {_mb(r['worker_heap'])} after GC, painted "
                      f"{r['painted']} ({r['fps']:.1f} fps at "
                      f"{r['side']})")
        browser.close()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
