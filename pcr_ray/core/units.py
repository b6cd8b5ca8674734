"""Unit strings -> cached (scale, offset, dimension vector): pint parses once, the hot path does integer arithmetic.

Every quantity inside the verifier is a float in SI base units (plus USD for currency and `item` for
countable things) and an integer dimension vector over `BASE_DIMS`. Pint is consulted only when a unit
string is seen for the first time; the result is cached.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import pint

# Order of the dimension vector. Angles are dimensionless (radians), as in pint and SI.
BASE_DIMS: tuple[str, ...] = (
    "[length]",
    "[mass]",
    "[time]",
    "[current]",
    "[temperature]",
    "[substance]",
    "[luminosity]",
    "[currency]",
    "[count]",
)
NDIM = len(BASE_DIMS)
Dims = tuple[int, ...]
DIMENSIONLESS: Dims = (0,) * NDIM

# Units the project registers on top of pint's defaults. Kept as data, one definition per line (pint syntax).
PROJECT_UNIT_DEFINITIONS: tuple[str, ...] = (
    "USD = [currency] = dollar = usd = buck",
    "cent = 0.01 USD = cents_ = ¢",
    "EUR = 1 USD = euro",  # no exchange rates: a currency is a currency
    "GBP = 1 USD = pound_sterling",
    "item = [count] = each = ea",
    "rev = revolution",  # Halliday's '20.0 rev'; pint knows revolution and turn only
)
# Countable nouns registered as `[count]` units (plurals are handled by pint's suffix rule).
DEFAULT_COUNT_UNITS: tuple[str, ...] = (
    "person", "people", "egg", "apple", "book", "page", "student", "cookie", "ticket", "box", "bag",
    "car", "toy", "candy", "marble", "pencil", "sticker", "flower", "tree", "cupcake", "muffin", "pie",
    "slice", "orange", "banana", "bottle", "cup", "card", "friend", "child", "children", "kid", "animal",
    "dog", "cat", "bird", "chicken", "cow", "horse", "fish", "shirt", "pair", "game", "video", "song",
    "piece", "unit", "packet", "pack", "can", "jar", "plant", "seed", "bead", "shell", "stamp", "coin",
    "balloon", "ball", "chair", "table", "room", "house", "class", "team", "player", "worker", "employee",
    "customer", "visitor", "guest", "boy", "girl", "man", "woman", "sheep", "goat", "pig", "duck",
    "lesson", "problem", "question", "task", "job", "trip", "lap", "round", "step_", "word", "letter",
    # the counted nouns most often written after a number in GSM8K's training questions
    "cookie", "bill", "row", "block", "pizza", "episode", "cake", "floor", "dime", "pen", "notebook", "sandwich",
    "carton", "member", "loaf", "sheet", "rose", "photo", "crayon", "seat", "package", "serving", "doll", "puppy",
    "passenger", "strawberry", "nickel", "necklace", "crate", "tomato", "meal", "painting", "penny", "leaf",
    "picture", "brownie", "carrot", "jellybean", "lollipop", "adult", "movie", "brick", "sibling", "wheel",
    "teacher", "potato", "bracelet", "truck", "pill", "mango", "chocolate", "batch", "donut", "seashell",
    "bicycle", "group", "sweater", "snake", "fruit", "window", "vote", "gift", "container", "ant",
    "tile", "bucket", "plate", "basket", "coconut", "dress", "soda", "daisy", "hamburger", "apartment", "nut",
    "marker", "kitten", "hen", "rock", "burger", "bike", "email", "phone", "lemon", "pancake", "pebble", "sack",
    "lion", "button", "skirt", "chapter", "family", "follower", "message", "grape", "watermelon", "pear",
    "magazine", "comic", "vegetable", "lemonade", "donation", "sale", "poster", "present", "shoe", "sock",
    "glove", "puzzle", "tire", "rabbit", "frog", "fox", "bee", "nail", "envelope",
)


Kinds = tuple[tuple[str, int], ...]  # what a unit counts: ((noun, exponent), ...), sorted; () counts nothing


class UnitError(ValueError):
    """A unit string that cannot be parsed, or an impossible conversion."""


@dataclass(frozen=True, slots=True)
class UnitInfo:
    """A parsed unit: value_in_base = value * scale + offset; `dims` is the dimension vector."""

    text: str
    scale: float
    offset: float
    dims: Dims

    def to_base(self, value: float) -> float:
        return value * self.scale + self.offset

    def from_base(self, base_value: float) -> float:
        return (base_value - self.offset) / self.scale


def _is_defined(ureg: pint.UnitRegistry, name: str) -> bool:
    try:
        ureg.parse_units(name)
        return True
    except Exception:
        return False


def _make_registry() -> pint.UnitRegistry:
    ureg = pint.UnitRegistry(autoconvert_offset_to_baseunit=True, on_redefinition="raise")
    for line in PROJECT_UNIT_DEFINITIONS:
        ureg.define(line)
    for noun in DEFAULT_COUNT_UNITS:
        if not _is_defined(ureg, noun):  # keep pint's meaning of words it knows (e.g. `cup` is a volume)
            ureg.define(f"{noun} = item")
    return ureg


UREG = _make_registry()
_COUNT_DIMS: Dims = tuple(int(n == "[count]") for n in BASE_DIMS)


def register_count_unit(name: str) -> None:
    """Register another countable noun (e.g. 'widget') as a `[count]` unit."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z_]*", name):
        raise UnitError(f"count unit names are letters only, got {name!r}")
    if _is_defined(UREG, name):
        raise UnitError(f"{name!r} is already a unit ({UREG.parse_units(name)}); pick another name")
    UREG.define(f"{name} = item")
    unit_info.cache_clear()
    count_kinds.cache_clear()
    _is_count_noun.cache_clear()


# LaTeX-ish and colloquial spellings -> pint syntax. Applied in order.
_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), r)
    for p, r in (
        (r"\\mathrm\s*\{\s*~?\s*([^{}]*)\}", r" \1 "),
        (r"\\text\s*\{\s*~?\s*([^{}]*)\}", r" \1 "),
        (r"\\operatorname\s*\{([^{}]*)\}", r" \1 "),
        (r"\\mu\s*", "u"),
        (r"μ|µ", "u"),
        (r"\\AA|Å", "angstrom"),
        (r"\^\s*\{\s*\\circ\s*\}\s*C|\^\s*\\circ\s*C|°\s*C|℃", "degC"),
        (r"\^\s*\{\s*\\circ\s*\}\s*F|\^\s*\\circ\s*F|°\s*F", "degF"),
        (r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|°", " degree"),
        (r"\\Omega|Ω", "ohm"),
        (r"\\cdot|\\times|·|×", "*"),
        (r"\\left|\\right|\\,|\\;|\\!|~|\$", " "),
        (r"\^\s*\{\s*([-+]?\s*[0-9./]+)\s*\}", r"**\1"),
        (r"\{\s*\\circ\s*\}", " degree"),
        (r"\{|\}", " "),
        # SciBench spellings
        (r"\bft\s*-\s*lb\b", "ft*lbf"),
        (r"\bKJ\b", "kJ"),
        (r"\bkPA\b", "kPa"),
        (r"\bTorr\b", "torr"),
        (r"\bYears?\b", "year"),
        (r"\bJK\b", "J*K"),
        (r"\bJmol\b", "J*mol"),
        (r"\b(?:photons?|electrons?|molecules?|atoms?)\b", "item"),
        (r"\bper\b", "/"),
        (r"\bsquare\s+([a-z]+)", r"\1**2"),
        (r"\bcubic\s+([a-z]+)", r"\1**3"),
        (r"\bsq\.?\s*([a-z]+)", r"\1**2"),
        (r"\^", "**"),
    )
)
_LEADING_SCALE = re.compile(
    r"^\s*(?:([0-9.]+)\s*(?:\\times|\*|x|×)\s*)?10\s*(?:\^|\*\*)\s*\{?\s*([-+]?\d+)\s*\}?\s*(.*)$"
)
_POWER = re.compile(r"\*\*\s*(?:\(\s*([-+]?)\s*(\d+)\s*\)|([-+]?)\s*(\d+))")
# words pint reads as obscure units (cat = catty, a mass) that problems mean as counts
_COUNT_WORD = re.compile(r"\b(?:counts?|cats?|bags?|units?)\b")
_CURRENCY_WORDS = re.compile(r"^\s*(\$|dollars?|usd|US\$)\s*$", re.IGNORECASE)


_WRAPPER_RE = re.compile(r"\\(?:mathrm|text|operatorname)\s*\{")


def _unwrap(s: str) -> str:
    """`\\mathrm{...}`, `\\text{...}` and `\\operatorname{...}` replaced by their contents, braces nested inside kept
    ('\\mathrm{m^2~s^{-1}}' -> ' m^2~s^{-1} '); an unclosed wrapper is left for pint to refuse."""
    while (m := _WRAPPER_RE.search(s)) is not None:
        depth, k = 1, m.end()
        while k < len(s) and depth:
            depth += {"{": 1, "}": -1}.get(s[k], 0)
            k += 1
        if depth:
            return s
        inner = s[m.end():k - 1].strip()
        s = s[:m.start()] + " " + (inner[1:] if inner.startswith("~") else inner) + " " + s[k:]
    return s


def normalize_unit_text(text: str) -> tuple[float, str]:
    """Split a leading power-of-ten factor off and rewrite LaTeX/colloquial spellings for pint.

    Returns (factor, pint_text); e.g. '10^4 N/C' -> (1e4, 'N/C'), '\\mathrm{~m} / \\mathrm{s}' -> (1, 'm / s').
    """
    s = text.strip()
    factor = 1.0
    m = _LEADING_SCALE.match(s)
    if m and m.group(3).strip():
        mant = float(m.group(1)) if m.group(1) else 1.0
        factor = mant * 10.0 ** int(m.group(2).replace(" ", ""))
        s = m.group(3)
    if _CURRENCY_WORDS.match(s):
        return factor, "USD"
    s = _unwrap(s.replace("%", " percent "))
    s = _COUNT_WORD.sub("item", s)
    for pat, rep in _REWRITES:
        s = pat.sub(rep, s)
    s = re.sub(r"\s+", " ", s).strip()
    s = _POWER.sub(lambda m: "**" + (m.group(1) or m.group(3) or "") + (m.group(2) or m.group(4)), s)
    s = re.sub(r"(?<=[A-Za-z)])\s*\*\s*\*", "**", s)
    if s in ("", "1", "dimensionless", "-", "none", "None"):
        s = "dimensionless"
    return factor, s


MAX_UNIT_EXPONENT = 12  # |exponent| allowed in a unit: pint computes scale**n exactly, so 'kn²²²²²²²²' would hang
_SUPERSCRIPT_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")
_EXPONENT_LITERAL = re.compile(r"\*\*\s*\(?\s*[-+]?\s*([0-9][0-9.eE+-]*)|([⁰¹²³⁴⁵⁶⁷⁸⁹]+)")
_CHAINED_POWER = re.compile(r"\*\*\s*[-+(\s]*[0-9.eE]+\s*\)?\s*\*\*")


def _check_exponents(pint_text: str, text: str) -> None:
    """UnitError for an exponent beyond MAX_UNIT_EXPONENT or a power of a power (before pint computes them)."""
    if _CHAINED_POWER.search(pint_text):
        raise UnitError(f"unit {text!r}: a power of a power is not a unit")
    for m in _EXPONENT_LITERAL.finditer(pint_text):
        raw = m.group(1) if m.group(1) is not None else m.group(2).translate(_SUPERSCRIPT_DIGITS)
        try:
            e = float(raw.rstrip("+-eE."))
        except ValueError:
            continue  # not a number: pint rejects it
        if abs(e) > MAX_UNIT_EXPONENT:
            raise UnitError(f"unit {text!r}: exponent {raw} is beyond +-{MAX_UNIT_EXPONENT}")


def _dims_of(dimensionality: object) -> Dims:
    d = dict(dimensionality)  # type: ignore[call-overload]
    out = []
    for name in BASE_DIMS:
        e = d.pop(name, 0)
        if abs(e - round(e)) > 1e-9:
            raise UnitError(f"fractional dimension exponent {e} for {name}")
        out.append(int(round(e)))
    extra = {k: v for k, v in d.items() if v}
    if extra:
        raise UnitError(f"unsupported base dimension(s) {sorted(extra)}")
    return tuple(out)


@lru_cache(maxsize=8192)
def unit_info(text: str) -> UnitInfo:
    """Parse a unit string once; later calls return the cached UnitInfo. Raises UnitError."""
    if not isinstance(text, str):
        raise UnitError(f"unit must be a string, got {type(text).__name__}")
    if len(text) > 200:
        raise UnitError("unit string longer than 200 characters")
    try:
        factor, pint_text = normalize_unit_text(text)
        _check_exponents(pint_text, text)
        unit = UREG.parse_units(pint_text)
        if any(abs(e) > MAX_UNIT_EXPONENT for e in unit._units.values()):  # (m**9)**9: built by the parser
            raise UnitError(f"unit {text!r} has an exponent beyond +-{MAX_UNIT_EXPONENT}")
        q1 = UREG.Quantity(1.0, unit)
        if not q1._is_multiplicative:  # offset unit such as degC: measure scale and offset separately
            q0 = UREG.Quantity(0.0, unit).to_base_units()
            q1b = UREG.Quantity(1.0, unit).to_base_units()
            offset = float(q0.magnitude)
            scale = float(q1b.magnitude) - offset
            dims = _dims_of(q1b.dimensionality)
        else:
            base = q1.to_base_units()
            scale, offset = float(base.magnitude), 0.0
            dims = _dims_of(base.dimensionality)
    except UnitError:
        raise
    except Exception as exc:  # pint raises many types (UndefinedUnitError, DimensionalityError, ...)
        raise UnitError(f"cannot parse unit {text!r}: {exc}".splitlines()[0]) from None
    scale *= factor
    if not (math.isfinite(scale) and scale != 0 and math.isfinite(offset)):
        raise UnitError(f"unit {text!r} has a non-finite or zero scale")
    return UnitInfo(text=text, scale=scale, offset=offset, dims=dims)


def try_unit_info(text: str) -> UnitInfo | None:
    """unit_info, or None when the string does not parse."""
    try:
        return unit_info(text)
    except UnitError:
        return None


@lru_cache(maxsize=8192)
def count_kinds(text: str) -> Kinds | None:
    """What a unit counts: 'orange/sack' -> (('orange', 1), ('sack', -1)); 'm/s' -> (); None for `item`.

    A count noun (a `[count]` unit of scale 1 other than `item`) is a kind of its own; the generic `item`
    counts something unknown, so a unit that holds it has no kinds to check (None). Raises UnitError.
    """
    unit_info(text)  # the same parse errors as everywhere else
    _, pint_text = normalize_unit_text(text)
    kinds: dict[str, int] = {}
    for name, exp in UREG.parse_units(pint_text)._units.items():
        if name == "item":
            return None
        if _is_count_noun(name):
            kinds[name] = kinds.get(name, 0) + int(exp)
    return tuple(sorted((n, e) for n, e in kinds.items() if e))


@lru_cache(maxsize=4096)
def _is_count_noun(name: str) -> bool:
    info = try_unit_info(name)
    return info is not None and info.dims == _COUNT_DIMS and info.scale == 1.0 and info.offset == 0.0


def generic_count_unit(text: str) -> str:
    """The unit with every count noun read as the generic `item` ('USD/orange' -> 'USD/item'): kinds unchecked."""
    kinds = count_kinds(text)
    if not kinds:
        return text
    factor, pint_text = normalize_unit_text(text)
    if factor != 1.0:
        return text
    exps: dict[str, int] = {}
    for name, exp in UREG.parse_units(pint_text)._units.items():
        key = "item" if _is_count_noun(name) else str(name)
        exps[key] = exps.get(key, 0) + int(exp)
    num = [n + (f"^{e}" if e != 1 else "") for n, e in exps.items() if e > 0]
    den = [n + (f"^{-e}" if e != -1 else "") for n, e in exps.items() if e < 0]
    out = "*".join(num) or "1"
    if den:
        out += "/" + ("(" + "*".join(den) + ")" if len(den) > 1 else den[0])
    return out if out != "1" else "dimensionless"


def format_kinds(kinds: Kinds) -> str:
    """'orange/sack' style text of a kind vector ('nothing counted' for ())."""
    num = [n + (f"^{e}" if e != 1 else "") for n, e in kinds if e > 0]
    den = [n + (f"^{-e}" if e != -1 else "") for n, e in kinds if e < 0]
    if not num and not den:
        return "nothing counted"
    return ("*".join(num) or "1") + ("/" + "/".join(den) if den else "")


def dims_of_unit(text: str) -> Dims:
    return unit_info(text).dims


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a number between two units of the same dimension. Raises UnitError otherwise."""
    a, b = unit_info(from_unit), unit_info(to_unit)
    if a.dims != b.dims:
        raise UnitError(f"cannot convert {from_unit!r} ({format_dims(a.dims)}) to {to_unit!r} ({format_dims(b.dims)})")
    return b.from_base(a.to_base(value))


@lru_cache(maxsize=65536)
def dims_mul(a: Dims, b: Dims) -> Dims:
    """Dimension of a product (cached: the hot path sees few distinct pairs)."""
    return tuple(x + y for x, y in zip(a, b, strict=True))


@lru_cache(maxsize=65536)
def dims_div(a: Dims, b: Dims) -> Dims:
    """Dimension of a quotient (cached)."""
    return tuple(x - y for x, y in zip(a, b, strict=True))


def dims_pow(a: Dims, n: int) -> Dims:
    return tuple(x * n for x in a)


def format_dims(d: Dims) -> str:
    """Human-readable dimension, e.g. '[length] / [time] ** 2'; 'dimensionless' for all zeros."""
    if not any(d):
        return "dimensionless"
    num = [f"{n}" + (f"**{e}" if e != 1 else "") for n, e in zip(BASE_DIMS, d, strict=True) if e > 0]
    den = [f"{n}" + (f"**{-e}" if e != -1 else "") for n, e in zip(BASE_DIMS, d, strict=True) if e < 0]
    s = " * ".join(num) if num else "1"
    return s + (" / " + " / ".join(den) if den else "")


# A readable SI unit string per common dimension (for messages, the enumerator and CSP's output units).
_CANONICAL_UNIT_TEXT = (
    "m", "kg", "s", "A", "K", "mol", "cd", "USD", "item",
    "m/s", "m/s^2", "N", "J", "W", "Pa", "C", "V", "ohm", "F", "Hz", "kg*m/s", "m^2", "m^3", "N*s",
    "kg/m^3", "N/m", "J/K", "J/(kg*K)", "J/mol", "J/(mol*K)", "N/C", "T", "H", "Wb", "USD/s", "USD/item",
    "item/s", "m/item", "kg/item", "s/item", "m^3/s", "kg/s", "W/m^2", "N*m^2/kg^2", "J*s", "C/s",
    "rad/s", "rad/s^2", "kg*m^2", "m^2/s", "1/s", "1/K", "K/s", "USD/kg", "USD/m", "item/m",
)


@lru_cache(maxsize=1)
def _canonical_by_dims() -> dict[Dims, str]:
    table: dict[Dims, str] = {DIMENSIONLESS: "dimensionless"}
    for t in _CANONICAL_UNIT_TEXT:
        info = unit_info(t)
        table.setdefault(info.dims, t)
    return table


def canonical_unit(d: Dims) -> str:
    """An SI unit string whose dimension is `d` and whose scale is 1 (base units)."""
    hit = _canonical_by_dims().get(d)
    if hit is not None:
        return hit
    symbols = ("m", "kg", "s", "A", "K", "mol", "cd", "USD", "item")
    num = [s + (f"^{e}" if e != 1 else "") for s, e in zip(symbols, d, strict=True) if e > 0]
    den = [s + (f"^{-e}" if e != -1 else "") for s, e in zip(symbols, d, strict=True) if e < 0]
    text = "*".join(num) if num else "1"
    if den:
        text += "/" + ("(" + "*".join(den) + ")" if len(den) > 1 else den[0])
    return text
