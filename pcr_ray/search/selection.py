"""Which answered trace a search returns: the best-scored one, or the answer with the most score behind it.

`best` takes the trace with the highest aggregate score. `vote` is weighted majority voting (as in
search-and-learn's weighted best-of-N): answered traces are grouped by their answer's quantity (dimension and
SI value to 6 significant figures, so 0.5 km and 500 m agree), each group's weight is the sum of its traces'
scores, and the best-scored trace of the heaviest group is returned. With one answered trace both agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SELECTIONS = ("best", "vote")


@dataclass(frozen=True)
class Answered:
    """One answered trace as selection sees it: its score, a tie-break order (lower first) and its quantity."""

    score: float
    order: int
    quantity: tuple[Any, ...]  # (dims, SI value rounded); () when the trace has no answer value


def answer_quantity(dims: Any, base: float) -> tuple[Any, ...]:
    """The key two answers share when they state the same quantity (dimension, SI value to 6 significant figures)."""
    return (dims, float(f"{base:.6g}"))


def quantity_key(dims: Any, base: float) -> str:
    """answer_quantity as a string (JSON-friendly): two answers with equal keys state the same quantity."""
    return repr(answer_quantity(dims, base))


def select_answered(items: Sequence[Answered], how: str) -> int:
    """The index of the answered trace to return (`best` or `vote`); raises on an empty list or unknown rule."""
    if not items:
        raise ValueError("no answered traces to select from")
    if how not in SELECTIONS:
        raise ValueError(f"answer selection must be one of {SELECTIONS}, got {how!r}")

    def best_of(idx: Sequence[int]) -> int:
        return max(idx, key=lambda i: (items[i].score, -items[i].order))

    if how == "best":
        return best_of(range(len(items)))
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(it.quantity or ("trace", i), []).append(i)
    heaviest = max(groups.values(), key=lambda idx: (sum(items[i].score for i in idx),
                                                     items[best_of(idx)].score, -items[best_of(idx)].order))
    return best_of(heaviest)
