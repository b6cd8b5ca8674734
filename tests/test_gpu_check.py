"""cluster/gpu_check.py's logic on CPU at test size (`--device cpu`): every torch-tier step runs and passes, a
failing step is reported without stopping the others, and the JSON and table are written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "cluster"))

import gpu_check  # noqa: E402


@pytest.mark.slow
def test_the_torch_tier_runs_on_cpu_and_writes_its_report(tmp_path):
    proc = subprocess.run([str(REPO / "cluster" / "gpu_check.sh"), "--device", "cpu", "--tier", "torch",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHON": sys.executable})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    steps = report["steps"]
    assert list(steps) == ["env", "prm_train", "prm_bf16", "shared_rate", "sft_steps"] and report["ok"]
    assert steps["prm_train"]["fp32"]["loss_last"] < steps["prm_train"]["fp32"]["loss_first"]
    assert steps["prm_bf16"]["max_abs_diff"] <= 0.05
    for run in ("full", "lora_r16"):  # pcr_ray's own fine-tuning loop, full and LoRA
        assert steps["sft_steps"][run]["loss_last"] < steps["sft_steps"][run]["loss_first"]
        assert steps["sft_steps"][run]["tokens_per_s"] > 0
    assert set(steps["shared_rate"]["candidates_per_s"]) == {"fp32", "bf16"}
    assert "| prm_train | torch | ok |" in proc.stdout


def test_a_failing_step_is_reported_and_the_others_still_run(tmp_path, monkeypatch):
    def broken(args):
        raise RuntimeError("no CUDA device")

    monkeypatch.setitem(gpu_check.TIERS, "torch", [("env", broken), ("after", lambda args: {"ran": True})])
    rc = gpu_check.main(["--device", "cpu", "--tier", "torch", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert rc == 1 and not report["ok"]
    assert report["steps"]["env"]["ok"] is False and "no CUDA device" in report["steps"]["env"]["error"]
    assert report["steps"]["after"] == {"tier": "torch", "ok": True, "ran": True,
                                        "seconds": report["steps"]["after"]["seconds"]}
