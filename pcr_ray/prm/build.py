"""The one way a PRM scorer is built from a `prm:` config: which checkpoint folder, then the scorer on it.

`prm.checkpoint` is a checkpoint folder (a path, or a URI such as s3://bucket/prm that pyarrow.fs reads), or
`quick`: the cached quick MiniLM PRM of `prm.kind` and `prm.attention` (cache_dir()/prm/<kind>-<key>, or
<kind>_shared-<key>), trained on first use on this machine (pcr_ray.prm.checkpoints).
Nothing else trains a replacement: a folder that is missing is an error that names it and says how to make one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pcr_ray.prm.base import META_FILE

QUICK = "quick"
# the prm config keys that shape a scorer (the rest are training's)
SCORER_KEYS = ("device", "runtime", "int8", "bf16", "max_batch", "cache_size")
FAMILIES = ("cross_encoder", "causal_lm")  # this project's PRMs | off-the-shelf ones (pcr_ray.prm.causal_lm)
RUNTIMES = ("torch", "onnx")  # a pair checkpoint's engine. torch: fp32 or bf16, CPU or GPU | onnx: ONNX Runtime, CPU


class MissingCheckpointError(FileNotFoundError):
    """The PRM checkpoint a config names is not there; the message says how to make one."""


def _make_one(kind: str) -> str:
    return (f"make one with `pcr-ray train-prm prm.kind={kind} output=DIR` (docs/prm.md), or pass "
            f"prm.checkpoint={QUICK} for the quick MiniLM PRM trained on this machine on first use")


def checkpoint_path(prm_cfg: Mapping[str, Any], *, train: bool = True) -> Path | str:
    """The checkpoint folder `prm_cfg` names; `quick` trains the quick PRM when missing unless train=False. An
    off-the-shelf causal-LM PRM's checkpoint is its model: a hub name, a folder or a URI, as given."""
    ck = prm_cfg.get("checkpoint")
    if prm_cfg.get("family") == "causal_lm":
        if not ck:
            raise MissingCheckpointError("a causal_lm PRM names its model in prm.checkpoint (a hub name or folder)")
        return str(ck)
    kind = str(prm_cfg.get("kind", "csp"))
    if ck is None or str(ck) == "":
        raise MissingCheckpointError(f"no PRM checkpoint configured (prm.checkpoint is null): pass "
                                     f"prm.checkpoint=/path/to/checkpoint, or {_make_one(kind)}")
    from pcr_ray.prm import checkpoints

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
    from pcr_ray.paths import local_path

    p = local_path(path)
    if not (p / META_FILE).is_file():
        what = "does not exist" if not p.exists() else f"has no {META_FILE}, so it is no PRM checkpoint"
        raise MissingCheckpointError(f"PRM checkpoint {p} {what} on this machine. On a cluster, put checkpoints "
                                     f"on a filesystem every node sees. To {_make_one(kind)}")
    return p.resolve()


def build_scorer(prm_cfg: Mapping[str, Any], checkpoint: str | Path | None = None, **overrides: Any) -> Any:
    """A PRMScorer on `checkpoint` (default: checkpoint_path(prm_cfg)) with the config's scoring settings.

    `overrides` replace config keys (e.g. max_length for tests); max_length is otherwise the checkpoint's own.
    """
    from pcr_ray.prm.scorer import PRMScorer

    if prm_cfg.get("family") == "causal_lm":  # an off-the-shelf PRM scoring at step separators
        from pcr_ray.paths import is_uri, local_path
        from pcr_ray.prm.causal_lm import CausalLMPRM

        model = str(checkpoint or checkpoint_path(prm_cfg))
        model = str(local_path(model)) if is_uri(model) else model
        kw = {k: prm_cfg[k] for k in ("max_batch", "max_length", "cache_size") if prm_cfg.get(k) is not None}
        kw.update({k: v for k, v in overrides.items() if k in ("max_batch", "max_length", "cache_size")
                   and v is not None})
        return CausalLMPRM.from_pretrained(model, str(prm_cfg.get("convention")), device=str(prm_cfg.get("device",
                                           "cpu")), dtype="auto", **kw)
    path = require_checkpoint(checkpoint, str(prm_cfg.get("kind", "csp"))) if checkpoint else checkpoint_path(prm_cfg)
    kw = {k: prm_cfg[k] for k in SCORER_KEYS if prm_cfg.get(k) is not None}
    kw.update(overrides)
    return PRMScorer.from_checkpoint(path, **kw)


def check_runtime(runtime: str, *, device: str = "cpu", int8: bool = False, bf16: bool = False,
                  attention: str = "pair") -> None:
    """ValueError naming the setting to change when runtime, device, int8 and bf16 cannot work together.

    `attention` is the checkpoint's (prm.json). `runtime` chooses the engine of a pair checkpoint; a shared_context
    PRM always scores on torch (its contexts encoded once, pcr_ray.prm.context_cache), int8 quantized per token.
    """
    if runtime not in RUNTIMES:
        raise ValueError(f"prm.runtime must be one of {RUNTIMES}, got {runtime!r}")
    if int8 and bf16:
        raise ValueError("choose one of int8 and bf16 scoring, not both")
    if attention == "shared_context":
        return
    if runtime == "onnx":
        if device != "cpu":
            raise ValueError(f"prm.runtime=onnx scores on CPU; with prm.device={device} set prm.runtime=torch "
                             f"prm.int8=false (prm.bf16=true scores faster on a GPU)")
        if bf16:
            raise ValueError("bf16 scoring runs on torch: set prm.runtime=torch prm.int8=false prm.bf16=true")
    elif int8:
        raise ValueError("int8 scoring runs on ONNX Runtime: set prm.runtime=onnx (faster than torch's dynamic int8 "
                         "and closer to fp32, docs/prm.md)")
