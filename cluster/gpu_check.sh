#!/usr/bin/env bash
# GPU check of the vLLM path: the real-engine tests and a small paper_table evaluation on this machine's GPU.
#
#   cluster/gpu_check.sh MODEL [LIMIT]
#
# MODEL: a model folder (or hub name) vLLM can load, e.g. /models/Qwen2.5-Math-1.5B-Instruct; LIMIT: problems of
# the evaluation (default 20). Needs an NVIDIA GPU, and the package with the `gpu` extra in the Python on PATH
# (pip install -e ".[gpu,dev,local]"); PYTHON=... picks another interpreter. Prints what it measured: the tests'
# outcome and time, the evaluation's accuracy table, its wall time, and the engine actor's calls, tokens and
# tokens/s. Exit status: non-zero when a step fails.
set -euo pipefail
MODEL=${1:?usage: cluster/gpu_check.sh MODEL_FOLDER_OR_NAME [LIMIT]}
LIMIT=${2:-20}
PY=${PYTHON:-python}
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-$(mktemp -d /tmp/pcr_ray_gpu_check.XXXX)}

command -v nvidia-smi >/dev/null || { echo "gpu_check: no nvidia-smi: this needs an NVIDIA GPU" >&2; exit 2; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PY" - <<'PY'
import torch, vllm
assert torch.cuda.is_available(), "torch sees no CUDA device (the CPU torch build?): install the gpu extra"
print(f"vllm {vllm.__version__}, torch {torch.__version__}, {torch.cuda.device_count()} GPU(s): "
      f"{torch.cuda.get_device_name(0)}")
PY

# The same engine code as generator=vllm_tiny on CPU, pointed at the GPU and the given model.
GEN="generator=qwen_math_1_5b generator.model=$MODEL"
export PCR_RAY_VLLM_OVERRIDES="generator.device=cuda generator.model=$MODEL generator.dtype=auto generator.enforce_eager=false"

echo "== vLLM tests on the GPU ($MODEL)"
t0=$(date +%s)
"$PY" -m pytest -m vllm tests/test_vllm_engine.py -q -p no:cacheprovider 2>&1 | tail -n 25
echo "vllm tests: $(( $(date +%s) - t0 )) s"

echo "== paper_table, $LIMIT problems, every method ($MODEL)"
t0=$(date +%s)
"$PY" -m pcr_ray.evaluate experiment=paper_table $GEN prm=minilm_csp prm.checkpoint=quick \
    dataset.limit="$LIMIT" ray.address=null actors.generator.replicas=1 actors.prm.num_gpus=0 \
    pipeline.num_search_workers=8 pipeline.progress=false run_dir="$OUT/paper_table"
echo "evaluation: $(( $(date +%s) - t0 )) s"
"$PY" - "$OUT/paper_table/metrics.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
print(f"wall {m.get('wall_s')} s, pipeline {m.get('pipeline_s')} s, {m.get('problems_per_s')} problems/s")
for name, a in (m.get("actors") or {}).items():
    st = a.get("stats") or {}
    if st.get("tokens"):
        print(f"{name}: {st['calls']} calls, {st['candidates']} candidates, {st['tokens']} tokens, "
              f"{st['tokens'] / max(st['seconds'], 1e-9):.0f} tokens/s (summed over concurrent calls), "
              f"{st.get('truncated', 0)} cut at max_tokens, max {a.get('max_in_flight')} calls in flight")
PY
echo "results: $OUT/paper_table"
