"""Answers in text, for the data readers, grading and the baselines: the last `\\boxed{...}` of a solution, a
data set's plain number, a number with the unit written after it, and the answer in a model's free text or in a
program's output. Never raises on odd text: None when there is no answer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pcr_ray.core.units import try_unit_info

MAX_TEXT_CHARS = 10_000  # longer answer text is no answer (parse_quantity)


# ---------------------------------------------------------------- the last \boxed{...}

def last_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} (or \\fbox{...}, or '\\boxed 5') in a solution; None if absent."""
    idx = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if idx < 0:
        return None
    i = idx + (6 if text.startswith("\\boxed", idx) else 5)
    if i < len(text) and text[i] == " ":
        m = re.match(r" ([^\s$]+)", text[i:])
        return m.group(1) if m else None
    if i >= len(text) or text[i] != "{":
        return None
    depth, start = 0, i
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : j]
    return None


# ---------------------------------------------------------------- a data set's plain number

_PLAIN_NUM_RE = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")
_PLAIN_FRAC_RE = re.compile(r"^(-?)\\[dt]?frac\{(-?\d+)\}\{(\d+)\}$")


def parse_number(text: str) -> float | None:
    """A plain number ('1,000', '-3.5', '$12', '\\frac{9}{7}', '50\\%') as a float, else None."""
    s = text.strip().strip("$").strip().replace("\u2212", "-")
    s = re.sub(r"\\(?:!|,|;|\s)", "", s)
    s = s.replace("\\%", "").replace("%", "").replace("\\$", "").strip()
    s = re.sub(r"^\\text\{([^{}]*)\}$", r"\1", s)
    if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    if _PLAIN_NUM_RE.match(s):
        return float(s)
    m = _PLAIN_FRAC_RE.match(s)
    if m and int(m.group(3)) != 0:
        v = int(m.group(2)) / int(m.group(3))
        return -v if m.group(1) else v
    return None


# ---------------------------------------------------------------- a number and the unit text after it

_QTY_NUM = (r"[-+−]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+(?:\.\d*)?|\.\d+)")
_LEAD_RE = re.compile(
    r"^\s*(?P<cur>\$|US\$|USD\s)?\s*(?P<num>" + _QTY_NUM + r")"
    r"(?:\s*(?:[eE](?P<e>[-+]?\d+)|(?:\\times|×|x|\*|\\cdot)\s*10\s*\^\s*\{?\s*(?P<p>[-+−]?\d+)\s*\}?))?"
    r"(?:\s*/\s*(?P<den>\d+)(?![\d.]))?"
)
_LEAD_FRAC_RE = re.compile(r"^\s*([-+−]?)\s*\\[dt]?frac\s*\{\s*([-+−]?\d+(?:\.\d+)?)\s*\}\s*\{\s*(\d+(?:\.\d+)?)\s*\}")
_ANSWER_PREFIX = re.compile(r"^(?:.*?(?:final answer|answer)\s*(?:is|:)\s*|.*####\s*)", re.IGNORECASE | re.DOTALL)


def parse_quantity(text: str) -> tuple[float, str] | None:
    """A number and the unit text after it from an answer string ('$1,000', '3.0 x 10^8 m/s', '\\frac{1}{2}',
    'The answer is 25 km', '#### 18'); None when there is no number. Never raises."""
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT_CHARS:
        return None
    s = text.strip()
    boxed = last_boxed(s)
    if boxed is not None:
        s = boxed
    elif re.search(r"answer\s*(?:is|:)|####", s, re.IGNORECASE):
        s = _ANSWER_PREFIX.sub("", s, count=1)
    s = s.replace("\\$", "$").replace("\\%", "%").replace("\\!", "").replace("\\,", "").replace("{,}", ",")
    s = s.strip().rstrip(".").strip()
    s = re.sub(r"^\$\s*(?=[\d.+\-−\\])", "$", s)
    inner = re.fullmatch(r"\$([^$]+)\$", s)
    if inner:
        s = inner.group(1).strip()
    m = _LEAD_FRAC_RE.match(s)
    if m:
        den = float(m.group(3))
        if den == 0:
            return None
        v = float(m.group(2).replace("−", "-")) / den
        v = -v if m.group(1) in ("-", "−") else v
        return v, s[m.end():].strip()
    m = _LEAD_RE.match(s)
    if not m:
        # a number somewhere else: the last one, and what follows it
        nums = list(re.finditer(_QTY_NUM, s))
        if not nums:
            return None
        m = _LEAD_RE.match(s, nums[-1].start())
        if not m:
            return None
    try:
        v = float(m.group("num").replace(",", "").replace("−", "-"))
        if m.group("e"):
            v *= 10.0 ** int(m.group("e"))
        if m.group("p"):
            v *= 10.0 ** int(m.group("p").replace("−", "-"))
        if m.group("den"):
            d = float(m.group("den"))
            if d == 0:
                return None
            v /= d
    except (ValueError, OverflowError):
        return None
    if not math.isfinite(v):
        return None
    rest = s[m.end():].strip()
    if m.group("cur"):
        rest = "USD"
    return v, rest


# ---------------------------------------------------------------- model text and program output

_TEXT_NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+(?:[eE][-+]?\d+)?"
_TEXT_NUM_RE = re.compile(rf"(?<![\w.])({_TEXT_NUM})(?:\s*/\s*(\d+(?:\.\d+)?))?")
_ANSWER_LINE = re.compile(r"(?:final\s+)?answer\s*(?:is|:|=)\s*(.+)", re.IGNORECASE)
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
        m = _TEXT_NUM_RE.search(text)
        if m:
            v = _to_float(m.group(1), m.group(2))
            return None if v is None else Extracted(v, "USD", text.strip()[:80])
    m = _TEXT_NUM_RE.search(text)
    if not m:
        return None
    v = _to_float(m.group(1), m.group(2))
    if v is None:
        return None
    return Extracted(v, _unit_after(text[m.end():]), text.strip()[:80])


def extract_answer(text: str) -> Extracted | None:
    """The answer in model text: \\boxed{...}, else the last 'answer: ...' line, else the last number."""
    boxed = last_boxed(text)
    if boxed:
        hit = first_quantity(boxed.replace("\\,", "").replace("\\text", ""))
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
        matches = list(_TEXT_NUM_RE.finditer(line))
        if not matches:
            continue
        m = matches[-1] if len(matches) > 1 and not _unit_after(line[matches[0].end():]) else matches[0]
        v = _to_float(m.group(1), m.group(2))
        if v is None:
            continue
        unit = "USD" if line[max(0, m.start() - 1):m.start()] == "$" else _unit_after(line[m.end():])
        return Extracted(v, unit, line.strip()[:80])
    return None
