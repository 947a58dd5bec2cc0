"""The OpenAPI document tells the truth: its style enums list what this server paints, an empty picture is refused
as the document says, and schemathesis (every phase, every check) finds nothing against the real app."""

from __future__ import annotations

import collections
import dataclasses
import io
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from anipaint.models.registry import ALIASES, EXTRA_SOURCES, get_style
from support.service import fast_style, in_process_server

pytestmark = pytest.mark.timeout(300)
CONFIG = Path(__file__).with_name("schemathesis.toml")
EXAMPLES = 30  # per operation and phase (the coverage phase makes every case the document defines)


def slim_store(root: Path, style_ids: tuple[str, ...]) -> dict[str, Path]:
    """Settings for a store that has only ``style_ids`` (converted, copied from the session store) and a sources
    folder with only their files, the face detector's and the segmenter's: a server that lacks every other style."""
    from anipaint.models import store
    from anipaint.settings import reload_settings

    session = reload_settings()
    home, sources = root / "home", root / "slim" / "sources"
    sources.mkdir(parents=True)
    (sources.parent / "samples").symlink_to(session.samples_dir)
    slim = dataclasses.replace(session, home=home, sources=sources)
    for style_id in style_ids:
        shutil.copytree(store.style_dir(get_style(style_id), session), store.style_dir(get_style(style_id), slim))
    for name in ("face", "segmenter"):
        shutil.copytree(session.models_dir / name, home / "models" / name)
    for source in [*EXTRA_SOURCES.values(), *(src for i in style_ids for src in get_style(i).sources)]:
        (sources / source.path).parent.mkdir(parents=True, exist_ok=True)
        (sources / source.path).symlink_to(Path(session.sources) / source.path)
    return {"home": home, "sources": sources}


def small_png(side: int = 16) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (side, side), (200, 120, 40)).save(buf, format="PNG")
    return buf.getvalue()


def paint_form(document: dict, path: str) -> dict:
    """The multipart form's properties of a paint route."""
    ref = document["paths"][path]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"]
    return document["components"]["schemas"][ref.rsplit("/", 1)[-1]]["properties"]


def _route(url: str) -> str:
    path = re.sub(r"^https?://[^/]+", "", url).split("?")[0]
    path = re.sub(r"^/api/jobs/[^/]+", "/api/jobs/{job_id}", path)
    return re.sub(r"^/api/styles/[^/]+/thumbnail$", "/api/styles/{style_id}/thumbnail", path)


@pytest.fixture(scope="module")
def slim(prepared_store, tmp_path_factory):
    """An in-process server whose store has three styles: the quickest, the portrait face model and AnimeGAN v2
    (whose network needs 8x8 pixels: smaller pictures are padded); small pictures by default, no queue limit to hit."""
    from anipaint.settings import reload_settings

    root = tmp_path_factory.mktemp("slim")
    styles = (fast_style(), reload_settings().portrait_face_style, "v2-hayao")
    with in_process_server(root, max_side=64, faces=False, queue_size=1000, **slim_store(root, styles)) as server:
        server.styles = styles
        yield server


@pytest.fixture(scope="module")
def schemathesis_run(slim, tmp_path_factory):
    """One schemathesis run over every operation: (exit code, its output, the HAR's entries)."""
    pytest.importorskip("schemathesis")
    cli = shutil.which("schemathesis") or str(Path(sys.executable).with_name("schemathesis"))
    work = tmp_path_factory.mktemp("schemathesis")
    har = work / "run.har"
    t0 = time.monotonic()
    proc = subprocess.run(
        [cli, "--config-file", str(CONFIG), "--no-color", "run", f"{slim.url}/openapi.json",
         "--checks", "all", "--max-examples", str(EXAMPLES), "--seed", "16", "--workers", "1",
         "--phases", "examples,coverage,fuzzing,stateful", "--generation-database", "none",
         "--request-timeout", "30", "--report", "har", "--report-har-path", str(har)],
        capture_output=True, text=True, timeout=240, cwd=work,  # its cache stays out of the checkout
    )
    entries = json.loads(har.read_text())["log"]["entries"] if har.is_file() else []
    by_status = collections.Counter(e["response"]["status"] for e in entries)
    by_route = collections.Counter((e["request"]["method"], _route(e["request"]["url"]), e["response"]["status"])
                                   for e in entries)
    print(f"schemathesis: {time.monotonic() - t0:.1f} s, requests by status:", dict(sorted(by_status.items())))
    for (method, path, status), count in sorted(by_route.items()):
        if status != 405:  # unsupported_method's probes: one per method and path
            print(f"  {method} {path} {status}: {count}")
    summary = proc.stdout[proc.stdout.find("Examples ("):] if "Examples (" in proc.stdout else proc.stdout
    print(summary[:1500])
    return proc, by_status, by_route


def test_schemathesis_all_checks_pass(schemathesis_run) -> None:
    proc, by_status, _ = schemathesis_run
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert sum(by_status.values()) > 300 and not any(s >= 500 for s in by_status), by_status
    assert by_status[200] and by_status[202], by_status  # pictures were painted, jobs queued


def test_the_stateful_phase_follows_the_links_with_real_ids(slim, schemathesis_run) -> None:
    created = slim.client.get("/openapi.json").json()["paths"]["/api/jobs"]["post"]["responses"]["202"]
    links = {name: (link["operationRef"], link["parameters"]) for name, link in created["links"].items()}
    assert links == {
        "GetJob": ("#/paths/~1api~1jobs~1%7Bjob_id%7D/get", {"job_id": "$response.body#/id"}),
        "GetJobResult": ("#/paths/~1api~1jobs~1%7Bjob_id%7D~1result/get", {"job_id": "$response.body#/id"}),
        "DeleteJob": ("#/paths/~1api~1jobs~1%7Bjob_id%7D/delete", {"job_id": "$response.body#/id"}),
    }
    _, _, by_route = schemathesis_run
    assert "Stateful (" in schemathesis_run[0].stdout
    # a job's routes answer 200 only for an id that POST /api/jobs gave: made-up ids are 404
    for method, path in (("GET", "/api/jobs/{job_id}"), ("DELETE", "/api/jobs/{job_id}"),
                         ("GET", "/api/jobs/{job_id}/result")):
        assert by_route[(method, path, 200)] > 0, (method, path, by_route)


def test_the_style_enums_list_what_this_server_paints(slim) -> None:
    from anipaint.models import availability
    from anipaint.settings import reload_settings

    document = slim.client.get("/openapi.json").json()
    listed = slim.client.get("/api/styles").json()
    here = {st["id"] for st in listed if st["available"]}
    assert here == set(slim.styles)
    aliases = {alias for alias, target in ALIASES.items() if target in here}
    for path in ("/predict", "/api/jobs"):
        form = paint_form(document, path)
        assert set(form["style"]["enum"]) == set(form["face_style"]["enum"]) == here | aliases
        painting = {st["id"] for st in listed if st["available"] and st["kind"] != "face"}
        assert set(form["background"]["enum"]) == painting | aliases
    # every name listed paints; a style in the table but not here is refused as documented
    for name in paint_form(document, "/predict")["style"]["enum"]:
        res = slim.client.post("/predict", files={"image": ("p.png", small_png(), "image/png")}, data={"style": name})
        assert res.status_code == 200, (name, res.text)
    missing = next(st.style.id for st in availability.style_status(reload_settings()) if st.style.id not in here)
    res = slim.client.post("/predict", files={"image": ("p.png", small_png(), "image/png")}, data={"style": missing})
    assert res.status_code == 400 and missing in res.json()["detail"]
    assert "400" in document["paths"]["/predict"]["post"]["responses"]


def test_the_full_store_lists_its_available_styles_only(prepared_store) -> None:
    from anipaint.models import availability
    from anipaint.service.app import create_app
    from anipaint.settings import reload_settings

    settings = reload_settings()
    document = create_app(settings).openapi()
    ids = {st.style.id for st in availability.style_status(settings) if st.available}
    enum = set(paint_form(document, "/api/jobs")["style"]["enum"])
    assert enum - set(ALIASES) == ids
    if "v2-celeba-distill" not in ids:  # its .pt file is not in the sources folder
        assert not {"v2-celeba-distill", "celeba"} & enum


def test_the_document_is_rebuilt_when_a_style_arrives(prepared_store, tmp_path: Path) -> None:
    from anipaint.service.app import create_app
    from anipaint.settings import reload_settings

    overrides = slim_store(tmp_path, (fast_style(),))
    settings = dataclasses.replace(reload_settings(), **overrides)
    app = create_app(settings)
    assert "v3-shinkai" not in paint_form(app.openapi(), "/predict")["style"]["enum"]
    for source in get_style("v3-shinkai").sources:  # `anipaint models add` or `fetch` while the server runs
        (overrides["sources"] / source.path).parent.mkdir(parents=True, exist_ok=True)
        (overrides["sources"] / source.path).symlink_to(Path(reload_settings().sources) / source.path)
    assert "v3-shinkai" in paint_form(app.openapi(), "/predict")["style"]["enum"]


def test_an_empty_image_is_answered_as_documented(slim) -> None:
    document = slim.client.get("/openapi.json").json()
    for path in ("/predict", "/api/jobs"):
        image = paint_form(document, path)["image"]
        assert image["minLength"] == 1 and image["format"] == "binary"
        res = slim.client.post(path, files={"image": ("empty.jpg", b"", "image/jpeg")})
        assert res.status_code == 415 and res.json() == {"detail": "the upload is empty; choose a photo"}
        documented = document["paths"][path]["post"]["responses"]["415"]
        assert documented["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorOut"}
    assert document["components"]["schemas"]["ErrorOut"]["properties"]["detail"]["type"] == "string"


def test_a_picture_of_a_few_pixels_is_painted_by_every_style(slim) -> None:
    """Found by schemathesis: a 1x1 PNG in AnimeGAN v2 was a 500 (its network needs 8x8 pixels)."""
    for side in (1, 4):
        tiny = ("tiny.png", small_png(side), "image/png")
        for style in ("v2-hayao", fast_style()):
            res = slim.client.post("/predict", files={"image": tiny}, data={"style": style})
            assert res.status_code == 200 and res.json()["width"] == side, (side, style, res.text)
