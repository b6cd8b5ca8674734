"""`pcr-ray make-pairs`: gold traces -> CSP and random-perturbation pairs with Ray Data -> parquet splits.

Problems come from named data sets (pcr_ray.data.readers) or parquet/jsonl files of Problem rows; Ray Data
maps `pcr_ray.negatives.pairs.pair_records` over them on CPU workers (map_batches) and writes
<out_dir>/{train,validation,test}/*.parquet (split by a hash of the problem id: no problem in two splits) and
<out_dir>/summary.json. A new output replaces the old one only once it is complete.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.configs import checked_dict
from pcr_ray.data.readers import load_dataset
from pcr_ray.negatives.pairs import PAIR_COLUMNS, SPLITS, PairConfig, pair_records
from pcr_ray.paths import cache_dir
from pcr_ray.pipeline.ray_runtime import init_ray

log = logging.getLogger(__name__)

CONFIG_NAME = "make_pairs"


def default_pairs_dir() -> Path:
    """cache_dir()/pairs: where make-pairs writes and train-prm / eval-prm read by default."""
    return cache_dir() / "pairs"


def _pair_config(cfg: Mapping[str, Any]) -> PairConfig:
    """The pair-making settings of a checked make_pairs config (every key present; defaults in make_pairs.yaml)."""
    return PairConfig(csp_per_kind=int(cfg["csp_per_kind"]), random_per_kind=int(cfg["random_per_kind"]),
                      search_per_kind=int(cfg["search_per_kind"] or 0),
                      kinds=tuple(cfg["kinds"] or PairConfig().kinds), seed=int(cfg["seed"]),
                      split_fractions=tuple(cfg["split_fractions"]),  # type: ignore[arg-type]
                      rel_tol=float(cfg["rel_tol"]), max_steps=int(cfg["max_steps"]))


def pairs_batch(batch: Any, pair_cfg: PairConfig) -> Any:
    """map_batches UDF: a pandas batch of Problem rows -> a pandas batch of pair rows."""
    import pandas as pd  # heavy: pandas

    out: list[dict[str, Any]] = []
    for row in batch.to_dict("records"):
        out.extend(pair_records(row, pair_cfg)[0])
    return pd.DataFrame(out, columns=list(PAIR_COLUMNS))


def problem_rows(sources: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for src in sources:
        if src.get("path"):
            continue
        probs = load_dataset(str(src["name"]), src.get("data_dir"), limit=src.get("limit"),
                             **dict(src.get("kwargs") or {}))
        got = [p.to_dict() for p in probs if p.gold_trace]
        log.info("[make-pairs] %s: %d problems, %d with gold traces", src["name"], len(probs), len(got))
        rows.extend(got)
    return rows


def _file_datasets(sources: Sequence[Mapping[str, Any]]) -> list[Any]:
    import ray  # heavy: ray

    out = []
    for src in sources:
        p = src.get("path")
        if not p:
            continue
        path = str(Path(str(p)).expanduser())
        ds = ray.data.read_json(path) if path.endswith((".jsonl", ".json")) else ray.data.read_parquet(path)
        if src.get("limit"):
            ds = ds.limit(int(src["limit"]))
        out.append(ds)
    return out


def make_pairs(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Build the pair splits described by `cfg` (a make_pairs config as a dict); returns the summary."""
    cfg = checked_dict("make_pairs", cfg)
    import ray  # heavy: ray

    t0 = time.perf_counter()
    init_ray(cfg["ray"])
    pair_cfg = _pair_config(cfg)
    out_dir = Path(str(cfg["out_dir"] or default_pairs_dir())).expanduser().resolve()
    sources = list(cfg["sources"] or [])
    if not sources:
        raise ValueError("make-pairs needs at least one source (sources=[{name: physics, kwargs: {n: 100}}])")
    rows = problem_rows(sources)
    parts = ([ray.data.from_items(rows)] if rows else []) + _file_datasets(sources)
    if not parts:
        raise ValueError("no problems with gold traces in the configured sources")
    problems = parts[0] if len(parts) == 1 else parts[0].union(*parts[1:])
    n_problems = problems.count()
    nblocks = max(1, min(int(cfg["num_blocks"]), n_problems))
    pairs = problems.repartition(nblocks).map_batches(
        pairs_batch, fn_kwargs={"pair_cfg": pair_cfg}, batch_format="pandas",
        batch_size=int(cfg["batch_size"]), num_cpus=float(cfg["num_cpus_per_task"]),
        concurrency=cfg["concurrency"] or None,
    ).materialize()
    df = pairs.to_pandas()
    if df.empty:
        raise ValueError(f"no pairs were made from {n_problems} problems (do their gold traces verify?)")
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    import pyarrow as pa  # heavy: pyarrow
    import pyarrow.parquet as pq  # heavy: pyarrow

    df = df.sort_values(["problem_id", "t", "kind", "neg_step"], kind="stable").reset_index(drop=True)
    for split in SPLITS:
        part = df[df["split"] == split].reset_index(drop=True)
        (tmp / split).mkdir()
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), tmp / split / "pairs.parquet")
    summary = summarize_pairs(df, n_problems)
    summary.update({"out_dir": str(out_dir), "seconds": round(time.perf_counter() - t0, 2),
                    "config": {k: v for k, v in dict(cfg).items() if k != "ray"}})
    (tmp / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    _replace_dir(tmp, out_dir)
    print(format_summary(summary), flush=True)
    return summary


def _replace_dir(new: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    old = dest.parent / f".{dest.name}.old-{os.getpid()}"
    if dest.exists():
        dest.rename(old)
    new.rename(dest)
    shutil.rmtree(old, ignore_errors=True)


def summarize_pairs(df: Any, n_problems: int) -> dict[str, Any]:
    """Counts: pairs per split and kind, pairs per gold trace, verifier rejections among random negatives."""
    n_gold = int(df["problem_id"].nunique())
    by_kind = {str(k): int(v) for k, v in df["kind"].value_counts().sort_index().items()}
    by_split = {s: int((df["split"] == s).sum()) for s in SPLITS}
    problems_by_split = {s: int(df.loc[df["split"] == s, "problem_id"].nunique()) for s in SPLITS}
    rnd = df[df["kind"].str.startswith("random")]
    rejected = {str(k): round(float(1 - g["verified"].mean()), 4) for k, g in rnd.groupby("kind")}
    per_kind_per_trace = {k: round(v / max(n_problems, 1), 3) for k, v in by_kind.items()}
    return {
        "problems": int(n_problems), "problems_with_pairs": n_gold, "pairs": int(len(df)),
        "pairs_per_gold_trace": round(len(df) / max(n_problems, 1), 3),
        "pairs_per_gold_trace_by_kind": per_kind_per_trace, "pairs_by_kind": by_kind, "pairs_by_split": by_split,
        "problems_by_split": problems_by_split,
        "random_rejected_by_verifier": rejected,
        "random_rejected_by_verifier_all": round(float(1 - rnd["verified"].mean()), 4) if len(rnd) else None,
        "csp_verified": bool(df[~df["kind"].str.startswith("random")]["verified"].all()),
    }


def format_summary(s: Mapping[str, Any]) -> str:
    lines = [f"[make-pairs] {s['pairs']} pairs from {s['problems']} gold traces "
             f"({s['pairs_per_gold_trace']} per trace; {s['problems_with_pairs']} traces gave pairs)"]
    for k, v in s["pairs_by_kind"].items():
        rej = s["random_rejected_by_verifier"].get(k)
        extra = f", verifier rejects {100 * rej:.1f}%" if rej is not None else ""
        lines.append(f"  {k:<22} {v:>7}  ({s['pairs_per_gold_trace_by_kind'][k]} per trace{extra})")
    lines.append("  splits: " + ", ".join(f"{k} {v} pairs / {s['problems_by_split'][k]} problems"
                                          for k, v in s["pairs_by_split"].items()))
    if s.get("random_rejected_by_verifier_all") is not None:
        lines.append(f"  random negatives rejected by the verifier: {100 * s['random_rejected_by_verifier_all']:.1f}%")
    if "out_dir" in s:
        lines.append(f"  written to {s['out_dir']} in {s.get('seconds', 0)}s")
    return "\n".join(lines)


USAGE = """usage: pcr-ray make-pairs [key=value ...]

Gold traces -> CSP (principle swap, variable substitution) and random-perturbation pairs, with Ray Data,
written as parquet train/validation/test splits (by problem) to out_dir (default: cache_dir()/pairs).
e.g.  pcr-ray make-pairs sources='[{name: physics, kwargs: {n: 500, seed: 7919}}]' csp_per_kind=2"""


main = hydra_command("make-pairs", CONFIG_NAME, make_pairs, USAGE)
