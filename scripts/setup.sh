#!/usr/bin/env bash
# Create .venv and install anipaint into it (editable). `--test` adds the test-only dependencies.
# Idempotent and quick the second time: a stamp records what pyproject.toml said when it last installed.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [ "${1:-}" = "--test" ]; then target='.[test]'; else target='.'; fi
[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=.venv/.anipaint-installed
want="$target $(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ -f "$stamp" ] && grep -qxF "$want" "$stamp"; then exit 0; fi
# Editable installs from pyproject.toml need pip >= 21.3; upgrade only an older one (it costs a download).
.venv/bin/python - <<'PY' || .venv/bin/python -m pip install -q --upgrade pip
import sys
from importlib.metadata import version
sys.exit(0 if tuple(int(p) for p in version("pip").split(".")[:2]) >= (21, 3) else 1)
PY
# torch is pinned to 2.13.0 (CPU build) in pyproject.toml; an unpinned torch would pull a multi-GB CUDA build.
.venv/bin/python -m pip install -q -e "$target"
echo "$want" >> "$stamp"
[ "$target" = '.' ] || echo ". ${want#* }" >> "$stamp"  # the test extras include the plain install
