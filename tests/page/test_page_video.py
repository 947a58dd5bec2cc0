"""Videos and animated pictures on the page, in a real headless Chromium against a real server: a clip with sound
chosen, shown muted and painted through /api/jobs with its frames counted, played back and downloaded as an MP4
with its frames and its sound; an animated GIF comes back animated; what does not apply to a clip greys out with
why; the server's refusals say why; the device switch refuses a clip and offers the server; a phone's width."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest
from PIL import Image

from anipaint.settings import get_settings
from support.page import open_page, shot
from support.service import GROUP_PHOTO, InProcessServer, fast_style, in_process_server

av = pytest.importorskip("av")
SAMPLES = get_settings().samples_dir
FRAMES = 12  # of the real clip, at 30 fps: 0.4 s

pytestmark = pytest.mark.timeout(900)

# Plays the painted video (muted: headless Chromium allows that without a gesture) until its time moves.
PLAY = """async (video) => {
  video.muted = true;
  await video.play();
  await new Promise((resolve) => video.addEventListener("timeupdate", resolve, { once: true }));
  return { duration: video.duration, width: video.videoWidth, height: video.videoHeight, time: video.currentTime };
}"""


class HoldAtFrame:
    """Wraps the server's painter: an armed clip paint waits after its first painted frame until the test lets it
    go, so that the page's frame count is seen however fast the frames paint. ``asked`` is each paint's options as
    the server took them from the page's request."""

    def __init__(self) -> None:
        self.asked: list = []
        self.armed = False
        self.reached = threading.Event()
        self._go = threading.Event()

    def open(self) -> None:  # in_process_server lets held paints go when it stops
        self._go.set()

    def wrap(self, runner):  # noqa: ANN001, ANN201 - anipaint.service.queue.jobs.Runner
        def run(request, progress):  # noqa: ANN001, ANN202
            self.asked.append(request.options)

            def report(stage, fraction, frame=None):  # noqa: ANN001, ANN202
                progress(stage, fraction) if frame is None else progress(stage, fraction, frame)
                if self.armed and frame and frame[0] >= 1:
                    self.armed = False
                    self.reached.set()
                    self._go.wait(300)

            return runner(request, report)

        return run


def _clip(frames: int, size: tuple[int, int] = (160, 120)) -> bytes:
    """The first ``frames`` of the real clip at ``size``, with its sound for as long."""
    out = io.BytesIO()
    source = SAMPLES / "realshort.mp4"
    with av.open(str(source)) as src, av.open(str(source)) as sound, av.open(out, mode="w", format="mp4") as dst:
        video = dst.add_stream("libx264", rate=30)
        video.width, video.height, video.pix_fmt = *size, "yuv420p"
        audio_in = sound.streams.audio[0]
        audio = dst.add_stream("aac", rate=audio_in.rate, layout=audio_in.layout.name)
        for i, frame in enumerate(src.decode(video=0)):
            if i >= frames:
                break
            for packet in video.encode(av.VideoFrame.from_image(frame.to_image().resize(size))):
                dst.mux(packet)
        for packet in video.encode():
            dst.mux(packet)
        for frame in sound.decode(audio=0):
            if frame.time > frames / 30:
                break
            frame.pts = None
            for packet in audio.encode(frame):
                dst.mux(packet)
        for packet in audio.encode():
            dst.mux(packet)
    return out.getvalue()


def _gif(frames: int = 8) -> bytes:
    """The first frames of Newton's cradle, small."""
    with Image.open(SAMPLES / "newtonscradle.gif") as img:
        pictures = []
        for i in range(frames):
            img.seek(i)
            pictures.append(img.convert("RGB").resize((80, 60)))
    out = io.BytesIO()
    pictures[0].save(out, format="GIF", save_all=True, append_images=pictures[1:], duration=80, loop=0)
    return out.getvalue()


@pytest.fixture(scope="module")
def hold() -> HoldAtFrame:
    return HoldAtFrame()


@pytest.fixture(scope="module")
def server(prepared_store: Path, tmp_path_factory: pytest.TempPathFactory, hold: HoldAtFrame):
    # A 1 s limit, so that a 1.5 s clip is refused by the server (not by the page, which checks bytes only).
    with in_process_server(tmp_path_factory.mktemp("page-video"), hold, video_max_seconds=1.0) as s:
        yield s


def _choose(page, name: str, mime: str, data: bytes) -> None:
    page.set_input_files('[data-testid="file-input"]', files=[{"name": name, "mimeType": mime, "buffer": data}])


def test_a_video_is_painted_frame_by_frame_and_plays_with_its_sound(server: InProcessServer, hold: HoldAtFrame,
                                                                     page_factory, tmp_path: Path) -> None:  # noqa: F811
    page = page_factory()
    open_page(page, server)
    assert page.locator("#file-input").get_attribute("accept").endswith("video/mp4,video/quicktime,video/webm,"
                                                                          ".mp4,.m4v,.mov,.webm")
    assert "MP4, MOV or WebM" in page.inner_text('[data-testid="clip-limit"]')
    assert "64 MB and 1 s" in page.inner_text('[data-testid="clip-limit"]')  # the server's limits, from its config
    _choose(page, "walk.mp4", "video/mp4", _clip(FRAMES))
    preview = page.locator('[data-testid="clip-preview"]')
    preview.wait_for(state="visible")  # the clip itself, muted, where a photo would be
    assert page.locator('[data-testid="preview"]').is_hidden()
    assert preview.evaluate("v => v.muted")
    assert page.is_checked('[data-testid="temporal"]')  # "Steady video" shows for a clip, on

    hold.armed = True
    page.click('[data-testid="paint"]')
    assert hold.reached.wait(120), "the clip's first frame was never painted"
    progress = page.locator('[data-testid="progress-text"]', has_text=f"Frame 1 of {FRAMES}")
    progress.wait_for()
    assert "left" in progress.inner_text()  # and the time it will take
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "page-video-progress")
    hold.open()

    page.wait_for_selector("body[data-state='done']", state="attached", timeout=180_000)
    assert page.locator('[data-testid="message"]').is_hidden()
    asked = hold.asked[-1]
    assert asked.temporal is True and not asked.portrait and asked.background is None
    video = page.locator('[data-testid="clip-video"]')
    assert video.is_visible() and video.get_attribute("controls") is not None
    # Nothing to compare or re-blend: the slider and the strength are for pictures.
    assert page.locator('[data-testid="compare"]').is_hidden()
    assert page.locator('[data-testid="strength-row"]').is_hidden()
    played = video.evaluate(PLAY)
    assert played["duration"] > 0 and played["time"] > 0, played
    assert (played["width"], played["height"]) == (160, 120)
    assert f"{FRAMES} frames" in page.inner_text('[data-testid="result-info"]')
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "page-video-result")

    assert page.inner_text('[data-testid="download"]').strip() == "Download MP4"
    with page.expect_download() as info:
        page.click('[data-testid="download"]')
    download = info.value
    assert download.suggested_filename == f"walk-anipaint-{fast_style()}.mp4"
    saved = tmp_path / "painted.mp4"
    download.save_as(saved)
    with av.open(str(saved)) as painted:
        assert len(painted.streams.audio) == 1  # the sound came along
        sound = [f for f in painted.decode(audio=0)]
    assert sound and max(abs(f.to_ndarray()).max() for f in sound) > 0.001
    with av.open(str(saved)) as painted:
        assert len([f for f in painted.decode(video=0)]) == FRAMES


def test_an_animated_gif_comes_back_animated(server: InProcessServer, hold: HoldAtFrame,
                                             page_factory) -> None:  # noqa: F811
    page = page_factory()
    open_page(page, server)
    _choose(page, "cradle.gif", "image/gif", _gif())
    page.wait_for_selector('[data-testid="preview"]:visible')  # the animation itself
    page.wait_for_selector('[data-testid="clip-note"]:visible')  # a moving picture is a clip
    page.click('label[for="temporal"]')  # each frame on its own: the server is told so
    assert not page.is_checked('[data-testid="temporal"]')
    page.click('[data-testid="paint"]')
    page.wait_for_selector("body[data-state='done']", state="attached", timeout=180_000)
    assert hold.asked[-1].temporal is False
    picture = page.locator('[data-testid="clip-picture"]')
    assert picture.is_visible() and page.locator('[data-testid="compare"]').is_hidden()
    assert picture.evaluate("img => img.naturalWidth") == 80
    assert page.inner_text('[data-testid="download"]').strip() == "Download GIF"
    with page.expect_download() as info:
        page.click('[data-testid="download"]')
    download = info.value
    assert download.suggested_filename == f"cradle-anipaint-{fast_style()}.gif"
    with Image.open(download.path()) as img:
        assert img.format == "GIF" and img.n_frames == 8 and img.size == (80, 60)


def test_what_a_clip_cannot_have_greys_out_with_why(server: InProcessServer, page_factory) -> None:  # noqa: F811
    page = page_factory()
    open_page(page, server)
    page.set_input_files('[data-testid="file-input"]', str(GROUP_PHOTO))
    page.wait_for_selector('[data-testid="preview"]:visible')
    page.click('label[for="portrait"]')
    assert page.is_checked('[data-testid="portrait"]')
    assert page.locator('[data-testid="clip-note"]').is_hidden()
    assert page.locator('[data-testid="temporal"]').is_hidden()

    _choose(page, "walk.mp4", "video/mp4", _clip(FRAMES))
    note = page.locator('[data-testid="clip-note"]')
    note.wait_for(state="visible")
    assert "for photos" in note.inner_text()
    assert page.is_disabled('[data-testid="portrait"]') and not page.is_checked('[data-testid="portrait"]')
    assert page.is_disabled('[data-testid="background"]')
    # What the server paints in a clip stays: face enhancement, the sizes ("Original" too: the video limits cap it).
    assert page.is_enabled('[data-testid="faces"]') and page.is_enabled("#size-original")
    shot(page, "page-video-options", full_page=False)

    # A photo again: anime faces come back as they were.
    page.set_input_files('[data-testid="file-input"]', str(GROUP_PHOTO))
    note.wait_for(state="hidden")
    assert page.is_enabled('[data-testid="portrait"]') and page.is_checked('[data-testid="portrait"]')

    zh = page_factory(locale="zh-CN")
    open_page(zh, server)
    _choose(zh, "walk.mp4", "video/mp4", _clip(FRAMES))
    zh.wait_for_selector('[data-testid="clip-note"]:visible')
    assert "只用于照片" in zh.inner_text('[data-testid="clip-note"]')
    assert "稳定视频" in zh.inner_text('label[for="temporal"]')


def test_the_servers_refusals_say_why(server: InProcessServer, page_factory) -> None:  # noqa: F811
    page = page_factory()
    open_page(page, server)
    _choose(page, "long.mp4", "video/mp4", _clip(45))  # 1.5 s, over this server's 1 s
    page.click('[data-testid="paint"]')
    message = page.locator('[data-testid="message"]')
    message.wait_for(state="visible")
    assert "too big or too long" in message.inner_text() and "limit here is 1 s" in message.inner_text()

    _choose(page, "cut.mp4", "video/mp4", _clip(FRAMES)[:3000])  # the header says MP4, the rest is gone
    page.wait_for_selector('[data-testid="message"]', state="hidden")
    page.click('[data-testid="paint"]')
    page.locator('[data-testid="message-text"]', has_text="video cannot be read").wait_for()
    assert page.inner_text('[data-testid="message-sub"]')  # the server's reason


def test_the_device_switch_refuses_a_clip_and_offers_the_server(server: InProcessServer, page_factory) -> None:  # noqa: F811
    page = page_factory()
    open_page(page, server)
    page.click('label[for="on-device"]')
    assert page.is_checked('[data-testid="on-device"]')
    sent = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    _choose(page, "walk.mp4", "video/mp4", _clip(FRAMES))
    refusal = page.locator('[data-testid="device-clip"]')
    refusal.wait_for(state="visible")
    assert "server only" in refusal.inner_text()
    assert page.is_disabled('[data-testid="paint"]')
    assert not sent  # nothing was uploaded
    refusal.scroll_into_view_if_needed()
    shot(page, "page-video-device", full_page=False)

    page.click('[data-testid="use-server"]')  # the user's choice: the switch goes off
    refusal.wait_for(state="hidden")
    assert not page.is_checked('[data-testid="on-device"]') and page.is_enabled('[data-testid="paint"]')


def test_phone_width(server: InProcessServer, page_factory) -> None:  # noqa: F811
    page = page_factory(width=390, height=844, mobile=True)
    open_page(page, server)
    _choose(page, "walk.mp4", "video/mp4", _clip(FRAMES))
    page.wait_for_selector('[data-testid="clip-preview"]:visible')
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing sticks out sideways
    shot(page, "page-video-phone")
    page.click('[data-testid="paint"]')
    page.wait_for_selector("body[data-state='done']", state="attached", timeout=180_000)
    video = page.locator('[data-testid="clip-video"]')
    assert video.is_visible() and video.bounding_box()["width"] <= 390
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page, "page-video-phone-result")
