"""Hostile uploads and clients against a real server: decompression bombs in PNG chunks, formats that run an
interpreter, full-resolution work past the operator's budget, slow clients and too many uploads at once."""

from __future__ import annotations

import io
import socket
import struct
import time
import zlib
from pathlib import Path

import pytest
from PIL import Image

from support.service import Gate, InProcessServer, Server, in_process_server, resized_photo, running_server

pytestmark = pytest.mark.timeout(300)
ROUTES = ("/predict", "/api/jobs")


@pytest.fixture(scope="module")
def gate() -> Gate:
    gate = Gate()
    gate.open()  # paints go straight through unless a test closes it
    return gate


@pytest.fixture(scope="module")
def server(prepared_store, tmp_path_factory, gate: Gate):
    """Full resolution up to 1 MP; clients get 2 s per pause in a body; two uploads at once; one painter (behind
    ``gate``) and no waiting slot, so one running job fills the queue."""
    with in_process_server(
        tmp_path_factory.mktemp("uploads"), gate, full_max_pixels=1_000_000, body_timeout=2.0, max_uploads=2,
        jobs=1, queue_size=0,
    ) as s:
        yield s


@pytest.fixture(scope="module")
def header_server(prepared_store, tmp_path_factory):
    """A real ``python -m anipaint.service`` giving clients 1 s for headers: that timeout is the uvicorn protocol
    ``serve()`` configures, which the in-process server does not use."""
    with running_server(tmp_path_factory.mktemp("uploads"), header_timeout=1) as s:
        yield s


def _post(server: Server | InProcessServer, route: str, image: bytes, name: str = "x.png", **fields):
    data = {"faces": "false", **{k: str(v) for k, v in fields.items()}}
    return server.client.post(route, files={"image": (name, image, "application/octet-stream")}, data=data)


def _detail(res) -> str:
    assert res.headers["content-type"].startswith("application/json"), res.text
    return res.json()["detail"]


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def _png_with(kind: bytes, body: bytes) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 120, 80)).save(buf, format="PNG")
    png = buf.getvalue()
    return png[:33] + _chunk(kind, body) + png[33:]  # right after IHDR


def test_png_chunk_bombs_are_refused(server: InProcessServer) -> None:
    inflates = zlib.compress(b"\0" * 50_000_000, 9)  # ~48 KB that inflates to 50 MB
    for bomb in (_png_with(b"zTXt", b"comment\0\0" + inflates), _png_with(b"iCCP", b"profile\0\0" + inflates)):
        assert len(bomb) < 60_000
        for route in ROUTES:
            res = _post(server, route, bomb)
            assert res.status_code == 413, (route, res.status_code, res.text)
            assert "metadata" in _detail(res)


def test_only_picture_formats_are_accepted(server: InProcessServer) -> None:
    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 64 64\n0 0 moveto 64 64 lineto stroke\nshowpage\n%%EOF\n"
    pdf = b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
    buf = io.BytesIO()
    Image.new("RGB", (64, 64)).save(buf, format="TGA")  # readable by Pillow, but not a format we offer
    for name, data in (("a.eps", eps), ("a.ps", eps.replace(b" EPSF-3.0", b"")), ("a.pdf", pdf),
                       ("a.tga", buf.getvalue())):
        for route in ROUTES:
            res = _post(server, route, data, name=name)
            assert res.status_code == 415, (name, route, res.status_code, res.text)
            assert "JPEG" in _detail(res)


def _ftex(dxt1: bool) -> bytes:
    """A 128×128 FTEX texture as Pillow's own test images ftex_dxt1.ftc and ftex_uncompressed.ftu are laid out:
    Pillow reads the format, and its opener closes the file it was given while it reads the header."""
    data = bytes(128 * 128 // 2) if dxt1 else bytes(range(256)) * (128 * 128 * 3 // 256)
    header = b"FTEX" + struct.pack("<i2i2i2i", 1, 128, 128, 8, 1, 0 if dxt1 else 1, 32)
    return header + struct.pack("<i", len(data)) + data


def test_a_file_whose_reader_closes_the_upload_is_415(server: InProcessServer) -> None:
    for name, data in (("ftex_dxt1.ftc", _ftex(dxt1=True)), ("ftex_uncompressed.ftu", _ftex(dxt1=False))):
        assert Image.open(io.BytesIO(data)).format == "FTEX"  # a picture to Pillow, not one we offer
        for route in (*ROUTES, "/api/preview"):
            res = _post(server, route, data, name=name)
            assert res.status_code == 415, (name, route, res.status_code, res.text)
            assert "JPEG" in _detail(res)
    assert _post(server, "/predict", resized_photo(200), max_side=64).status_code == 200  # the server is fine


def test_a_broken_form_is_a_documented_400(server: InProcessServer) -> None:
    document = server.client.get("/openapi.json").json()
    for route in (*ROUTES, "/api/preview"):
        res = server.client.post(route, content=b"--xyz\r\nContent-Disposition: form-data\r\n\r\nno end",
                                 headers={"content-type": "multipart/form-data; boundary=xyz"})
        assert res.status_code == 400, (route, res.status_code, res.text)
        assert _detail(res)
        assert "400" in document["paths"][route]["post"]["responses"], route


def _flat_png(side: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (side, side), (240, 200, 210)).save(buf, format="PNG")
    return buf.getvalue()


def test_full_resolution_has_a_pixel_budget(server: InProcessServer) -> None:
    big = _flat_png(1200)  # 1.44 MP in a few KB
    for route in ROUTES:
        res = _post(server, route, big, max_side="original", style="v2-hayao")
        assert res.status_code == 413, res.text
        assert "full resolution" in _detail(res) and "max_side" in _detail(res)
    capped = _post(server, "/predict", big, max_side="256", style="v3-cute")
    assert capped.status_code == 200, capped.text


def test_full_resolution_needs_scratch_space(prepared_store, tmp_path: Path) -> None:
    gate = Gate()  # closed: only the admission of the accepted job is checked, not its paint
    with in_process_server(tmp_path, gate, scratch_reserve_bytes=10**18) as tight:
        res = _post(tight, "/api/jobs", _flat_png(1200), max_side="original", style="v2-hayao")
        assert res.status_code == 507, res.text
        assert "scratch space" in _detail(res) and "/" not in _detail(res)
        assert int(res.headers["retry-after"]) > 0
        small = _post(tight, "/api/jobs", _flat_png(600), max_side="original", style="v2-hayao")
        assert small.status_code == 202, small.text  # under 1 MP it is painted in one pass, without scratch
        tight.client.delete(f"/api/jobs/{small.json()['id']}")  # not painted while the server stops


def _connect(server: Server | InProcessServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return sock


def _closed_within(sock: socket.socket, seconds: float) -> bytes:
    """What the server sent before closing; fails if it keeps the connection open longer than ``seconds``."""
    sock.settimeout(seconds)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except TimeoutError:
        pytest.fail(f"the server kept a slow connection open for {seconds} s (got {got[:80]!r})")
    finally:
        sock.close()
    return got


def test_slow_headers_are_cut_off(header_server: Server) -> None:
    server = header_server
    socks = [_connect(server) for _ in range(40)]
    for sock in socks:
        sock.sendall(b"POST /api/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; b")
    t0 = time.monotonic()
    for sock in socks:
        _closed_within(sock, 6)
    assert time.monotonic() - t0 < 6
    assert server.client.get("/healthz").status_code == 200


def _stalled_upload(server: Server | InProcessServer, route: str = "/api/jobs", length: int = 100_000) -> socket.socket:
    sock = _connect(server)
    sock.sendall(
        f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
        f"Content-Length: {length}\r\n\r\n".encode()
        + b'--b\r\nContent-Disposition: form-data; name="image"; filename="a.jpg"\r\n\r\n\xff\xd8'
    )
    return sock


def test_uploads_at_once_are_capped_and_a_stalled_body_times_out(server: InProcessServer) -> None:
    stalled = [_stalled_upload(server) for _ in range(2)]
    time.sleep(0.3)
    third = _post(server, "/api/jobs", resized_photo(200))
    assert third.status_code == 503 and "uploads" in _detail(third), third.text
    assert int(third.headers["retry-after"]) > 0
    for sock in stalled:
        answer = _closed_within(sock, 8)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b'"detail"' in answer
    assert _post(server, "/predict", resized_photo(200), max_side=64).status_code == 200  # free again


def test_a_full_queue_answers_before_the_body_is_read(server: InProcessServer, gate: Gate) -> None:
    gate.close()
    held = _post(server, "/api/jobs", resized_photo(200), max_side=64)
    assert held.status_code == 202, held.text
    try:
        gate.wait_held(1)  # the one painter holds it and there is no waiting slot: the queue is full
        sock = _stalled_upload(server, "/predict", length=15_000_000)  # headers only: 15 MB announced, not sent
        answer = _closed_within(sock, 5)
        assert answer.startswith(b"HTTP/1.1 503") and b"retry-after" in answer.lower(), answer[:300]
    finally:
        server.client.delete(f"/api/jobs/{held.json()['id']}")
        gate.open()
