#!/usr/bin/env bash
# Create .venv and install anipaint into it (editable) with every extra: the page and API, the scaled-out queue,
# watch mode. `--test` adds the test-only dependencies (and TypeScript, package.json's devDependencies, which checks
# the page's modules).
# Idempotent and quick the second time: a stamp records what pyproject.toml said when it last installed.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [ "${1:-}" = "--test" ]; then target='.[test]'; else target='.[all]'; fi
[ -x .venv/bin/python ] || "$python" -m venv .venv

# The in-browser painter's runtime (onnxruntime-web, pinned in package-lock.json): installed from the npm registry
# and only the files the page loads copied into the static folder, so the app (and the wheel) serve it themselves.
# Stamped like the pip install below: a second run with the same lock file does nothing. The test setup installs
# the dev dependencies too (TypeScript, and axe-core for the page's accessibility test), and its stamp line says
# "dev": a plain run after it keeps that fuller install (`npm ci` would start node_modules afresh), a test run after
# a plain one installs again.
vendor=anipaint/service/static/vendor/ort
ort_files="ort.min.mjs ort-wasm-simd-threaded.jsep.mjs ort-wasm-simd-threaded.jsep.wasm"
ort_stamp=node_modules/.anipaint-vendored
ort_lock="$(sha256sum package-lock.json | cut -d' ' -f1) $ort_files"
if [ "$target" = '.[all]' ]; then
  ort_want="$ort_lock runtime" npm_omit='--omit=dev'
else
  ort_want="$ort_lock dev" npm_omit=''
fi
if ! { [ -f "$ort_stamp" ] && grep -qxF "$ort_want" "$ort_stamp" && [ -f "$vendor/ort.min.mjs" ]; }; then
  command -v npm >/dev/null || { echo "setup: npm (Node.js 18+) is needed for the in-browser painter's runtime" >&2; exit 1; }
  npm ci $npm_omit --ignore-scripts --no-audit --no-fund --loglevel=error
  rm -rf "$vendor" && mkdir -p "$vendor"
  for f in $ort_files; do cp "node_modules/onnxruntime-web/dist/$f" "$vendor/"; done
  echo "$ort_want" > "$ort_stamp"
  [ "$target" = '.[all]' ] || echo "$ort_lock runtime" >> "$ort_stamp" # the dev install includes the runtime's
fi

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
[ "$target" = '.[all]' ] || echo ".[all] ${want#* }" >> "$stamp"  # the test extras include every extra
