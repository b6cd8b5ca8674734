"""The Problem record: one row of any data set (GSM8K, MATH, SciBench, procedural physics)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Problem:
    """A problem with its gold answer (as written, as a number when it is one, and its unit) and gold trace.

    `gold_trace` is a trace JSON dict (see pcr_ray.core.trace) or None; `gold_steps` is its number of steps.
    `level` and `subject` are '' / None where the source has none.
    """

    id: str
    source: str
    text: str
    answer: str
    answer_value: float | None = None
    answer_unit: str = ""
    level: int | None = None
    subject: str = ""
    gold_trace: dict[str, Any] | None = None
    gold_steps: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError("Problem.id must be a non-empty string")
        if self.answer_value is not None and not math.isfinite(self.answer_value):
            raise ValueError(f"Problem {self.id}: answer_value must be finite, got {self.answer_value!r}")

    @property
    def has_trace(self) -> bool:
        return self.gold_trace is not None

    def to_dict(self) -> dict[str, Any]:
        """A flat row for parquet / Ray Data: gold_trace becomes a JSON string (None stays None)."""
        row = {f.name: getattr(self, f.name) for f in fields(self)}
        row["gold_trace"] = json.dumps(self.gold_trace, separators=(",", ":")) if self.gold_trace else None
        return row

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Problem:
        """Inverse of to_dict; accepts gold_trace as a JSON string or a dict; ignores unknown keys."""
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in row.items() if k in names}
        gt = kw.get("gold_trace")
        if isinstance(gt, (str, bytes)):
            kw["gold_trace"] = json.loads(gt) if gt else None
        for key in ("answer_value",):
            v = kw.get(key)
            kw[key] = None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
        for key in ("level", "gold_steps"):
            v = kw.get(key)
            kw[key] = None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)
        for key in ("answer_unit", "subject"):
            if kw.get(key) is None:
                kw[key] = ""
        return cls(**kw)
