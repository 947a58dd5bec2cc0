"""Painting on the device against native ONNX Runtime: each style's device model (the ONNX file the page
downloads) painting the group photo at 512 px in headless Chromium (ONNX Runtime Web in the page's worker,
WebAssembly with SIMD and threads; WebGPU too where Chromium offers an adapter), and the same file in onnxruntime
in Python, in the same run, on the same cores.

``python benchmarks/device_paint.py [--styles v3-hayao,v3-cute] [--rounds 5] [--no-webgpu] [--first 3]``

Each browser round is one ``paintOnDevice`` call, timed in the page: ``paint`` is the network's run (from the
worker's "paint" progress message to its "encode" one), ``whole`` the call from the photo's bytes to the PNG
(decode, the Lanczos cap, padding, the run, encoding); the first call, which downloads the model and starts the
session, is left out (``--first N`` times that one too: N fresh browsers each painting straight away, and N
getting ready first with ``prepareOnDevice`` and pausing as a person choosing a photo would). Native is
``InferenceSession.run`` on the same 512 × 512 input, as many threads as cores (the page's worker asks for the
same). A real server (``python -m anipaint.service``, background warm-up
off) serves the page and the model; missing device models are made first (tens of seconds each).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

from anipaint import preprocess
from anipaint.engine.onnx import device_models
from anipaint.imaging import load_image
from anipaint.models import store
from anipaint.models.registry import get_style
from anipaint.service.routes.device import RUNTIME
from anipaint.settings import get_settings

CHROMIUM = os.environ.get("ANIPAINT_CHROMIUM", "/usr/bin/chromium")
# The page tests' flags; --disable-gpu leaves WebAssembly. Without it and with --enable-unsafe-webgpu, headless
# Chromium offers a WebGPU adapter where it has one (SwiftShader, on the CPU, on a machine without a GPU).
ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run"]
PAINT = """async ([b64, style, ep, rounds]) => {
  const { paintOnDevice } = await import("/static/device.js");
  const photo = new Blob([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))]);
  const times = [];
  let used = null;
  for (let i = 0; i <= rounds; i++) {
    const at = {};
    const t0 = performance.now();
    await paintOnDevice(photo, { style, maxSide: 512, ep, details: (d) => { used = d.ep; },
      onProgress: (p) => { at[p.stage] = at[p.stage] || performance.now(); } });
    if (i) times.push({ whole: performance.now() - t0, paint: at.encode - at.paint });
  }
  return { times, ep: used };
}"""
# The first paint of a fresh browser: straight away ("cold"), or after prepareOnDevice and a pause standing for the
# time a person takes to choose a photo ("prepared", as the page does while its switch is on).
FIRST = """async ([b64, style, prepare, pauseMs]) => {
  const { paintOnDevice, prepareOnDevice } = await import("/static/device.js");
  const photo = new Blob([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))]);
  if (prepare) {
    await prepareOnDevice(style);
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  const at = {};
  const t0 = performance.now();
  const onProgress = (p) => { at[p.stage] = at[p.stage] || performance.now(); };
  await paintOnDevice(photo, { style, maxSide: 512, onProgress });
  return { whole: performance.now() - t0, paint: at.encode - at.paint };
}"""
ADAPTER = """navigator.gpu ? navigator.gpu.requestAdapter()
  .then((a) => a && a.info.architecture + (a.info.isFallbackAdapter ? " (software)" : "")) : null"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def _server(default_style: str):
    port = _free_port()
    env = {**os.environ, "ANIPAINT_HOST": "127.0.0.1", "ANIPAINT_PORT": str(port), "ANIPAINT_BACKGROUND": "off",
           "ANIPAINT_DEFAULT_STYLE": default_style, "ANIPAINT_LOG_LEVEL": "warning"}
    proc = subprocess.Popen([sys.executable, "-m", "anipaint.service"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not get ready")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def _native(path: Path, rgb: np.ndarray, rounds: int) -> float:
    """Median seconds of onnxruntime's run of the file on the photo (512 × 512, no padding needed)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = (rgb.astype(np.float32) / 127.5 - 1).transpose(2, 0, 1)[None]
    feed = {session.get_inputs()[0].name: x}
    session.run(None, feed)
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _browser(url: str, photo: bytes, styles: list[str], rounds: int, webgpu: bool) -> dict:
    from playwright.sync_api import sync_playwright

    out: dict = {}
    runs = [("wasm", [*ARGS, "--disable-gpu"])] + ([("webgpu", [*ARGS, "--enable-unsafe-webgpu"])] if webgpu else [])
    with sync_playwright() as p:
        for ep, args in runs:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
            page = browser.new_page()
            page.set_default_timeout(600_000)
            page.goto(url + "/")
            if not page.evaluate("crossOriginIsolated"):
                raise RuntimeError("the page is not cross-origin isolated: WebAssembly would run on one thread")
            adapter = page.evaluate(ADAPTER) if ep == "webgpu" else None
            if ep == "webgpu" and (not adapter or adapter.endswith("(software)")):
                # The painter passes a software adapter over (WebGPU emulated on the CPU: minutes for one paint).
                print(f"  webgpu: not measured, the adapter here is {adapter or 'none'}")
                styles = []
            for style in styles:
                got = page.evaluate(PAINT, [base64.b64encode(photo).decode(), style, ep, rounds])
                if got["ep"] != ep:
                    print(f"  {ep}: not offered here (the paint ran on {got['ep']})")
                    break
                out[(ep, style)] = got["times"]
            browser.close()
    return out


def _first_paints(url: str, photo: bytes, styles: list[str], browsers: int, pause_ms: int) -> dict:
    """Each style's first paint in fresh browsers, cold and prepared in turns: {(style, kind): [result, ...]}."""
    from playwright.sync_api import sync_playwright

    out: dict = {}
    b64 = base64.b64encode(photo).decode()
    with sync_playwright() as p:
        for style in styles:
            for _ in range(browsers):
                for kind in ("cold", "prepared"):
                    browser = p.chromium.launch(executable_path=CHROMIUM, args=[*ARGS, "--disable-gpu"], headless=True)
                    page = browser.new_page()
                    page.set_default_timeout(600_000)
                    page.goto(url + "/")
                    out.setdefault((style, kind), []).append(
                        page.evaluate(FIRST, [b64, style, kind == "prepared", pause_ms]))
                    browser.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--styles", default="v3-hayao,v3-cute")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-webgpu", action="store_true", help="WebAssembly only")
    parser.add_argument("--first", type=int, default=0, metavar="N",
                        help="also time the first paint of N fresh browsers per style, cold and prepared")
    parser.add_argument("--pause", type=int, default=2000, help="ms between getting ready and the first paint")
    args = parser.parse_args(argv)
    settings = get_settings()
    styles = [s for s in args.styles.split(",") if s]
    photo_path = settings.samples_dir / "group_pakutaso.jpg"
    photo = photo_path.read_bytes()
    rgb = preprocess.to_work_image(load_image(photo), 512).rgb  # as the server and the page cap it
    if rgb.shape[:2] != (512, 512):
        raise SystemExit(f"expected the square group photo, got {rgb.shape[:2]}")
    models = {}
    for style_id in styles:
        style = get_style(style_id)
        store.ensure_converted(style, settings)
        models[style_id] = device_models.ensure(style, settings)
    runtime = sum(f.stat().st_size for f in RUNTIME.iterdir() if f.is_file())
    native = {s: _native(device_models.path_of(m, get_style(s), settings), rgb, args.rounds)
              for s, m in models.items()}
    with _server(styles[0]) as url:
        browser = _browser(url, photo, styles, args.rounds, not args.no_webgpu)
        first = _first_paints(url, photo, styles, args.first, args.pause) if args.first else {}
    print(f"group photo at 512 × 512, {args.rounds} rounds (medians), {os.cpu_count()} cores; "
          f"runtime download {runtime / 1e6:.1f} MB once (onnxruntime-web)")
    for style_id, model in models.items():
        print(f"{style_id}: model {model.bytes / 1e6:.2f} MB ({model.weights} weights); "
              f"native onnxruntime run {native[style_id] * 1000:.0f} ms")
        for ep in ("wasm", "webgpu"):
            times = browser.get((ep, style_id))
            if not times:
                continue
            run = statistics.median(t["paint"] for t in times) / 1000
            whole = statistics.median(t["whole"] for t in times) / 1000
            print(f"  {ep:6s} run {run * 1000:6.0f} ms ({run / native[style_id]:.2f}× native)   "
                  f"whole paint {whole * 1000:6.0f} ms ({whole / native[style_id]:.2f}× native's run)")
            print("         each run: " + ", ".join(f"{t['paint']:.0f}" for t in times) + " ms")
        for kind in ("cold", "prepared"):
            got = first.get((style_id, kind))
            if got:
                print(f"  first paint, {kind:8s} whole {statistics.median(t['whole'] for t in got):6.0f} ms, "
                      f"run {statistics.median(t['paint'] for t in got):6.0f} ms   (each whole: "
                      + ", ".join(f"{t['whole']:.0f}" for t in got) + " ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
