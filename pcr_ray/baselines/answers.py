"""Pull a numeric answer (and its unit, if any) out of free model text or program output."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pcr_ray.core.units import try_unit_info

_NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+(?:[eE][-+]?\d+)?"
_NUM_RE = re.compile(rf"(?<![\w.])({_NUM})(?:\s*/\s*(\d+(?:\.\d+)?))?")
_ANSWER_LINE = re.compile(r"(?:final\s+)?answer\s*(?:is|:|=)\s*(.+)", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")
_UNIT_TOKEN = re.compile(r"^\s*((?:1/)?[A-Za-z$%°µμΩ][\w/^*·.\-$%°µμΩ()]*(?:\s*/\s*[A-Za-z][\w^]*)?)")


@dataclass(frozen=True)
class Extracted:
    """A number found in text, the unit written after it ('' if none parses) and the span it came from."""

    value: float
    unit: str
    source: str


def _to_float(num: str, den: str | None) -> float | None:
    try:
        v = float(num.replace(",", ""))
        if den is not None:
            d = float(den)
            if d == 0:
                return None
            v /= d
        return v
    except ValueError:
        return None


def _unit_after(text: str) -> str:
    m = _UNIT_TOKEN.match(text)
    if not m:
        return ""
    unit = m.group(1).rstrip(".,;:)")
    if unit.startswith("$"):
        return "USD"
    return unit if try_unit_info(unit) is not None else ""


def first_quantity(text: str) -> Extracted | None:
    """The first number in `text` with the unit that follows it (when it parses as a unit)."""
    if "$" in text[:3]:
        m = _NUM_RE.search(text)
        if m:
            v = _to_float(m.group(1), m.group(2))
            return None if v is None else Extracted(v, "USD", text.strip()[:80])
    m = _NUM_RE.search(text)
    if not m:
        return None
    v = _to_float(m.group(1), m.group(2))
    if v is None:
        return None
    return Extracted(v, _unit_after(text[m.end():]), text.strip()[:80])


def extract_answer(text: str) -> Extracted | None:
    """The answer in model text: \\boxed{...}, else the last 'answer: ...' line, else the last number."""
    boxed = _BOXED.findall(text)
    if boxed:
        hit = first_quantity(boxed[-1].replace("\\,", "").replace("\\text", ""))
        if hit:
            return hit
    lines = [m.group(1) for m in _ANSWER_LINE.finditer(text)]
    if lines:
        hit = first_quantity(lines[-1])
        if hit:
            return hit
    return last_quantity(text)


def last_quantity(text: str) -> Extracted | None:
    """The last number in `text` (e.g. a program's output), with its unit when one follows on its line."""
    for line in reversed([ln for ln in text.strip().splitlines() if ln.strip()]):
        matches = list(_NUM_RE.finditer(line))
        if not matches:
            continue
        m = matches[-1] if len(matches) > 1 and not _unit_after(line[matches[0].end():]) else matches[0]
        v = _to_float(m.group(1), m.group(2))
        if v is None:
            continue
        unit = "USD" if line[max(0, m.start() - 1):m.start()] == "$" else _unit_after(line[m.end():])
        return Extracted(v, unit, line.strip()[:80])
    return None
