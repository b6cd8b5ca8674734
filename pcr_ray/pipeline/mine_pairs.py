"""`pcr-ray mine-pairs`: hard negatives mined with a PRM checkpoint along gold traces, added to make-pairs' output.

Problems come from the same sources as make-pairs (same split hash, so a problem keeps its split); Ray Data maps
`pcr_ray.negatives.mined.mine_rows` over them in PRM actors (ActorPoolStrategy), or it runs in this process
(`use_ray: false`). Writes <pairs_dir>/<split>/<stem>.parquet, the stem by `positions` (end:
mined_answer_timing, early: mined_answer_timing_early, steps: mined_alternative_step, all: mined_all), next to
pairs.parquet (train-prm and eval-prm read every parquet file of a split) and <pairs_dir>/<stem>_summary.json.
The mined pairs belong to the PRM that mined them: re-running make-pairs replaces the folder, mined files included.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ray

from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.configs import checked_dict
from pcr_ray.negatives.mined import MINED_COLUMNS, MineConfig, mine_rows, mined_file_stem
from pcr_ray.negatives.pairs import SPLITS, split_of
from pcr_ray.pipeline.eval_prm import check_cluster_gpus, resolve_checkpoint, scorer_placement
from pcr_ray.pipeline.make_pairs import default_pairs_dir, problem_rows
from pcr_ray.pipeline.ray_runtime import init_ray
from pcr_ray.pipeline.shipping import ShippedFolder, receive, ship
from pcr_ray.prm.build import build_scorer

CONFIG_NAME = "mine_pairs"


def _mine_config(cfg: Mapping[str, Any]) -> MineConfig:
    """The mining settings of a checked mine_pairs config (every key present; defaults in mine_pairs.yaml)."""
    kw: dict[str, Any] = {"per_problem": int(cfg["per_problem"]), "cap": int(cfg["cap"]),
                          "seed": int(cfg["seed"]), "rel_tol": float(cfg["rel_tol"]),
                          "split_fractions": tuple(cfg["split_fractions"]),
                          "positions": str(cfg["positions"]),
                          "prefixes_per_problem": int(cfg["prefixes_per_problem"] or 0)}
    if cfg.get("generators") is not None:
        kw["generators"] = {str(k): dict(v) for k, v in dict(cfg["generators"]).items()}
    return MineConfig(**kw)


class MineBatch:
    """map_batches UDF (an actor): loads the PRM once, mines a pandas batch of Problem rows."""

    def __init__(self, prm_cfg: Mapping[str, Any], checkpoint: ShippedFolder | str, mine_cfg: MineConfig,
                 device: str = "cpu", torch_threads: int = 0) -> None:
        if torch_threads > 0:
            import torch  # heavy: torch

            torch.set_num_threads(torch_threads)

        # the driver's checkpoint, unpacked here when this node lacks it; at the checkpoint's trained length
        self.scorer = build_scorer(prm_cfg, receive(checkpoint), device=device)
        self.cfg = mine_cfg

    def __call__(self, batch: Any) -> Any:
        import pandas as pd  # heavy: pandas

        rows, _ = mine_rows(batch.to_dict("records"), self.scorer, self.cfg)
        return pd.DataFrame(rows, columns=list(MINED_COLUMNS))


def _select_problems(rows: list[dict[str, Any]], cfg: Mapping[str, Any], mcfg: MineConfig) -> list[dict[str, Any]]:
    """The problems of the configured splits, at most limit_per_split of each (a hash order of the ids, so a
    limited set mixes the sources)."""
    splits = [str(s) for s in (cfg["splits"] or SPLITS)]
    bad = [s for s in splits if s not in SPLITS]
    if bad:
        raise ValueError(f"splits must be among {list(SPLITS)}, got {bad}")
    lim = cfg["limit_per_split"] or 0
    limits = {s: int((lim.get(s) or 0) if isinstance(lim, Mapping) else lim) for s in splits}
    taken = dict.fromkeys(splits, 0)
    out = []
    for r in sorted(rows, key=lambda r: hashlib.sha1(f"mine:{r['id']}".encode()).hexdigest()):
        s = split_of(str(r["id"]), mcfg.split_fractions)
        if s in taken and (limits[s] <= 0 or taken[s] < limits[s]):
            taken[s] += 1
            out.append(r)
    return out


def mine_pairs(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Mine pairs as configured (a mine_pairs config as a dict); returns the summary."""
    cfg = checked_dict("mine_pairs", cfg)
    import pandas as pd  # heavy: pandas

    t0 = time.perf_counter()
    prm = dict(cfg["prm"] or {})
    ckpt = resolve_checkpoint(prm)
    placement = scorer_placement(prm, cfg)
    use_ray = bool(cfg["use_ray"])
    if use_ray:  # before any work: a GPU the local Ray lacks is an error now, not a wait later
        init_ray(cfg["ray"])
        check_cluster_gpus(placement, int(cfg["actors"]), cfg["ray"])
    mcfg = _mine_config(cfg)
    pairs_dir = Path(str(cfg["pairs_dir"] or default_pairs_dir())).expanduser().resolve()
    if not (pairs_dir / "train").exists():
        raise FileNotFoundError(f"no pairs at {pairs_dir}; run `pcr-ray make-pairs` first (mined pairs are added "
                                f"to its output)")
    sources = [s for s in (cfg["sources"] or []) if not s.get("path")]
    if not sources:
        raise ValueError("mine-pairs needs named sources (sources=[{name: physics, kwargs: {n: 100}}])")
    problems = _select_problems(problem_rows(sources), cfg, mcfg)
    if not problems:
        raise ValueError("no problems with gold traces in the configured sources and splits")
    kw = {"prm_cfg": prm, "checkpoint": str(ckpt), "mine_cfg": mcfg, "device": placement.device}
    if use_ray:
        df = ray.data.from_items(problems).map_batches(
            MineBatch, fn_constructor_kwargs={**kw, "checkpoint": ship(ckpt),
                                              "torch_threads": int(cfg["cpus_per_actor"])},
            batch_format="pandas", batch_size=int(cfg["batch_size"]),
            compute=ray.data.ActorPoolStrategy(size=int(cfg["actors"])),
            num_cpus=float(cfg["cpus_per_actor"]), num_gpus=placement.gpus_per_actor,
        ).to_pandas()
    else:
        rows, _ = mine_rows(problems, MineBatch(**kw).scorer, mcfg)
        df = pd.DataFrame(rows, columns=list(MINED_COLUMNS))
    if df.empty:  # Ray's to_pandas of zero rows has no columns
        df = pd.DataFrame(columns=list(MINED_COLUMNS))
    import pyarrow as pa  # heavy: pyarrow
    import pyarrow.parquet as pq  # heavy: pyarrow

    df = df.sort_values(["problem_id", "neg_step"], kind="stable").reset_index(drop=True)
    written = {}
    stem = mined_file_stem(mcfg.positions)
    for split in sorted(set(df["split"])):
        part = df[df["split"] == split].reset_index(drop=True)
        dest = pairs_dir / split / f"{stem}.parquet"
        tmp = dest.with_suffix(".parquet.tmp")
        dest.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pandas(part.drop(columns=["margin"]), preserve_index=False), tmp)
        shutil.move(str(tmp), dest)
        written[split] = {"pairs": int(len(part)), "problems": int(part["problem_id"].nunique()), "file": str(dest)}
    summary = {"checkpoint": str(ckpt), "pairs_dir": str(pairs_dir), "problems": len(problems),
               "positions": mcfg.positions, "prefixes_per_problem": mcfg.prefixes_per_problem,
               "pairs_by_kind": {str(k): int(v) for k, v in df["kind"].value_counts().sort_index().items()},
               "pairs": int(len(df)), "by_split": written, "per_problem": mcfg.per_problem,
               "negatives_scored_above_gold": round(float((df["margin"] > 0).mean()) if len(df) else 0.0, 4),
               "seconds": round(time.perf_counter() - t0, 1)}
    (pairs_dir / f"{stem}_summary.json").write_text(json.dumps(summary, indent=2))
    kinds = ", ".join(f"{v} {k}" for k, v in summary["pairs_by_kind"].items()) or "no"
    print(f"[mine-pairs] {summary['pairs']} pairs ({kinds}) from {len(problems)} problems in "
          f"{summary['seconds']}s; {100 * summary['negatives_scored_above_gold']:.1f}% of the mined negatives score "
          f"above the gold action (the answer at the end, the next step before it)", flush=True)
    for split, w in written.items():
        print(f"  {split}: {w['pairs']} pairs / {w['problems']} problems -> {w['file']}", flush=True)
    return summary


USAGE = """usage: pcr-ray mine-pairs [key=value ...]

Along gold traces, score every valid candidate the search's enumerator offers with a PRM and keep the
highest-scored wrong ones as negatives against the gold action, added to make-pairs' output. positions=end
(default): the gold answer against continuations (kind mined_answer_timing); early: the gold step against
too-early answers; steps: the gold step against wrong valid steps (kind mined_alternative_step); all: the three.
Train on them with train-prm (kinds include them by default for the NS-PRM).
e.g.  pcr-ray mine-pairs prm.checkpoint=.cache/prm_full/csp3 limit_per_split=1500
      pcr-ray mine-pairs prm.checkpoint=.cache/prm_full/csp4 positions=steps prefixes_per_problem=2
      pcr-ray train-prm train.init_from=.cache/prm_full/csp3 'kind_weights={mined_answer_timing:8}'"""


main = hydra_command("mine-pairs", CONFIG_NAME, mine_pairs, USAGE)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
