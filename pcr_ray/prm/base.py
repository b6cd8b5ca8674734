"""What every step scorer offers (the PRM, a Ray actor proxy, a Serve handle): no torch import here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

CHECKPOINT_FORMAT = 1
META_FILE = "prm.json"
ENCODER_DIR = "encoder"
HEAD_FILE = "head.pt"
PRM_KINDS: tuple[str, ...] = ("csp", "random")


@runtime_checkable
class StepScorer(Protocol):
    """Scores (context, step) text pairs: r in [0, 1], higher = more likely a correct step."""

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]: ...


def sigmoid(x: float) -> float:
    """Numerically safe logistic function."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)
