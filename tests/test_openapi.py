"""The OpenAPI document tells the truth: schemathesis with every check against a real server, bounded."""

from __future__ import annotations

import collections
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest_service import running_server

pytestmark = pytest.mark.timeout(300)
CONFIG = Path(__file__).with_name("schemathesis.toml")
MAX_SECONDS = 90
EXAMPLES = 30  # per operation and phase; the whole run is capped at MAX_SECONDS


def test_schemathesis_all_checks_pass(prepared_store, tmp_path: Path) -> None:
    pytest.importorskip("schemathesis")
    cli = shutil.which("schemathesis") or str(Path(sys.executable).with_name("schemathesis"))
    har = tmp_path / "run.har"
    with running_server(tmp_path) as server:
        proc = subprocess.run(
            [cli, "--config-file", str(CONFIG), "--no-color", "run", f"{server.url}/openapi.json",
             "--checks", "all", "--max-examples", str(EXAMPLES), "--seed", "16", "--workers", "1",
             "--phases", "examples,coverage,fuzzing,stateful", "--generation-database", "none",
             "--max-time", str(MAX_SECONDS), "--request-timeout", "30",
             "--report", "har", "--report-har-path", str(har)],
            capture_output=True, text=True, timeout=280, cwd=tmp_path,  # its cache stays out of the checkout
        )
    statuses = collections.Counter(e["response"]["status"] for e in json.loads(har.read_text())["log"]["entries"])
    print("schemathesis requests by status:", dict(sorted(statuses.items())))
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert sum(statuses.values()) > 100 and not any(s >= 500 for s in statuses), statuses
