"""`pcr-ray data build [overrides]`: one problems parquet per data set, with counts, conversion rates and
extraction accuracy printed and written to a stats JSON. Config: conf/data.yaml (a Hydra app)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from pcr_ray.commands.hydra_app import run_hydra
from pcr_ray.data.givens import score_extraction
from pcr_ray.data.gsm8k_traces import conversion_stats
from pcr_ray.data.physics import generate_problems
from pcr_ray.data.problem import Problem
from pcr_ray.data.readers import iter_dataset, iter_gsm8k
from pcr_ray.data.sources import DATA_SOURCES
from pcr_ray.paths import cache_dir

USAGE = """usage: pcr-ray data build [key=value ...]

Writes <out_dir>/<dataset>.parquet for each data set in `datasets` and <out_dir>/build_stats.json.
Config: conf/data.yaml. Examples:
  pcr-ray data build
  pcr-ray data build datasets=[gsm8k_test,physics] physics.n=500 out_dir=/tmp/problems
  pcr-ray data build data_dir=/path/to/data     (or set PCR_RAY_DATA)
"""

PARQUET_SCHEMA_FIELDS: tuple[tuple[str, str], ...] = (
    ("id", "string"), ("source", "string"), ("text", "string"), ("answer", "string"), ("answer_value", "float64"),
    ("answer_unit", "string"), ("level", "int64"), ("subject", "string"), ("gold_trace", "string"),
    ("gold_steps", "int64"),
)


def write_problems_parquet(problems: list[Problem], path: str | Path) -> Path:
    """Write problems to parquet atomically (a temporary file renamed into place)."""
    import pyarrow as pa  # heavy: pyarrow
    import pyarrow.parquet as pq  # heavy: pyarrow

    schema = pa.schema([(n, getattr(pa, t)()) for n, t in PARQUET_SCHEMA_FIELDS])
    table = pa.Table.from_pylist([p.to_dict() for p in problems], schema=schema)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path


def read_problems_parquet(path: str | Path) -> list[Problem]:
    """Problems back from a parquet written by write_problems_parquet."""
    import pyarrow.parquet as pq  # heavy: pyarrow

    return [Problem.from_dict(r) for r in pq.read_table(path).to_pylist()]


def _cfg_dict(cfg: Any) -> dict[str, Any]:
    if isinstance(cfg, Mapping):
        return {k: (_cfg_dict(v) if isinstance(v, Mapping) else v) for k, v in cfg.items()}

    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def _steps_summary(problems: list[Problem]) -> dict[str, Any]:
    steps = [p.gold_steps for p in problems if p.gold_steps is not None]
    hist: dict[str, int] = {}
    for s in steps:
        hist[str(s)] = hist.get(str(s), 0) + 1
    return {"with_trace": len(steps), "long_horizon_5plus": sum(s >= 5 for s in steps),
            "mean_steps": (sum(steps) / len(steps)) if steps else 0.0,
            "steps_hist": dict(sorted(hist.items(), key=lambda kv: int(kv[0])))}


def build(cfg: Any) -> dict[str, Any]:
    """Build every configured data set; returns the stats dict (also written as JSON). Callable from Python."""
    c = _cfg_dict(cfg)
    out_dir = Path(c.get("out_dir") or (cache_dir() / "data")).expanduser().resolve()
    data_dir = c.get("data_dir")
    names = list(c.get("datasets") or DATA_SOURCES.names())
    unknown = [n for n in names if n not in DATA_SOURCES]
    if unknown:
        raise ValueError(f"unknown data set(s) {unknown}; choose from {list(DATA_SOURCES.names())}")
    phys = c.get("physics", {}) or {}
    implicit = bool((c.get("gsm8k", {}) or {}).get("implicit", True))
    stats: dict[str, Any] = {"out_dir": str(out_dir), "datasets": {}}
    for name in names:
        t0 = time.perf_counter()
        conv = None
        if name.startswith("gsm8k_"):
            results: list = []
            problems = list(iter_gsm8k(name.split("_", 1)[1], data_dir, implicit=implicit, results=results))
            conv = conversion_stats(results).to_dict()
        elif name == "physics":
            problems = generate_problems(int(phys.get("n", 2000)), int(phys.get("seed", 0)),
                                         split=str(phys.get("split", "heldout")))
        else:
            problems = list(iter_dataset(name, data_dir))
        path = write_problems_parquet(problems, out_dir / f"{name}.parquet")
        entry: dict[str, Any] = {"count": len(problems), "path": str(path), "seconds": time.perf_counter() - t0}
        entry.update(_steps_summary(problems))
        if conv is not None:
            entry["conversion"] = conv
        if name == "gsm8k_test":
            items = [(p.text, p.gold_trace, p.gold_trace["answer"][0]["unit"]) for p in problems if p.gold_trace]
            entry["extraction"] = score_extraction(items).to_dict()
        stats["datasets"][name] = entry
        _print_entry(name, entry)
    n_ext = int((c.get("extraction", {}) or {}).get("physics_n", 0))
    if n_ext:
        held = generate_problems(n_ext, int(phys.get("seed", 0)) + 1, split=str(phys.get("split", "heldout")))
        stats["physics_extraction"] = score_extraction([(p.text, p.gold_trace, p.answer_unit) for p in held]).to_dict()
        e = stats["physics_extraction"]
        print(f"extraction on {n_ext} generated physics problems: complete givens {e['complete']:.1%} "
              f"(value only {e['complete_value_only']:.1%}), target dimension {e['target_dims_acc']:.1%}")
    out_dir.mkdir(parents=True, exist_ok=True)
    stats_path = out_dir / str(c.get("stats_file") or "build_stats.json")
    tmp = stats_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(stats, indent=2))
    os.replace(tmp, stats_path)
    print(f"wrote {len(names)} parquet file(s) and {stats_path}")
    return stats


def _print_entry(name: str, e: dict[str, Any]) -> None:
    line = f"{name:<12} {e['count']:>6} problems  {e['with_trace']:>6} with gold trace"
    if e["with_trace"]:
        line += f" (5+ steps: {e['long_horizon_5plus']}, mean {e['mean_steps']:.2f})"
    print(line + f"  [{e['seconds']:.1f}s]")
    if "conversion" in e:
        cv = e["conversion"]
        print(f"  conversion {cv['converted']}/{cv['n']} = {cv['rate']:.1%}; skipped: {cv['reasons']}")
        print(f"  steps per trace: {cv['steps_hist']}")
    if "extraction" in e:
        x = e["extraction"]
        print(f"  givens extraction: complete {x['complete']:.1%} (value only {x['complete_value_only']:.1%}, "
              f"where gold has a unit {x['complete_unit_lenient']:.1%}), target dimension {x['target_dims_acc']:.1%}")


def main(argv: list[str]) -> int:
    """`pcr-ray data build [overrides]` (a Hydra app over conf/data.yaml)."""
    if not argv or argv[0] != "build":
        print(USAGE)
        return 0 if argv and argv[0] in ("-h", "--help", "help") else 2
    return run_hydra("data build", "data", argv[1:], build, USAGE)
