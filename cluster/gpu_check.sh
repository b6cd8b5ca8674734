#!/usr/bin/env bash
# GPU check, in two tiers, each step run and reported even when another fails; a table and a JSON at the end
# (cluster/gpu_check.py says what each step measures). About 5-10 minutes on one GPU.
#
#   cluster/gpu_check.sh                      # both tiers
#   cluster/gpu_check.sh --tier torch         # a bare GPU machine: CUDA torch, transformers, peft, trl (with datasets),
#                                             #   pint and sympy; no Ray, no vLLM, no network
#   cluster/gpu_check.sh --tier cluster       # a node of the cluster image (the `gpu` extra): vLLM tests, paper_table
#   cluster/gpu_check.sh --device cpu --tier torch   # the same logic on CPU at test size (what the tests run)
#
# PYTHON=... picks the interpreter; OUT=DIR (or --out DIR) keeps gpu_check.json there. Exit status 0 when every
# step passed.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
exec "${PYTHON:-python}" cluster/gpu_check.py "$@"
