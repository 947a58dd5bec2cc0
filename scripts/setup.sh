#!/usr/bin/env bash
# Create .venv and install anipaint into it (editable). `--test` adds the test-only dependencies.
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ "${1:-}" = "--test" ]; then target='.[test]'; else target='.'; fi
# torch is pinned to 2.13.0 (CPU build) in pyproject.toml; an unpinned torch would pull a multi-GB CUDA build.
.venv/bin/python -m pip install -q -e "$target"
