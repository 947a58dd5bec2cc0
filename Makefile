# Two commands a new machine needs: `make serve` (set up, serve the page at once; the models are converted and
# optimised in the background) and `make test`. `make models` does all the model work up front instead.
.PHONY: setup setup-test models serve test test-fast lint bench docs

setup:
	bash scripts/setup.sh

setup-test:
	bash scripts/setup.sh --test

models: setup
	.venv/bin/anipaint models prepare

serve: setup
	.venv/bin/anipaint serve

test: setup-test
	.venv/bin/ruff check .
	node_modules/.bin/tsc --noEmit -p tsconfig.json
	.venv/bin/lint-imports
	.venv/bin/python -m pytest -q -ra --durations=30 -n auto

# `-n auto`: one pytest-xdist worker per core, each pinned to its own (tests/conftest.py), sharing one store.
# The inner loop: everything but engine builds, TensorFlow references, the page in Chromium, the megapixel memory
# probes, the Celery cluster, the installed wheel and the schemathesis fuzzing run (`make test` runs them all).
test-fast: setup-test
	.venv/bin/ruff check .
	node_modules/.bin/tsc --noEmit -p tsconfig.json
	.venv/bin/python -m pytest -q -ra --durations=30 -n auto \
	  -m "not builds and not tensorflow and not browser and not memory and not scaleout and not wheel and not fuzz"

bench: models
	.venv/bin/anipaint bench --json artifacts/bench.json

# docs/configuration.md is generated from the Settings class (tests/pipeline/test_settings.py checks it is current).
docs: setup
	.venv/bin/python -c "from anipaint.settings import reference; print(reference(), end='')" > docs/configuration.md
