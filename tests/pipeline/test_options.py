"""A paint's options are defined once (anipaint.options): the CLI flags, the API form and its OpenAPI description,
the stored job and the library all follow from PaintOptions, and its checks are the same everywhere."""

from __future__ import annotations

import base64
import io
from dataclasses import fields

import pytest
from PIL import Image

from anipaint.cli.main import build_parser
from anipaint.errors import OptionError
from anipaint.options import DEFAULT, PaintOptions, options
from anipaint.service.queue.jobs import JobRequest
from support.service import fast_style, in_process_server, photo_bytes


def test_every_option_is_a_cli_flag_with_its_description() -> None:
    convert = build_parser()._subparsers._group_actions[0].choices["convert"]
    flags = {action.dest: action for action in convert._actions}
    for option in options():
        assert option.name in flags, option.name
        assert option.flag in flags[option.name].option_strings
        assert flags[option.name].help == option.help


def test_the_cli_flags_make_the_options() -> None:
    args = build_parser().parse_args(["convert", "in.jpg", "out.png", "-s", "hayao", "--max-side", "original",
                                      "--no-faces", "--strength", "0.25", "--background-style", "shinkai"])
    from anipaint.cli.main import _paint_options

    assert _paint_options(args) == PaintOptions(style="hayao", max_side=None, faces=False, strength=0.25,
                                                background="shinkai")
    default = _paint_options(build_parser().parse_args(["convert", "in.jpg", "out.png"]))
    assert default == PaintOptions() and default.max_side is DEFAULT


@pytest.mark.parametrize("bad", [{"strength": 1.5}, {"strength": "much"}, {"max_side": "huge"}, {"max_side": 7},
                                 {"faces": "yes"}, {"portrait": None}, {"style": 3}])
def test_bad_options_are_refused_with_a_sentence(bad) -> None:
    with pytest.raises(OptionError) as caught:
        PaintOptions(**bad)
    assert next(iter(bad)).replace("_", " ") in str(caught.value)


def test_a_job_stores_its_options_and_reads_them_back() -> None:
    asked = PaintOptions(style="v3-cute", max_side=None, faces=False, face_style="v3-hayao", strength=0.5,
                         portrait=False, background="v3-shinkai")
    request = JobRequest(data=b"x", options=asked, name="photo")
    again = JobRequest.from_json(request.to_json(), b"x")
    assert again == request
    assert set(request.to_json()) == {f.name for f in fields(PaintOptions)} | {"name"}
    # a job stored before an option existed reads back with that option's default
    old = {k: v for k, v in request.to_json().items() if k != "face_style"}
    assert JobRequest.from_json(old, b"x").options.face_style is None


@pytest.fixture(scope="module")
def server(prepared_store, tmp_path_factory):
    with in_process_server(tmp_path_factory.mktemp("options")) as s:
        yield s


def test_every_option_is_an_api_field_described_in_openapi(server) -> None:
    doc = server.client.get("/openapi.json").json()
    for path in ("/predict", "/api/jobs"):
        ref = doc["paths"][path]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"]
        props = doc["components"]["schemas"][ref.rsplit("/", 1)[-1]]["properties"]
        for option in options():
            assert props[option.name]["description"] == option.help, (path, option.name)
    strength = props["strength"]
    assert (strength["minimum"], strength["maximum"], strength["default"]) == (0.0, 1.0, 1.0)


def test_the_api_checks_the_options_as_the_library_does(server) -> None:
    photo = ("group.jpg", photo_bytes(), "image/jpeg")
    res = server.client.post("/predict", files={"image": photo}, data={"face_style": "no-such-style"})
    assert res.status_code == 400 and "no-such-style" in res.json()["detail"]
    res = server.client.post("/predict", files={"image": photo}, data={"strength": "2"})
    assert res.status_code == 422 and "strength" in res.json()["detail"]
    res = server.client.post("/predict", files={"image": photo},
                             data={"style": fast_style(), "face_style": fast_style(), "max_side": "96",
                                   "strength": "0.5"})
    assert res.status_code == 200, res.text
    painted = Image.open(io.BytesIO(base64.b64decode(res.json()["result"])))
    assert max(painted.size) == 96
