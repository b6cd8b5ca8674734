# pcr_ray developer commands. `make test` and `make demo` create .venv on first use.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS ?= dev,cpu-llm,local

.PHONY: test demo bench lint venv clean docs

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "error: $(PY) not found; set PY=/path/to/python3.11+"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# CPU torch first, so nothing below pulls a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	touch $(STAMP)

# Headless Chromium for the report test (Debian package). Installed when root with apt-get; else the test skips.
$(VENV)/.chromium: $(STAMP)
	@if command -v chromium >/dev/null 2>&1; then touch $@; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium (Debian) for the report test..."; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  && touch $@ || echo "note: chromium could not be installed; the report browser test will be skipped"; \
	else echo "note: chromium not found (apt-get install chromium); the report browser test will be skipped"; fi

venv: $(STAMP)

test: $(STAMP) $(VENV)/.chromium
	$(BIN)/python -m pytest

demo: $(STAMP)
	$(BIN)/pcr-ray demo

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check .

docs: $(STAMP)
	$(BIN)/pcr-ray primitives --markdown > pcr_ray/primitives/PRIMITIVES.md

clean:
	rm -rf $(VENV) outputs multirun .pytest_cache
