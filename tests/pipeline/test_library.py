"""The one-call library as a developer uses it: ``anipaint.paint`` gives back the type that came in, options are
checked with a sentence, ``paint_video`` paints clips and animated pictures, ``styles`` lists every style, and the
README's Python examples run as written. Real pictures through the real pipeline (v3-cute: the quickest style)."""

from __future__ import annotations

import io
import os
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import anipaint
from anipaint.models.registry import all_styles
from anipaint.settings import Settings
from support.paths import GROUP_PHOTO, REPO

STYLE = "v3-cute"


@pytest.fixture(scope="module")
def photo(prepared_store) -> Image.Image:
    return Image.open(GROUP_PHOTO).convert("RGB").resize((160, 120), Image.Resampling.LANCZOS)


def test_a_path_or_a_picture_gives_a_picture_that_the_painter_would_paint(photo, tmp_path) -> None:
    path = tmp_path / "me.jpg"
    photo.save(path, quality=95)
    painted = anipaint.paint(path, style=STYLE, faces=False)
    assert isinstance(painted, Image.Image) and painted.size == (160, 120)
    same = anipaint.get_painter(STYLE).paint(path, faces=False)
    assert np.array_equal(np.asarray(painted), np.asarray(same))
    from_picture = anipaint.paint(photo, STYLE, faces=False)
    assert isinstance(from_picture, Image.Image) and from_picture.size == photo.size
    assert np.abs(np.asarray(from_picture, float) - np.asarray(photo, float)).mean() > 10  # really painted


def test_bytes_or_a_file_give_encoded_bytes(photo) -> None:
    buf = io.BytesIO()
    photo.save(buf, format="JPEG", quality=95)
    png = anipaint.paint(buf.getvalue(), style=STYLE, faces=False)
    assert isinstance(png, bytes) and png.startswith(b"\x89PNG")
    assert Image.open(io.BytesIO(png)).size == photo.size
    buf.seek(0)
    jpeg = anipaint.paint(buf, style=STYLE, faces=False, encoding="jpeg")
    assert jpeg.startswith(b"\xff\xd8") and Image.open(io.BytesIO(jpeg)).format == "JPEG"


@pytest.mark.parametrize("layout", ["rgb", "rgba", "grey"])
def test_an_array_gives_an_array_of_the_same_layout(photo, layout) -> None:
    rgb = np.asarray(photo)
    array = {"rgb": rgb, "grey": rgb[:, :, 1].copy(),
             "rgba": np.dstack([rgb, np.full(rgb.shape[:2], 255, np.uint8)])}[layout]
    if layout == "rgba":
        array[:40, :40, 3] = 0  # a transparent corner comes back transparent
    out = anipaint.paint(array, style=STYLE, faces=False)
    assert isinstance(out, np.ndarray) and out.dtype == np.uint8 and out.shape == array.shape
    if layout == "rgba":
        assert (out[:40, :40, 3] == 0).all() and (out[60:, 60:, 3] == 255).all()


def test_options_are_checked_with_a_sentence(photo) -> None:
    with pytest.raises(anipaint.OptionError, match="strength must be from 0"):
        anipaint.paint(photo, style=STYLE, strength=3)
    with pytest.raises(anipaint.OptionError, match="unknown option colour; the options are max_side"):
        anipaint.paint(photo, style=STYLE, colour="pink")
    with pytest.raises(anipaint.OptionError, match="encoding must be one of"):
        anipaint.paint(photo, style=STYLE, encoding="tiff")
    with pytest.raises(anipaint.StyleError, match="unknown style 'van-gogh'"):
        anipaint.paint(photo, style="van-gogh")
    with pytest.raises(anipaint.ImageError, match="uint8 of shape"):
        anipaint.paint(np.zeros((8, 8, 3), np.float32), style=STYLE)
    with pytest.raises(anipaint.ImageError, match="not an image, or a format we do not read"):
        anipaint.paint(b"not a picture at all", style=STYLE)
    assert issubclass(anipaint.OptionError, anipaint.AnipaintError)


def test_a_smaller_cap_is_an_option(photo) -> None:
    assert anipaint.paint(photo, style=STYLE, max_side=64, faces=False).size == (64, 48)


def _clip(path: Path, frames: int = 6, size: tuple[int, int] = (96, 64)) -> Path:
    import av

    base = np.asarray(Image.open(GROUP_PHOTO).convert("RGB").resize((size[0] + 2 * frames, size[1])))
    with av.open(str(path), mode="w") as out:
        stream = out.add_stream("libx264", rate=Fraction(12, 1))
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        for i in range(frames):  # a slow pan
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(base[:, 2 * i : 2 * i + size[0]]), format="rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def test_paint_video_paints_a_clip_and_an_animated_picture_with_progress(prepared_store, tmp_path) -> None:
    import av

    heard: list[tuple[int, int]] = []
    facts = anipaint.paint_video(_clip(tmp_path / "clip.mp4"), tmp_path / "out.mp4", style=STYLE,
                                 progress=lambda done, total: heard.append((done, total)))
    assert facts["frames"] == 6 and heard[-1][0] == 6
    with av.open(str(tmp_path / "out.mp4")) as painted:
        assert sum(1 for _ in painted.decode(video=0)) == 6
    frames = [Image.open(GROUP_PHOTO).convert("RGB").resize((80, 60)).rotate(a) for a in (0, 5, 10)]
    frames[0].save(tmp_path / "wave.gif", save_all=True, append_images=frames[1:], duration=100, loop=0)
    facts = anipaint.paint_video(tmp_path / "wave.gif", tmp_path / "wave-anime.gif", style=STYLE, temporal=False)
    assert facts["frames"] == 3 and Image.open(tmp_path / "wave-anime.gif").n_frames == 3
    with pytest.raises(anipaint.ImageError, match="no such file"):
        anipaint.paint_video(tmp_path / "missing.mp4", tmp_path / "x.mp4")


def test_styles_lists_every_style_with_what_it_needs(tmp_path) -> None:
    listed = {s.id: s for s in anipaint.styles()}
    assert set(listed) == {s.id for s in all_styles()}
    hayao = listed["v3-hayao"]
    assert hayao.aliases == ("hayao",) and hayao.title and hayao.licence and hayao.status == "ready"
    empty = Settings(sources=tmp_path / "none", home=tmp_path / "home", offline=True)
    offline = {s.id: s for s in anipaint.styles(empty)}
    assert offline["v3-hayao"].status == "download"
    assert "anipaint models fetch v3-hayao" in offline["v3-hayao"].reason
    online = {s.id: s for s in anipaint.styles(Settings(sources=tmp_path / "none", home=tmp_path / "home"))}
    assert online["v3-hayao"].status == "download" and online["v3-hayao"].reason == "downloads on first use"
    commercial = {s.id: s for s in anipaint.styles(Settings(home=tmp_path / "home", commercial_only=True))}
    assert commercial["v3-hayao"].status == "unavailable" and "commercial" in commercial["v3-hayao"].reason


def test_the_readme_python_examples_run_as_written(prepared_store, tmp_path, monkeypatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), re.S)
    assert blocks, "README.md has no Python example"
    Image.open(GROUP_PHOTO).convert("RGB").resize((384, 256)).save(tmp_path / "me.jpg", quality=92)
    _clip(tmp_path / "clip.mp4")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own examples
    assert (tmp_path / "me-anime.png").is_file()
    if "paint_video" in "".join(blocks):
        assert (tmp_path / "clip-anime.mp4").is_file()
    assert os.environ.get("ANIPAINT_OFFLINE") == "1"  # nothing was downloaded: the session store had it all
