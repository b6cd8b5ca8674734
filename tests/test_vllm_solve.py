"""`pcr-ray solve ... generator=vllm_tiny` in its own process: the real vLLM engine built in-process by the command.

A module of its own, so that no other module's engine is alive beside this one (two engines at once are about 5 GB
on a 24 GB machine that also runs the main suite); it also holds the suites' memory lock (tests/memory_lock.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("vllm")

from tests.prm_helpers import small_prm_checkpoint  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

# cluster/gpu_check.py points the vLLM tests at a GPU and a real model with generator overrides here
GEN_OVERRIDES = tuple(os.environ.get("PCR_RAY_VLLM_OVERRIDES", "").split())


def test_solve_cli_prints_a_trace_and_an_answer_line(heavy_memory, tmp_path) -> None:  # noqa: ARG001
    """`pcr-ray solve "..." generator=vllm_tiny` in its own process (its own engine, built in-process)."""
    text = "A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go?"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "pcr_ray", "solve", text, "generator=vllm_tiny", *GEN_OVERRIDES,
           f"prm.checkpoint={small_prm_checkpoint()}", "search.k=2",
           "search.beam_width=1", "search.max_steps=2", "search.max_retries=1", "search.max_backtracks=0"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()  # vLLM's own log lines come first
    start = next(i for i, line in enumerate(lines) if line.startswith("problem: A car"))
    assert lines[start + 1].startswith("givens:"), lines[start:]
    answers = [line for line in lines[start:] if line.startswith("answer: ")]  # vLLM's shutdown log may follow
    assert len(answers) == 1 and any(line.startswith("stats: ") for line in lines[start:]), proc.stdout[-2000:]
    assert (proc.returncode == 0) == (answers[0] != "answer: none"), answers[0]
