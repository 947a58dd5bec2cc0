"""Camera mode, in a real headless Chromium whose fake camera plays a real clip (the shared samples' windowsill
clip, written as a .y4m at test time) against a real server: the live view paints on the device, says its frame
rate and size, follows the style, takes a picture into the usual result view, records a clip, sends nothing, and
ends every camera track when left; a refused camera is said in one sentence and the page still paints."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support.camera import FAKE_MEDIA, fake_camera_file
from support.page import ARGS, CHROMIUM, axe_violations, canvas_pixels, open_page, shot, tab_stops
from support.paths import SAMPLES
from support.service import GROUP_PHOTO, Server, running_server

LIVE_STYLES = ("v3-cute", "v3-hayao")  # the quickest style, and the default one to switch to
CLIP = SAMPLES / "realshort.mp4"  # 320×240, 4:3: a handheld pan over a windowsill
STATS = re.compile(r"\d+\.\d fps · (\d+)×(\d+) · WebAssembly")

pytestmark = pytest.mark.timeout(900)

# Every stream getUserMedia hands the page, kept where the test can see whether its tracks ended.
KEEP_STREAMS = """(() => {
  const open = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
  window.__streams = [];
  navigator.mediaDevices.getUserMedia = async (c) => { const s = await open(c); window.__streams.push(s); return s; };
})();"""
TRACKS = "() => window.__streams.flatMap((s) => s.getTracks().map((t) => t.kind + ':' + t.readyState))"
# The live canvas as a PNG data URL.
LIVE_PIXELS = "() => document.getElementById('live-canvas').toDataURL('image/png')"
# camera.js on its own, fed a <video> playing a clip: the first frames' sizes, how far painted is from input, and
# the snapshot's size.
MODULE = """async ([b64, style]) => {
  const { startCamera } = await import("/static/camera.js");
  const video = document.createElement("video");
  video.muted = true; video.loop = true; video.playsInline = true;
  video.src = URL.createObjectURL(new Blob([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))],
                                           { type: "video/mp4" }));
  document.body.append(video);
  await video.play();
  const frames = [];
  let enough;
  const three = new Promise((resolve) => { enough = resolve; });
  const live = await startCamera({ source: video, style, maxSide: 192, minSide: 192, onFrame: (f) => {
    let diff = 0;
    for (let i = 0; i < f.input.data.length; i += 4) diff += Math.abs(f.input.data[i] - f.painted.data[i]);
    frames.push({ input: [f.input.width, f.input.height], painted: [f.painted.width, f.painted.height],
                  diff: diff / (f.input.width * f.input.height), time: f.time });
    if (frames.length === 3) enough();
  } });
  await three;
  const png = await live.snapshot();
  const stats = live.stats();
  live.stop();
  return { frames, png: png.size, type: png.type, stats };
}"""


@pytest.fixture(scope="module")
def camera_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_camera_file(CLIP, tmp_path_factory.mktemp("camera") / "windowsill.y4m", 320, 240, seconds=1.2)


@pytest.fixture(scope="module")
def browser(camera_file: Path):
    """Chromium with its fake camera and microphone playing the clip, every permission prompt answered yes."""
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (set ANIPAINT_CHROMIUM)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                              args=[*ARGS, *FAKE_MEDIA, f"--use-file-for-fake-video-capture={camera_file}"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def server(device_model, tmp_path_factory: pytest.TempPathFactory):
    for style in LIVE_STYLES:
        device_model(style)
    with running_server(tmp_path_factory.mktemp("camera")) as s:
        yield s


def _png(data_url: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data_url.split(",", 1)[1]))).convert("RGB"))


def _camera_frames(camera_file: Path, size: tuple[int, int]) -> list[np.ndarray]:
    """The clip's frames as the live view grabs them: mirrored, at the working size."""
    import av

    with av.open(str(camera_file)) as c:
        return [np.asarray(f.to_image().transpose(Image.Transpose.FLIP_LEFT_RIGHT).resize(size), dtype=np.float32)
                for f in c.decode(video=0)]


def _painted_frames(page, count: int) -> list[np.ndarray]:
    """`count` different pictures from the live canvas, as they come."""
    seen: list[np.ndarray] = []
    for _ in range(600):
        now = _png(page.evaluate(LIVE_PIXELS))
        if not seen or now.shape != seen[-1].shape or np.abs(now.astype(int) - seen[-1]).mean() > 0.5:
            seen.append(now)
        if len(seen) >= count:
            return seen
        page.wait_for_timeout(100)
    raise AssertionError(f"the live view changed {len(seen) - 1} times in a minute")


def test_the_camera_is_painted_live(server: Server, page_factory, camera_file: Path) -> None:  # noqa: F811
    """Press Camera: painted frames arrive, unlike the camera's own picture; the frame rate and size show; another
    style takes over while live; Record gives a clip with sound; nothing is sent; leaving ends every track."""
    page = page_factory()
    page.add_init_script(KEEP_STREAMS)
    requests: list = []
    page.context.on("request", lambda request: requests.append(request))
    open_page(page, server)
    page.click('[data-testid="style-v3-cute"]')
    assert page.evaluate("window.__streams.length") == 0  # nothing asked before the button
    page.click('[data-testid="camera-start"]')
    page.wait_for_selector("body[data-camera='live'][data-camera-style='v3-cute']", state="attached",
                           timeout=120_000)
    frames = _painted_frames(page, 3)
    stats = page.inner_text('[data-testid="live-stats"]')
    said = STATS.fullmatch(stats)
    assert said and int(said[1]) >= 128 and int(said[1]) / int(said[2]) == pytest.approx(4 / 3, abs=0.15), stats
    h, w = frames[-1].shape[:2]  # the working size adapts meanwhile: the frame's own
    camera = _camera_frames(camera_file, (w, h))
    nearest = min(np.abs(frames[-1] - c).mean() for c in camera)
    assert nearest > 8, nearest  # painted, not the camera's picture (mirrored and at this size)
    assert page.get_attribute('[data-testid="live-canvas"]', "aria-label")  # the live view's text alternative
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "page-camera-live")

    page.click('[data-testid="style-v3-hayao"]')
    page.wait_for_selector("body[data-camera-style='v3-hayao']", state="attached", timeout=120_000)
    _painted_frames(page, 2)

    page.click('[data-testid="live-record"]')
    page.locator('[data-testid="live-record"]', has_text="Stop recording").wait_for()  # once the microphone is on
    page.wait_for_timeout(2500)
    page.click('[data-testid="live-record"]')
    page.wait_for_selector('[data-testid="live-clip"]:visible')
    with page.expect_download() as download:
        page.click('[data-testid="live-clip"]')
    import av

    with av.open(download.value.path()) as clip:
        kinds = {s.type for s in clip.streams}
        decoded = sum(1 for _ in clip.decode(video=0))
    assert decoded >= 1 and kinds == {"video", "audio"}, (decoded, kinds)  # the fake microphone's sound

    page.click('[data-testid="live-leave"]')
    page.wait_for_selector("body[data-camera='off']", state="attached")
    tracks = page.evaluate(TRACKS)
    assert tracks and all(t.endswith(":ended") for t in tracks), tracks
    assert page.is_visible('[data-testid="camera-start"]') and page.is_hidden('[data-testid="live"]')
    sent = [(r.method, r.url) for r in requests if r.method != "GET" or r.post_data_buffer]
    assert sent == [], sent

    # The tab hidden (headless Chromium never hides one: the page is told so as a browser would tell it).
    page.click('[data-testid="camera-start"]')
    page.wait_for_selector("body[data-camera='live']", state="attached", timeout=120_000)
    page.evaluate("""() => {
      Object.defineProperty(document, "hidden", { value: true, configurable: true });
      document.dispatchEvent(new Event("visibilitychange"));
    }""")
    page.wait_for_selector("body[data-camera='off']", state="attached")
    tracks = page.evaluate(TRACKS)
    assert len(tracks) >= 3 and all(t.endswith(":ended") for t in tracks), tracks


def test_take_picture_gives_the_result_view(server: Server, page_factory) -> None:  # noqa: F811
    """Take picture: the camera's frame, painted at full quality by the page's painter (here the server's, as
    the switch is off), compared and downloaded as any photo; the camera is off afterwards."""
    page = page_factory()
    page.add_init_script(KEEP_STREAMS)
    open_page(page, server)
    page.click('[data-testid="style-v3-cute"]')
    page.click('[data-testid="camera-start"]')
    page.wait_for_selector("body[data-camera='live'][data-camera-style='v3-cute']", state="attached",
                           timeout=120_000)
    page.click('[data-testid="live-take"]')
    page.wait_for_selector("body[data-state='done'], body[data-state='error']", state="attached", timeout=180_000)
    assert page.get_attribute("body", "data-state") == "done", page.inner_text('[data-testid="message"]')
    assert page.get_attribute("body", "data-camera") == "off"
    assert all(t.endswith(":ended") for t in page.evaluate(TRACKS))
    assert page.is_visible('[data-testid="compare"]')
    with page.expect_download() as download:
        page.click('[data-testid="download"]')
    painted = np.asarray(Image.open(download.value.path()).convert("RGB"))
    assert painted.shape == (240, 320, 3)  # the camera's frame, under 512 px: painted as it is
    assert np.array_equal(canvas_pixels(page), painted)


def test_the_module_paints_a_video_element(server: Server, page_factory) -> None:  # noqa: F811
    """camera.js with a playing <video> as its source: onFrame gets input and painted pairs of the working size,
    snapshot() a PNG, and stats() where a frame's time went (the network's run within the worker's round trip)."""
    page = page_factory()
    open_page(page, server)
    got = page.evaluate(MODULE, [base64.b64encode(CLIP.read_bytes()).decode(), "v3-cute"])
    for frame in got["frames"]:
        assert frame["input"] == frame["painted"] == [192, 144], frame  # 4:3 at 192, multiples of 16
        assert frame["diff"] > 8, frame
    assert got["png"] > 0 and got["type"] == "image/png"
    assert got["stats"]["painted"] >= 3 and got["stats"]["ep"] == "wasm" and got["stats"]["side"] == 192
    stages = got["stats"]["stages"]
    assert set(stages) == {"grabMs", "paintMs", "runMs", "steadyMs", "drawMs"}, stages
    assert 0 < stages["runMs"] <= stages["paintMs"] and min(stages.values()) >= 0, stages


def test_the_page_and_the_live_view_are_accessible(server: Server, page_factory) -> None:  # noqa: F811
    """axe-core finds no serious or critical fault on the page, in English and Chinese, nor in camera mode; the
    keyboard alone starts the camera and reaches every button of the live view, which says what it shows."""
    page = page_factory()
    open_page(page, server)
    assert axe_violations(page) == []
    page.click('[data-testid="lang-toggle"]')
    page.wait_for_selector("html[lang^='zh']", state="attached")
    assert axe_violations(page) == []
    page.click('[data-testid="lang-toggle"]')
    page.click('[data-testid="style-v3-cute"]')

    stops = tab_stops(page)
    assert {"lang-toggle", "dropzone", "camera-start", "on-device", "size-512"} <= set(stops), stops
    page.focus('[data-testid="camera-start"]')
    page.keyboard.press("Enter")
    page.wait_for_selector("body[data-camera='live']", state="attached", timeout=120_000)
    assert page.evaluate("document.activeElement.id") == "live-take"  # the focus goes with the mode
    _painted_frames(page, 2)
    assert axe_violations(page) == []
    assert page.get_attribute('[data-testid="live-canvas"]', "role") == "img"
    assert "camera" in page.get_attribute('[data-testid="live-canvas"]', "aria-label").lower()
    stops = tab_stops(page)
    assert {"live-take", "live-record", "live-pause", "live-leave", "live-smoother"} <= set(stops), stops
    page.focus('[data-testid="live-leave"]')
    page.keyboard.press("Enter")
    page.wait_for_selector("body[data-camera='off']", state="attached")
    assert page.evaluate("document.activeElement.id") == "camera-start"


# steady.js on a photo panned by a fraction of a pixel a frame, "painted" with dark strokes that come and go (as a
# network's do), then another scene: each frame's input, painting and what the live view would show, RGBA base64.
STEADY = """async ([b64, shifts, cutAt, strokes]) => {
  const { createSteadier } = await import("/static/steady.js");
  const photo = await createImageBitmap(new Blob([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))]));
  const w = 256, h = 192;
  const canvas = new OffscreenCanvas(w, h);
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  let seed = 7;
  const rand = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  const steadier = createSteadier();
  const b64of = (d) => {
    let s = "";
    for (let i = 0; i < d.length; i += 8192) s += String.fromCharCode(...d.subarray(i, i + 8192));
    return btoa(s);
  };
  const frames = [];
  for (const [i, [dx, dy]] of shifts.entries()) {
    const scene = i >= cutAt ? 1 : 0; // from cutAt on: another part of the photo, upside down (a scene change)
    ctx.setTransform(1, 0, 0, scene ? -1 : 1, 0, scene ? h : 0);
    ctx.drawImage(photo, 40 + dx + scene * 200, 30 + dy, w * 2, h * 2, 0, 0, w, h);
    const input = ctx.getImageData(0, 0, w, h);
    // The painting: the picture with dark strokes that come and go frame by frame, as a network's do.
    const painted = new ImageData(new Uint8ClampedArray(input.data), w, h);
    for (let k = 0; k < strokes; k++) {
      const x = (rand() * (w - 4)) | 0, y = (rand() * h) | 0;
      for (let d = 0; d < 4; d++) for (let c = 0; c < 3; c++) painted.data[4 * (y * w + x + d) + c] *= 0.35;
    }
    const shown = steadier.next(input, painted);
    frames.push([b64of(input.data), b64of(painted.data), b64of(shown.data)]);
  }
  return frames;
}"""


def test_steady_holds_a_moving_picture_still(server: Server, page_factory) -> None:  # noqa: F811
    """steady.js on a slow pan: strokes that flicker frame by frame are held (the warping error well under the
    paintings'), the picture is moved without blurring it, and a scene change shows the new painting as it is."""
    from anipaint.media import temporal

    page = page_factory()
    open_page(page, server)
    photo = base64.b64encode(GROUP_PHOTO.read_bytes()).decode()
    shifts = [[0.7 * i, 0.3 * i] for i in range(12)]

    def frames(strokes: int) -> list[list[np.ndarray]]:
        got = page.evaluate(STEADY, [photo, shifts, 10, strokes])
        return [[np.frombuffer(base64.b64decode(f[k]), np.uint8).reshape(192, 256, 4)[..., :3] for f in got]
                for k in range(3)]

    inputs, painted, shown = frames(400)
    flicker, held = temporal.warping_errors(inputs[:10], [painted[:10], shown[:10]])
    assert held < 0.3 * flicker, (held, flicker)
    assert np.array_equal(shown[10], painted[10])  # the scene changed: afresh
    inputs, _, shown = frames(0)
    assert temporal.sharpness(shown[:10]) > 0.95 * temporal.sharpness(inputs[:10])


def test_a_refused_camera_is_said_and_the_page_still_paints(server: Server, browser, camera_file: Path) -> None:  # noqa: F811
    """Without the fake permission prompt, the camera is refused (as when the person says no): one sentence, in
    English and in Chinese, and a photo still paints."""
    b = browser.browser_type.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=[*ARGS, FAKE_MEDIA[0], f"--use-file-for-fake-video-capture={camera_file}"])
    try:
        page = b.new_page()
        open_page(page, server)
        page.click('[data-testid="camera-start"]')
        note = page.locator('[data-testid="camera-note"]')
        note.wait_for()
        assert note.inner_text() == ("The camera was not allowed: allow it in the browser's address bar and "
                                     "press Camera again.")
        assert page.get_attribute("body", "data-camera") == "off"
        page.click('[data-testid="lang-toggle"]')
        assert note.inner_text().startswith("摄像头未获允许")
        page.click('[data-testid="lang-toggle"]')
        page.set_input_files('[data-testid="file-input"]', str(GROUP_PHOTO))
        page.wait_for_selector('[data-testid="preview"]:visible')
        page.click('[data-testid="paint"]')
        page.wait_for_selector("body[data-state='done'], body[data-state='error']", state="attached",
                               timeout=180_000)
        assert page.get_attribute("body", "data-state") == "done"
        page.evaluate("window.scrollTo(0, 0)")
        shot(page, "page-camera-refused")
    finally:
        b.close()
