"""`pcr-ray eval-prm`: pairwise accuracy and step-level AUROC of a PRM checkpoint on a pairs split, by kind.

Pairwise accuracy: the share of pairs with r(context, positive) > r(context, negative) (ties count half).
Step-level AUROC: the gold steps of the pairs against their negatives, as a binary ranking (Mann-Whitney).
Every distinct (context, step) is scored once, with Ray Data over PRM scorer actors (`use_ray: true`, the
shape a cluster runs) or in this process.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.configs import checked_dict
from pcr_ray.negatives.csp import CSP_KINDS, RANDOM_KINDS
from pcr_ray.negatives.pairs import MINED_KINDS
from pcr_ray.negatives.search_pairs import SEARCH_KINDS
from pcr_ray.negatives.word import WORD_KINDS
from pcr_ray.paths import cache_dir
from pcr_ray.pipeline.make_pairs import default_pairs_dir
from pcr_ray.pipeline.ray_runtime import init_ray
from pcr_ray.pipeline.shipping import ShippedFolder, receive, ship
from pcr_ray.pipeline.stats import auroc
from pcr_ray.prm.build import build_scorer, checkpoint_path

CONFIG_NAME = "eval_prm"
GROUPS: dict[str, tuple[str, ...]] = {"csp (all)": CSP_KINDS, "word-problem (all)": WORD_KINDS,
                                      "search-matched (all)": SEARCH_KINDS,
                                      "verifier-passing (all)": CSP_KINDS + WORD_KINDS + SEARCH_KINDS,
                                      "mined (all)": MINED_KINDS,
                                      "random (all)": RANDOM_KINDS}


def pair_metrics(df: Any) -> dict[str, dict[str, Any]]:
    """By kind (and per group): pairs, pairwise accuracy, step-level AUROC, mean r+ and r-."""
    out: dict[str, dict[str, Any]] = {}
    kinds = sorted(df["kind"].unique())
    groups: list[tuple[str, Sequence[str]]] = [(k, (k,)) for k in kinds]
    groups += [(g, ks) for g, ks in GROUPS.items() if any(k in kinds for k in ks)]
    groups.append(("all", kinds))
    for name, ks in groups:
        d = df[df["kind"].isin(list(ks))]
        if d.empty:
            continue
        rp, rn = d["r_pos"].to_numpy(), d["r_neg"].to_numpy()
        acc = float(((rp > rn) + 0.5 * (rp == rn)).mean())
        pos_steps = d.drop_duplicates(["problem_id", "t"])["r_pos"].to_numpy()
        out[name] = {"pairs": int(len(d)), "problems": int(d["problem_id"].nunique()), "pairwise_acc": round(acc, 4),
                     "auroc": round(auroc(pos_steps, rn), 4), "mean_r_pos": round(float(rp.mean()), 4),
                     "mean_r_neg": round(float(rn.mean()), 4)}
    return out


@dataclass(frozen=True)
class ScorerPlacement:
    """Where the PRM of a scoring job (eval-prm, mine-pairs) runs: its torch device and GPUs per Ray actor."""

    device: str
    gpus_per_actor: float


def scorer_placement(prm: Mapping[str, Any], cfg: Mapping[str, Any]) -> ScorerPlacement:
    """`prm.device` and the job's `gpus_per_actor` (null: 1 on CUDA, 0 on CPU), checked for consistency.

    Raises ValueError when they cannot work together: a CUDA scorer in an actor given no GPU (Ray hides every GPU
    from such an actor), or int8 / ONNX Runtime scoring (CPU only) on CUDA.
    """
    device = str(prm.get("device") or "cpu")
    cuda = device.startswith("cuda")
    raw = cfg.get("gpus_per_actor")
    gpus = (1.0 if cuda else 0.0) if raw is None else float(raw)
    if gpus < 0:
        raise ValueError(f"gpus_per_actor must be >= 0, got {raw}")
    if cuda and (bool(prm.get("int8")) or prm.get("runtime") == "onnx"):
        raise ValueError(f"prm.int8 (ONNX Runtime, prm.runtime=onnx) scores on CPUs; with prm.device={device} set "
                         f"prm.runtime=torch prm.int8=false (prm.bf16=true scores faster on a GPU)")
    if cuda and gpus == 0 and bool(cfg.get("use_ray", True)):
        raise ValueError(f"prm.device={device} needs a GPU in each PRM actor: set gpus_per_actor (e.g. 1, or 0.5 "
                         f"to share one GPU between two actors), or prm.device=cpu")
    return ScorerPlacement(device, gpus)


def check_cluster_gpus(placement: ScorerPlacement, actors: int, rcfg: Mapping[str, Any] | None) -> None:
    """On a local Ray, an error when the actors ask for more GPUs than it has: Ray would otherwise wait for them
    forever. A cluster (ray.address set, or RAY_ADDRESS as inside `ray job submit`) may still be adding GPU nodes:
    no check there."""
    if placement.gpus_per_actor <= 0 or (rcfg or {}).get("address") or os.environ.get("RAY_ADDRESS"):
        return

    have = float(ray.cluster_resources().get("GPU", 0.0))
    want = placement.gpus_per_actor * actors
    if have < want:
        raise ValueError(f"{actors} PRM actor(s) x gpus_per_actor={placement.gpus_per_actor:g} need {want:g} GPU(s); "
                         f"this local Ray has {have:g}. Set prm.device=cpu (and gpus_per_actor=0), or join a GPU "
                         f"cluster with ray.address=auto")


class ScoreBatch:
    """map_batches UDF (an actor): loads the PRMScorer once, scores a pandas batch of (context, step)."""

    def __init__(self, prm_cfg: Mapping[str, Any], checkpoint: ShippedFolder | str, device: str = "cpu",
                 torch_threads: int = 0) -> None:
        if torch_threads > 0:
            import torch  # heavy: torch

            torch.set_num_threads(torch_threads)

        # the driver's checkpoint, unpacked here when this node lacks it; at the checkpoint's trained length
        self.scorer = build_scorer(prm_cfg, receive(checkpoint), device=device)

    def __call__(self, batch: Any) -> Any:
        batch = batch.copy()
        batch["score"] = self.scorer.score(list(zip(batch["context"], batch["step"], strict=True)))
        return batch


def resolve_checkpoint(prm: Mapping[str, Any]) -> Path:
    """The checkpoint folder prm names (pcr_ray.prm.build); `quick` must already be trained: nothing trains here."""
    return checkpoint_path(prm, train=False)


def read_split(pairs_dir: Path, split: str, use_ray: bool) -> Any:
    """A make-pairs split as a pandas frame (the columns evaluation needs); a clear error when it is missing."""
    import pandas as pd  # heavy: pandas

    path = pairs_dir / split
    if not path.exists():
        raise FileNotFoundError(f"no pairs at {path}; run `pcr-ray make-pairs` first (or set pairs_dir=...)")
    cols = ["problem_id", "source", "kind", "t", "context", "pos_step", "neg_step", "verified"]
    if use_ray:
        return ray.data.read_parquet(str(path)).select_columns(cols).to_pandas()  # projection pushed into the read
    return pd.read_parquet(path, columns=cols)


def select_pairs(df: Any, kinds: Sequence[str] | None = None, limit_per_kind: int = 0) -> Any:
    """The pairs of `kinds` (all when empty), at most `limit_per_kind` of each (0: all), in a fixed order."""
    if kinds:
        df = df[df["kind"].isin(list(kinds))]
    if limit_per_kind > 0:
        df = df.sort_values(["problem_id", "t", "neg_step"]).groupby("kind", group_keys=False).head(limit_per_kind)
    return df.reset_index(drop=True)


def distinct_texts(df: Any) -> Any:
    """The distinct (context, step) rows of a pair frame's positives and negatives: what a scorer must score."""
    import pandas as pd  # heavy: pandas

    texts = pd.concat([df[["context", "pos_step"]].rename(columns={"pos_step": "step"}),
                       df[["context", "neg_step"]].rename(columns={"neg_step": "step"})]).drop_duplicates()
    return texts.reset_index(drop=True)


def eval_prm(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Score a split's pairs with a checkpoint; print and return metrics by kind (and write them as JSON)."""
    cfg = checked_dict("eval_prm", cfg)

    t0 = time.perf_counter()
    prm = dict(cfg["prm"] or {})
    ckpt = resolve_checkpoint(prm)
    placement = scorer_placement(prm, cfg)
    pairs_dir = Path(str(cfg["pairs_dir"] or default_pairs_dir())).expanduser()
    split = str(cfg["split"])
    use_ray = bool(cfg["use_ray"])
    if use_ray:
        init_ray(cfg["ray"])
        check_cluster_gpus(placement, int(cfg["actors"]), cfg["ray"])
    kinds = cfg["kinds"]
    df = select_pairs(read_split(pairs_dir, split, use_ray), kinds, int(cfg["limit_per_kind"] or 0))
    if df.empty:
        raise ValueError(f"no pairs to evaluate in {pairs_dir}/{split} (kinds {kinds})")
    texts = distinct_texts(df)
    kw = {"prm_cfg": prm, "checkpoint": str(ckpt), "device": placement.device}
    t1 = time.perf_counter()
    if use_ray:
        scored = ray.data.from_pandas(texts).map_batches(
            ScoreBatch, fn_constructor_kwargs={**kw, "checkpoint": ship(ckpt),
                                              "torch_threads": int(cfg["cpus_per_actor"])},
            batch_format="pandas", batch_size=int(cfg["batch_size"]),
            compute=ray.data.ActorPoolStrategy(size=int(cfg["actors"])),
            num_cpus=float(cfg["cpus_per_actor"]), num_gpus=placement.gpus_per_actor,
        ).to_pandas()
    else:
        scored = ScoreBatch(**kw)(texts)
    score_s = time.perf_counter() - t1
    key = dict(zip(zip(scored["context"], scored["step"], strict=True), scored["score"], strict=True))
    df["r_pos"] = [key[(c, s)] for c, s in zip(df["context"], df["pos_step"], strict=True)]
    df["r_neg"] = [key[(c, s)] for c, s in zip(df["context"], df["neg_step"], strict=True)]
    metrics = pair_metrics(df)
    by_source = {str(src): {k: v for k, v in pair_metrics(d).items() if k in ("csp (all)", "random (all)", "all")}
                 for src, d in df.groupby("source")} if df["source"].nunique() > 1 else {}
    from pcr_ray.prm.model import read_meta  # heavy: torch

    meta = read_meta(ckpt)
    result = {"checkpoint": str(ckpt), "prm_kind": meta.kind, "backbone": meta.backbone, "split": split,
              "pairs_dir": str(pairs_dir), "by_kind": metrics, "by_source": by_source, "scored_texts": int(len(texts)),
              "score_seconds": round(score_s, 1), "steps_per_s": round(len(texts) / score_s, 1) if score_s else None,
              "seconds": round(time.perf_counter() - t0, 1)}
    out = cfg["out"] or (cache_dir() / "eval" / f"prm_{meta.kind}_{split}.json")
    Path(str(out)).parent.mkdir(parents=True, exist_ok=True)
    Path(str(out)).write_text(json.dumps(result, indent=2))
    print(format_metrics(result), flush=True)
    print(f"[eval-prm] written to {out}", flush=True)
    return result


def format_metrics(result: Mapping[str, Any]) -> str:
    lines = [f"PRM {result['prm_kind']} ({result['backbone']}) on {result['split']} pairs: {result['checkpoint']}",
             f"{'kind':<24}{'pairs':>8}{'pairwise acc':>14}{'AUROC':>8}{'mean r+':>9}{'mean r-':>9}"]
    for k, m in result["by_kind"].items():
        lines.append(f"{k:<24}{m['pairs']:>8}{m['pairwise_acc']:>14.4f}{m['auroc']:>8.4f}{m['mean_r_pos']:>9.3f}"
                     f"{m['mean_r_neg']:>9.3f}")
    for src, groups in (result.get("by_source") or {}).items():
        for g, m in groups.items():
            lines.append(f"{src + ': ' + g:<24}{m['pairs']:>8}{m['pairwise_acc']:>14.4f}{m['auroc']:>8.4f}"
                         f"{m['mean_r_pos']:>9.3f}{m['mean_r_neg']:>9.3f}")
    lines.append(f"({result['scored_texts']} distinct (context, step) scored in {result['score_seconds']}s)")
    return "\n".join(lines)


USAGE = """usage: pcr-ray eval-prm [key=value ...]

Pairwise accuracy and step-level AUROC of a PRM checkpoint on a pairs split, by pair kind.
e.g.  pcr-ray eval-prm                                    # the cached CSP PRM on the test split
      pcr-ray eval-prm prm=minilm_random kinds='[principle_swap,variable_substitution]'   # the CSP ablation
      pcr-ray eval-prm prm.checkpoint=/path/to/ckpt split=validation"""


main = hydra_command("eval-prm", CONFIG_NAME, eval_prm, USAGE)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
