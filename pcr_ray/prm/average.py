"""Average the weights of PRM checkpoints that share an architecture into one checkpoint (a uniform model soup).

Checkpoints fine-tuned from a common starting point (here: the training rounds, each continued from an
earlier one) can be averaged parameter by parameter (Wortsman et al., 2022, "Model soups"); the result is one
model, scored at the cost of one. Every checkpoint must have the same backbone, pooling, rendering and
parameter shapes; the training length (`max_length`) must agree too, since a PRM is calibrated to its cut.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
from omegaconf import DictConfig

from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.prm.model import CheckpointError, PRMMeta, load_checkpoint, read_meta, save_checkpoint


def _compatible(paths: Sequence[Path]) -> PRMMeta:
    metas = [read_meta(p) for p in paths]
    first = metas[0]
    for p, m in zip(paths[1:], metas[1:], strict=True):
        for name in ("backbone", "pooling", "render", "max_length"):
            if getattr(m, name) != getattr(first, name):
                raise CheckpointError(f"cannot average {paths[0]} and {p}: {name} differs "
                                      f"({getattr(first, name)!r} vs {getattr(m, name)!r})")
    return first


def average_checkpoints(paths: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str],
                        weights: Sequence[float] | None = None) -> Path:
    """Write the (weighted) parameter average of `paths` to `output`; returns its path.

    Floating-point tensors are averaged; integer buffers (position ids) must be equal and are copied.
    Raises CheckpointError when the checkpoints differ in architecture, rendering or training length.
    """
    ps = [Path(p) for p in paths]
    if len(ps) < 2:
        raise ValueError(f"averaging needs at least two checkpoints, got {len(ps)}")
    w = [1.0] * len(ps) if weights is None else [float(x) for x in weights]
    if len(w) != len(ps) or any(x < 0 for x in w) or sum(w) <= 0:
        raise ValueError(f"weights must be {len(ps)} non-negative numbers with a positive sum, got {list(w)}")
    w = [x / sum(w) for x in w]
    meta = _compatible(ps)
    model, tokenizer, _ = load_checkpoint(ps[0])
    avg = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for v in avg.values():
        if v.is_floating_point():
            v.mul_(w[0])
    for p, wi in zip(ps[1:], w[1:], strict=True):
        other, _, _ = load_checkpoint(p)
        sd = other.state_dict()
        if set(sd) != set(avg):
            raise CheckpointError(f"cannot average {ps[0]} and {p}: their parameters differ")
        for k, v in avg.items():
            if sd[k].shape != v.shape:
                raise CheckpointError(f"cannot average {ps[0]} and {p}: {k} has shape {tuple(sd[k].shape)} "
                                      f"vs {tuple(v.shape)}")
            if v.is_floating_point():
                v.add_(sd[k].to(v.dtype), alpha=wi)
            elif not torch.equal(v, sd[k]):
                raise CheckpointError(f"cannot average {ps[0]} and {p}: non-float buffer {k} differs")
    model.load_state_dict(avg)
    out_meta = replace(meta, created=time.time(),
                       train={"averaged_from": [str(p) for p in ps], "weights": [round(x, 6) for x in w]})
    return save_checkpoint(model, tokenizer, output, out_meta)


USAGE = """usage: pcr-ray average-prm checkpoints=[CK1,CK2,...] output=DIR [weights=[W1,W2,...]]

Average the weights of PRM checkpoints of one architecture (training rounds continued from one another) into one
checkpoint: a uniform model soup, scored at the cost of one model.

e.g.  pcr-ray average-prm checkpoints=[runs/lw/lw2,runs/lw/lw3] output=runs/lw/soup
      pcr-ray average-prm checkpoints=[runs/lw/lw2,runs/lw/lw3] output=runs/lw/soup weights=[1,3]"""


def run(cfg: DictConfig) -> int:
    """`pcr-ray average-prm`: write the averaged checkpoint (CheckpointError, exit 1, when the checkpoints differ)."""
    weights = None if cfg.weights is None else list(cfg.weights)
    out = average_checkpoints(list(cfg.checkpoints), cfg.output, weights)
    print(f"averaged {len(cfg.checkpoints)} checkpoints into {out}")
    return 0


main = hydra_command("average-prm", "average_prm", run, USAGE)
