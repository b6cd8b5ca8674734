"""The one way a PRM scorer is built from a `prm:` config: which checkpoint folder, then the scorer on it.

`prm.checkpoint` is a checkpoint folder (a path, or a URI such as s3://bucket/prm that pyarrow.fs reads), or
`quick`: the cached quick MiniLM PRM of `prm.kind` and `prm.attention` (cache_dir()/prm/<kind>-<key>, or
<kind>_shared-<key>), trained on first use on this machine (pcr_ray.prm.checkpoints).
Nothing else trains a replacement: a folder that is missing is an error that names it and says how to make one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from pcr_ray.paths import is_uri, local_path
from pcr_ray.prm import checkpoints
from pcr_ray.prm.base import META_FILE, StepScorer
from pcr_ray.prm.served import ServedPRM
from pcr_ray.registry import Registry

QUICK = "quick"
# the prm config keys that shape a scorer (the rest are training's)
SCORER_KEYS = ("device", "runtime", "int8", "bf16", "max_batch", "cache_size")
DEFAULT_FAMILY = "cross_encoder"
SERVED_FAMILY = "openai_reward"  # a PRM behind a server: nothing to load or fetch, `checkpoint` is its served name


class ScorerBuilder(Protocol):
    """How a PRM family's scorer is made from a `prm:` config (`checkpoint`: a resolved one, else the config's).

    The scorer it returns offers `score(pairs)` (pcr_ray.prm.base.StepScorer), and for the pipeline also
    `score_counted(pairs) -> (scores, tokens)` and an `identity` mapping; `overrides` replace config keys.
    """

    def __call__(self, prm_cfg: Mapping[str, Any], checkpoint: str | Path | None = None,
                 **overrides: Any) -> StepScorer: ...


# PRM families (`prm.family`) -> their scorer builders
SCORERS: Registry[ScorerBuilder] = Registry("PRM family")


class MissingCheckpointError(FileNotFoundError):
    """The PRM checkpoint a config names is not there; the message says how to make one."""


def _make_one(kind: str) -> str:
    return (f"make one with `pcr-ray train-prm prm.kind={kind} output=DIR` (docs/prm.md), or pass "
            f"prm.checkpoint={QUICK} for the quick MiniLM PRM trained on this machine on first use")


def checkpoint_path(prm_cfg: Mapping[str, Any], *, train: bool = True) -> Path | str:
    """The checkpoint folder `prm_cfg` names; `quick` trains the quick PRM when missing unless train=False. An
    off-the-shelf causal-LM PRM's checkpoint is its model: a hub name, a folder or a URI, as given."""
    ck = prm_cfg.get("checkpoint")
    if prm_cfg.get("family") == SERVED_FAMILY:
        return "" if ck in (None, QUICK) else str(ck)
    if prm_cfg.get("family") == "causal_lm":
        if not ck:
            raise MissingCheckpointError("a causal_lm PRM names its model in prm.checkpoint (a hub name or folder)")
        return str(ck)
    kind = str(prm_cfg.get("kind", "csp"))
    if ck is None or str(ck) == "":
        raise MissingCheckpointError(f"no PRM checkpoint configured (prm.checkpoint is null): pass "
                                     f"prm.checkpoint=/path/to/checkpoint, or {_make_one(kind)}")
    if str(ck) == QUICK:
        attention = str(prm_cfg.get("attention") or "pair")
        if train:
            ensure = {"attention": attention, **dict(prm_cfg.get("ensure") or {})}
            return checkpoints.ensure_checkpoint(kind, **ensure)
        found = checkpoints.find_checkpoint(kind, attention)
        if found is None:
            raise MissingCheckpointError(f"prm.checkpoint={QUICK}: no quick {kind} PRM in "
                                         f"{checkpoints.default_checkpoint_dir(kind, attention)} yet; "
                                         f"`pcr-ray solve` or "
                                         f"`make demo` trains it, or {_make_one(kind)}")
        return found
    return require_checkpoint(ck, kind)


def require_checkpoint(path: str | Path, kind: str = "csp") -> Path:
    """`path` resolved, when it holds a checkpoint (its prm.json); else MissingCheckpointError naming it. A URI
    (s3://, gs://, ...) is copied into the cache first (pcr_ray.paths.local_path)."""
    p = local_path(path)
    if not (p / META_FILE).is_file():
        what = "does not exist" if not p.exists() else f"has no {META_FILE}, so it is no PRM checkpoint"
        raise MissingCheckpointError(f"PRM checkpoint {p} {what} on this machine. On a cluster, put checkpoints "
                                     f"on a filesystem every node sees. To {_make_one(kind)}")
    return p.resolve()


@SCORERS.register("cross_encoder")
def build_cross_encoder(prm_cfg: Mapping[str, Any], checkpoint: str | Path | None = None,
                        **overrides: Any) -> StepScorer:
    """This project's PRM: a PRMScorer on a checkpoint folder trained here (pcr_ray.prm.scorer)."""
    from pcr_ray.prm.scorer import PRMScorer  # torch: imported only when a scorer is built

    path = require_checkpoint(checkpoint, str(prm_cfg.get("kind", "csp"))) if checkpoint else checkpoint_path(prm_cfg)
    kw = {k: prm_cfg[k] for k in SCORER_KEYS if prm_cfg.get(k) is not None}
    kw.update(overrides)
    return PRMScorer.from_checkpoint(path, **kw)


@SCORERS.register("causal_lm")
def build_causal_lm(prm_cfg: Mapping[str, Any], checkpoint: str | Path | None = None,
                    **overrides: Any) -> StepScorer:
    """An off-the-shelf causal-LM PRM scoring at step separators (pcr_ray.prm.causal_lm); its checkpoint is a model."""
    from pcr_ray.prm.causal_lm import CausalLMPRM  # torch and transformers: imported only when a scorer is built

    model = str(checkpoint or checkpoint_path(prm_cfg))
    model = str(local_path(model)) if is_uri(model) else model
    kw = {k: prm_cfg[k] for k in ("max_batch", "max_length", "cache_size") if prm_cfg.get(k) is not None}
    kw.update({k: v for k, v in overrides.items() if k in ("max_batch", "max_length", "cache_size")
               and v is not None})
    return CausalLMPRM.from_pretrained(model, str(prm_cfg.get("convention")), device=str(prm_cfg.get("device",
                                       "cpu")), dtype="auto", **kw)


@SCORERS.register(SERVED_FAMILY)
def build_served(prm_cfg: Mapping[str, Any], checkpoint: str | Path | None = None, **overrides: Any) -> StepScorer:
    """A PRM behind a server's pooling endpoint (pcr_ray.prm.served); its checkpoint is the served model's name."""
    model = str(checkpoint or checkpoint_path(prm_cfg))
    kw = {k: v for k, v in {"cache_size": prm_cfg.get("cache_size"), **overrides}.items()
          if k == "cache_size" and v is not None}
    return ServedPRM.from_config(prm_cfg, model, **kw)


def build_scorer(prm_cfg: Mapping[str, Any], checkpoint: str | Path | None = None, **overrides: Any) -> StepScorer:
    """The scorer of the config's PRM family (SCORERS; `prm.family`, default cross_encoder) on `checkpoint`
    (default: checkpoint_path(prm_cfg)) with the config's scoring settings.

    `overrides` replace config keys (e.g. max_length for tests); max_length is otherwise the checkpoint's own.
    """
    return SCORERS.get(str(prm_cfg.get("family") or DEFAULT_FAMILY))(prm_cfg, checkpoint, **overrides)
