"""A benchmark's provenance (machine, git revision) and where its summary JSON and per-problem records go."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from pcr_ray.paths import PACKAGE_DIR, cache_dir


def machine_info() -> dict[str, Any]:
    """The platform, CPU (model, int8/bf16 flags), Python and the versions of the loaded heavy libraries."""
    info: dict[str, Any] = {
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
    """The commit of the checkout pcr_ray is imported from, with `+dirty` when tracked files differ from it;
    `unknown` for an installed package (no checkout around it)."""
    root = PACKAGE_DIR.parent
    if not (root / ".git").exists():
        return "unknown"
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{rev}+dirty" if dirty else rev


def records_path(name: str) -> Path:
    """Where a benchmark's per-problem records go: <cache>/bench/NAME_records.jsonl (never committed)."""
    path = cache_dir() / "bench" / f"{name}_records.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write_result(name: str, result: dict[str, Any], results_dir: Path | None = None) -> Path:
    """Write the summary JSON (with its command line and git revision) to <cache>/bench/NAME.json, a run's record,
    and to results_dir/NAME.json when given (a checkout's benchmarks/results/: a record the docs cite); returns
    the last path written."""
    result.setdefault("command", " ".join(["python", *sys.argv]))
    result.setdefault("git_revision", git_revision())
    text = json.dumps(result, indent=2, sort_keys=True, default=str) + "\n"
    targets = [cache_dir() / "bench" / f"{name}.json"] + ([results_dir / f"{name}.json"] if results_dir else [])
    for path in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return targets[-1]
