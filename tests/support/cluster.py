"""A Celery worker process (`anipaint worker`) for the scale-out tests, with its log."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from support.paths import REPO


class Worker:
    def __init__(self, name: str, redis_url: str, logdir: Path, **overrides: object) -> None:
        self.log_path = logdir / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "ANIPAINT_BROKER_URL": redis_url, "ANIPAINT_JOBS": "1", "PYTHONUNBUFFERED": "1"}
        env.update({f"ANIPAINT_{k.upper()}": str(v) for k, v in overrides.items()})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "anipaint.cli", "worker", "--name", f"{name}@%h"],
            cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while "ready." not in self.log():
            assert self.proc.poll() is None, self.log()
            assert time.monotonic() < deadline, self.log()
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()
