"""PRMEnsemble: scores a (context, step) pair by the mean logit of several PRM scorers (one forward pass each)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pcr_ray.prm.base import sigmoid


class PRMEnsemble:
    """The scorer interface of PRMScorer (`logits`, `score`, `identity`) over members' mean logit.

    Members are PRMScorer-like objects (e.g. two training rounds); each scores every pair, so an ensemble of n
    costs n forward passes a pair. Raw logits are averaged (no per-member standardization): meant for rounds of
    one lineage, whose logits share a scale.
    """

    def __init__(self, members: Sequence[Any]) -> None:
        if not members:
            raise ValueError("a PRM ensemble needs at least one member scorer")
        self.members = list(members)
        self.identity: dict[str, Any] = {"kind": "logit_mean", "members": [dict(m.identity) for m in self.members]}

    def logits(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The members' mean logit per pair, in input order."""
        pairs = list(pairs)
        columns = [m.logits(pairs) for m in self.members]
        for m, col in zip(self.members, columns, strict=True):
            if len(col) != len(pairs):
                raise RuntimeError(f"ensemble member {m.identity.get('checkpoint', m)!s} returned {len(col)} "
                                   f"logits for {len(pairs)} pairs")
        return [sum(vals) / len(vals) for vals in zip(*columns, strict=True)] if pairs else []

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """r = sigmoid(mean logit) in [0, 1] per pair."""
        return [sigmoid(v) for v in self.logits(pairs)]

    def score_counted(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[float], list[int]]:
        """score(pairs) and, per pair, the tokens every member encodes for it, summed."""
        pairs = list(pairs)
        counts = [m.token_counts(pairs) if hasattr(m, "token_counts") else [0] * len(pairs) for m in self.members]
        return self.score(pairs), [sum(c) for c in zip(*counts, strict=True)] if pairs else []
