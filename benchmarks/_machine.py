"""Shared benchmark helpers: the machine, the summary JSON (command, git revision) in the cache and, asked, results/."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))


def machine_info() -> dict:
    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/cpuinfo") as fh:
            flags = next((line.split(":", 1)[1].split() for line in fh if line.startswith("flags")), [])
        info["cpu_int8_flags"] = sorted(f for f in flags if f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni",
                                                                   "amx_int8", "amx_bf16", "avx512_bf16"))
    except OSError:
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()  # the kernels torch dispatches to
    for mod in ("torch", "ray", "pint", "transformers"):
        m = sys.modules.get(mod)
        if m is not None:
            info[mod] = getattr(m, "__version__", "?")
    return info


def git_revision() -> str:
    """The checkout's commit, with `+dirty` when tracked files differ from it; `unknown` outside a git checkout."""
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{rev}+dirty" if dirty else rev


def records_path(name: str) -> Path:
    """Where a benchmark's per-problem records go: <cache>/bench/NAME_records.jsonl (never committed)."""
    from pcr_ray.paths import cache_dir

    path = cache_dir() / "bench" / f"{name}_records.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write_result(name: str, result: dict, commit: bool | None = None) -> Path:
    """Write the summary JSON (command line, git revision) to <cache>/bench/NAME.json: a run's record.

    commit=True, or commit=None with PCR_RAY_BENCH_RESULTS=1 in the environment, also writes
    benchmarks/results/NAME.json, the committed copy: only for a record the docs cite.
    """
    from pcr_ray.paths import cache_dir

    result.setdefault("command", " ".join(["python", *sys.argv]))
    result.setdefault("git_revision", git_revision())
    text = json.dumps(result, indent=2, sort_keys=True, default=str) + "\n"
    if commit is None:
        commit = os.environ.get("PCR_RAY_BENCH_RESULTS") == "1"
    targets = [cache_dir() / "bench" / f"{name}.json"] + ([RESULTS / f"{name}.json"] if commit else [])
    for path in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return targets[-1]
