"""Givens extraction: problem text -> givens (name, value, unit, description) and the target the question asks.

The default `RuleBasedExtractor` reads numbers (commas, decimals, fractions, scientific notation, LaTeX
`$...$` quantities, number words), the unit phrase next to each number (validated with pcr_ray.core.units), and
words such as 'twice', 'half', 'a dozen', 'from rest'. The target is the unit the question names ('in
kilojoules') or else the dimension it implies ('how far', 'how long', 'what force', 'how many dollars').
Any other extractor (e.g. an LLM-based one) plugs in through the `GivensExtractor` protocol.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pcr_ray.core.trace import Given
from pcr_ray.core.units import BASE_DIMS, DEFAULT_COUNT_UNITS, DIMENSIONLESS, Dims, UnitInfo, try_unit_info, unit_info


@dataclass(frozen=True, slots=True)
class Target:
    """What the question asks for: a unit when it names one, else an implied dimension (or nothing)."""

    unit: str | None = None
    dims: Dims | None = None
    phrase: str = ""

    @property
    def known(self) -> bool:
        return self.dims is not None


@dataclass(frozen=True, slots=True)
class Mention:
    """A quantity found in the text: value in `unit`, the character span, and the words around it."""

    value: float
    unit: str
    start: int
    end: int
    text: str
    kind: str = "number"  # number | word | percent | money | rest | factor | fraction | raw
    noun: str = ""  # the counted noun for count units ('friends' in '48 of her friends')


@dataclass(frozen=True, slots=True)
class Extraction:
    """The givens and the target an extractor found in one problem text."""

    givens: tuple[Given, ...]
    target: Target = field(default_factory=Target)
    mentions: tuple[Mention, ...] = ()


@runtime_checkable
class GivensExtractor(Protocol):
    """Anything that turns a problem text into an Extraction (rule-based by default; an LLM later)."""

    def extract(self, text: str) -> Extraction: ...


# ---------------------------------------------------------------- text normalisation (LaTeX -> plain)

_LATEX_SUBS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), r)
    for p, r in (
        (r"\\(?:mathrm|text|textrm|mathit|rm|operatorname)\s*\{\s*~?\s*([^{}]*)\}", r" \1"),
        (r"\{,\}", ","),
        (r"\\(?:d|t)?frac\s*\{\s*(\d+(?:\.\d+)?)\s*\}\s*\{\s*(\d+(?:\.\d+)?)\s*\}", r" \1/\2 "),
        (r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ", "°"),
        (r"\\times|\\cdot", " × "),
        (r"\\mu\s*|µ", "μ"),
        (r"\\Omega", "Ω"),
        (r"\\%", "%"),
        (r"\\\$", "$"),
        (r"\\[,;:! ]|~", " "),
        (r"\\left|\\right", ""),
        (r"\^\s*\{\s*([-+−]?\s*\d+)\s*\}", r"^\1"),
        (r"−", "-"),
        (r"²", "^2"),
        (r"³", "^3"),
    )
)


_MATH_PAIR = re.compile(r"\$(?!\s)([^$]*?[^\s$])\$(?!\d)")


def _unwrap_math(m: re.Match[str]) -> str:
    inner = m.group(1)
    return f" {inner} "


def normalize_text(text: str) -> str:
    """Plain text from problem text with inline LaTeX: '$1.0 \\mathrm{~cm}$' -> ' 1.0  cm ' (same meaning).

    A pair of dollar signs is LaTeX math when the content hugs both signs ('$20 \\mathrm{~km}$', '$v_0$');
    '$5 and $10' keeps its currency signs.
    """
    s = text.replace("\\$", "\x00")
    if "\\" in s or re.search(r"\$[^$\s][^$]*[^$\s]\$(?![\d])", s):
        s = _MATH_PAIR.sub(_unwrap_math, s)
    s = s.replace("\x00", "\\$")
    for pat, rep in _LATEX_SUBS:
        s = pat.sub(rep, s)
    # a LaTeX math delimiter is a space; a currency dollar sign is kept ('$12', '$ 12')
    s = re.sub(r"\$(?!\s?\.?\d)", " ", s)
    s = s.replace("{", " ").replace("}", " ")
    return s


# ---------------------------------------------------------------- unit vocabulary

# Unit words a problem may write, lower case, singular -> unit string pint parses. Plurals: + 's'/'es'.
UNIT_WORDS: dict[str, str] = {
    # time
    "second": "s", "sec": "s", "secs": "s", "millisecond": "ms", "microsecond": "us", "nanosecond": "ns",
    "picosecond": "ps", "minute": "minute", "min": "minute", "mins": "minute",
    "hour": "hour", "hr": "hour", "hrs": "hour", "day": "day", "week": "week", "month": "month", "year": "year",
    "decade": "decade", "century": "century",
    # length / area / volume
    "meter": "m", "metre": "m", "kilometer": "km", "kilometre": "km", "centimeter": "cm", "centimetre": "cm",
    "millimeter": "mm", "millimetre": "mm", "micrometer": "um", "nanometer": "nm", "mile": "mile", "foot": "foot",
    "feet": "foot", "inch": "inch", "inches": "inch", "yard": "yard", "liter": "L", "litre": "L",
    "milliliter": "mL", "millilitre": "mL", "gallon": "gallon", "quart": "quart", "acre": "acre",
    # mass
    "kilogram": "kg", "gram": "g", "milligram": "mg", "pound": "lb", "ounce": "oz", "ton": "ton", "tonne": "t",
    # money
    "dollar": "USD", "buck": "USD", "cent": "cent", "euro": "EUR",
    # physics
    "newton": "N", "joule": "J", "kilojoule": "kJ", "megajoule": "MJ", "watt": "W", "kilowatt": "kW",
    "megawatt": "MW", "volt": "V", "kilovolt": "kV", "ampere": "A", "amp": "A", "milliampere": "mA",
    "coulomb": "C", "microcoulomb": "uC", "ohm": "ohm", "kilohm": "kohm", "farad": "F", "microfarad": "uF",
    "henry": "H", "tesla": "T", "hertz": "Hz", "kilohertz": "kHz", "megahertz": "MHz", "kelvin": "K",
    "pascal": "Pa", "kilopascal": "kPa", "atmosphere": "atm", "calorie": "cal", "kilocalorie": "kcal",
    "electronvolt": "eV", "mole": "mol", "radian": "rad", "degree": "degree", "revolution": "revolution",
    "mph": "mph", "kph": "km/hour", "knot": "knot", "torr": "torr",
}
# SI-prefixed unit words ('megacoulombs', 'nanometers', 'kilonewtons': textbook questions ask in them)
_WORD_PREFIXES = {"kilo": "k", "mega": "M", "giga": "G", "milli": "m", "micro": "u", "nano": "n", "pico": "p",
                  "femto": "f"}
_PREFIXABLE_WORDS = {"meter": "m", "metre": "m", "gram": "g", "second": "s", "joule": "J", "coulomb": "C",
                     "newton": "N", "watt": "W", "volt": "V", "ampere": "A", "farad": "F", "hertz": "Hz",
                     "pascal": "Pa", "electronvolt": "eV", "tesla": "T", "henry": "H", "mole": "mol"}
for _p, _sym in _WORD_PREFIXES.items():
    for _w, _u in _PREFIXABLE_WORDS.items():
        UNIT_WORDS.setdefault(_p + _w, _sym + _u)
# Case-sensitive unit symbols (prefixable SI symbols and common abbreviations).
# symbol -> the SI prefixes it is written with in problems ('km', 'mA', 'uF', 'kPa', ...)
_SI_PREFIXES: dict[str, str] = {
    "m": "kcmuμnp", "g": "kmuμ", "s": "muμnp", "N": "kMm", "J": "kMmuμ", "W": "kMGm", "V": "kmuμ", "A": "muμ",
    "C": "muμnp", "K": "", "Pa": "kMh", "Hz": "kMG", "Ω": "kM", "ohm": "kM", "F": "muμnp", "H": "muμ", "T": "muμ",
    "L": "m", "eV": "kMG", "mol": "mk", "Wb": "", "cal": "k", "bar": "m",
}
UNIT_SYMBOLS: frozenset[str] = frozenset(
    {s for s in _SI_PREFIXES} | {p + s for s, ps in _SI_PREFIXES.items() for p in ps}
    | {"min", "h", "hr", "yr", "km/h", "mph", "kph", "ft", "yd", "mi", "lb", "lbs", "oz", "gal", "mL", "ml", "atm",
       "rpm", "°", "°C", "°F", "degC", "degF", "rad", "sr", "kWh", "Wh", "psi", "USD", "torr", "Torr",
       "rev", "cP", "mP", "uP", "μP"}
)
_COUNT_WORDS: frozenset[str] = frozenset(w for w in DEFAULT_COUNT_UNITS if not w.endswith("_"))
# Words that are not quantities' units but may sit between a number and its noun ('48 of her friends').
_FILLER = frozenset(
    "of her his their its the more extra additional new old small large big little full empty whole other "
    "different total such fresh same identical equal times".split()
)
# Words after a number that are never count nouns.
_NOT_NOUN = frozenset(
    "times more less fewer than as and or of in on at to per each every the a an is are was were be it its this "
    "that these those his her their them they he she we you i percent dozen half hundred thousand million "
    "billion trillion times years old year minutes hours days weeks months seconds so but if then".split()
)
_IRREGULAR_PLURALS = {"children": "child", "people": "person", "men": "man", "women": "woman", "feet": "foot",
                      "teeth": "tooth", "geese": "goose", "mice": "mouse", "sheep": "sheep", "fish": "fish",
                      "inches": "inch", "boxes": "box", "peaches": "peach", "sandwiches": "sandwich",
                      "dishes": "dish", "classes": "class", "glasses": "glass", "buses": "bus",
                      "benches": "bench", "matches": "match", "watches": "watch", "brushes": "brush",
                      "candies": "candy", "puppies": "puppy", "cherries": "cherry", "berries": "berry",
                      "strawberries": "strawberry", "blueberries": "blueberry", "pennies": "penny",
                      "babies": "baby", "ladies": "lady", "stories": "story", "pastries": "pastry",
                      "centuries": "century", "loaves": "loaf", "leaves": "leaf", "knives": "knife",
                      "shelves": "shelf", "wolves": "wolf", "halves": "half", "potatoes": "potato",
                      "tomatoes": "tomato", "heroes": "hero"}


_IE_NOUNS = frozenset({"cookie", "brownie", "movie", "calorie", "zombie", "rookie", "selfie", "hoodie", "smoothie",
                       "goalie", "sweetie", "pixie", "veggie", "birdie", "freebie"})


def singular(word: str) -> str:
    """A plain English singular of a (lower-case) plural noun."""
    w = word.lower()
    if w in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[w]
    if w.endswith("ies") and len(w) > 4:
        return w[:-1] if w[:-1] in _IE_NOUNS else w[:-3] + "y"
    if w.endswith(("sses", "xes", "zes", "ches", "shes")) and len(w) > 4:
        return w[:-2]
    if w.endswith("oes") and len(w) > 4 and w not in ("shoes", "canoes"):
        return w[:-2]
    if w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        return w[:-1]
    return w


def unit_word(word: str) -> str | None:
    """The unit string of a unit word ('miles' -> 'mile', 'Newtons' -> 'N'); None if it is not one."""
    w = word.lower()
    hit = UNIT_WORDS.get(w) or UNIT_WORDS.get(singular(w))
    return hit


def count_noun(word: str) -> str | None:
    """The registered count unit of a countable noun ('eggs' -> 'egg'), else None."""
    s = singular(word)
    if word.lower() in _VERBISH:
        return None
    if s in _COUNT_WORDS or word.lower() in _COUNT_WORDS:
        u = s if s in _COUNT_WORDS else word.lower()
        info = try_unit_info(u)
        if info is not None and info.dims == _ITEM.dims and info.scale == 1.0:
            return u
    return None


_ITEM = unit_info("item")
_VERBISH = frozenset({"can", "cans_", "will", "do", "does", "did", "are", "is", "round", "step", "job"})

# ---------------------------------------------------------------- reading a unit after a number

_ATOM = r"(?:[A-Za-zμΩ°][A-Za-zμΩ°]*)(?:\s*\^\s*(?:\(\s*[-+]?\d+\s*\)|[-+]?\d+))?"
_ATOM_RE = re.compile(_ATOM)
_SEP_RE = re.compile(r"\s*(?:/|\*|·|×|\bper\b)\s*|\s+(?=[A-Za-zμΩ°]+\s*\^)")
_SQ_RE = re.compile(r"^(?:square|sq\.?)\s+", re.IGNORECASE)


def _atom_unit(atom: str) -> str | None:
    """The pint text of one unit atom ('km', 'm^2', 'Newtons', 'seconds^2'), or None."""
    m = re.match(r"([A-Za-zμΩ°]+)(?:\s*\^\s*\(?\s*([-+]?\d+)\s*\)?)?$", atom.strip())
    if not m:
        return None
    word, exp = m.group(1), m.group(2)
    if word in UNIT_SYMBOLS:
        base = {"°": "degree", "Ω": "ohm", "lbs": "lb", "ml": "mL"}.get(word, word).replace("μ", "u")
        base = base.replace("Ω", "ohm")
    else:
        base = unit_word(word) or ""
        if not base:
            return None
    return f"{base}^{exp}" if exp else base


def read_unit(text: str, pos: int) -> tuple[str, int]:
    """The unit written at text[pos:] (after a number): (pint-parsable unit string, end index) or ('', pos).

    Accepts symbols and words, compounds with '/', '*', '·', 'per', exponents ('m/s^2', 'kg m^-3'),
    'square'/'cubic' and 'squared', degrees Celsius/Fahrenheit, and percent. Every atom must be a known unit
    word or symbol, so English words that pint happens to know ('a', 'in', 'at') are not read as units.
    """
    m = re.match(r"\s*-?\s*", text[pos:])
    i = pos + (m.end() if m else 0)
    rest = text[i:i + 80]
    pm = re.match(r"(%|percent\b|per\s?cent\b)", rest, re.IGNORECASE)
    if pm:
        return "percent", i + pm.end()
    dm = re.match(r"(?:°\s*|degrees?\s+)(C\b|F\b|Celsius|Fahrenheit|centigrade)", rest, re.IGNORECASE)
    if dm:
        return ("degC" if dm.group(1)[0].upper() == "C" else "degF"), i + dm.end()
    if rest.startswith("℃"):
        return "degC", i + 1
    km = re.match(r"(?:km/h|kph|kmph|km/hr)\b", rest)
    if km:
        return "km/hour", i + km.end()
    inv = re.match(r"1\s*/\s*(m|s|K|cm)\b", rest)
    if inv:
        return f"1/{inv.group(1)}", i + inv.end()
    prefix = ""
    sq = _SQ_RE.match(rest) or re.match(r"(cubic)\s+", rest, re.IGNORECASE)
    if sq:
        prefix = "cubic" if sq.group(0).lower().startswith("cubic") else "square"
        rest = rest[sq.end():]
        i += sq.end()
    parts: list[str] = []
    end = i
    j = 0
    while True:
        am = _ATOM_RE.match(rest, j)
        if not am:
            break
        atom_text = am.group(0)
        u = _atom_unit(atom_text)
        if u is None:
            break
        sm = re.match(r"\s+(squared|cubed)\b", rest[am.end():])
        if sm:
            u = f"{u}^{2 if sm.group(1) == 'squared' else 3}" if "^" not in u else u
            stop = am.end() + sm.end()
        else:
            stop = am.end()
        if not parts and prefix:
            u = f"{u}^{2 if prefix == 'square' else 3}" if "^" not in u else u
        parts.append(u)
        end = i + stop
        sep = _SEP_RE.match(rest, stop)
        if not sep:
            break
        parts.append("/" if sep.group(0).strip() in ("/", "per") else "*")
        j = sep.end()
    while parts and parts[-1] in ("/", "*"):
        parts.pop()
    while parts:
        unit = "".join(parts)
        if try_unit_info(unit) is not None:
            return unit, end
        parts = parts[:-2]  # drop the last atom and its separator, retry
        if parts:
            # recompute end: find the end of the remaining atoms by re-reading; conservative: keep first atom
            first = _ATOM_RE.match(rest)
            end = i + (first.end() if first else 0)
    return "", pos


def noun_unit(text: str, pos: int, max_words: int = 3) -> tuple[str, str]:
    """The count unit of the noun that follows a number ('48 of her friends' -> ('friend', 'friends')).

    Returns (unit, noun): a registered count noun gives its own unit, another plural noun gives 'item',
    nothing countable gives ('', '').
    """
    words = re.findall(r"[A-Za-z][A-Za-z'-]*|[.,;:!?()]|\d", text[pos:pos + 60])
    for k, w in enumerate(words[: max_words + 2]):
        if not w[0].isalpha():
            return "", ""
        lw = w.lower().strip("'")
        u = count_noun(lw)
        if u is not None:
            return u, lw
        if lw in _FILLER and k < max_words:
            continue
        if lw not in _NOT_NOUN and lw.endswith("s") and len(lw) > 3 and unit_word(lw) is None \
                and not lw.endswith("ss"):
            return "item", lw
        return "", ""
    return "", ""


# ---------------------------------------------------------------- numbers

_WORD_NUMS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}
_SCALE_WORDS = {"hundred": 100.0, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_FACTOR_WORDS = {"twice": 2.0, "double": 2.0, "doubles": 2.0, "doubled": 2.0, "triple": 3.0, "triples": 3.0,
                 "tripled": 3.0, "thrice": 3.0, "quadruple": 4.0, "half": 0.5, "quarter": 0.25, "third": 1 / 3}
_WORD_NUM_RE = re.compile(
    r"\b(?:(?:a|one)\s+)?(" + "|".join(sorted(_WORD_NUMS, key=len, reverse=True)) + r")(?:[-\s](one|two|three|four|"
    r"five|six|seven|eight|nine))?(?:\s+(hundred|thousand|million))?\b", re.IGNORECASE)
_NUMBER_RE = re.compile(
    r"(?<![\w.])(?P<neg>-\s?)?"
    r"(?:(?P<mixed>\d+)\s+(?P<mnum>\d+)/(?P<mden>\d+)(?![\d/])"
    r"|(?P<fnum>\d+)\s*/\s*(?P<fden>\d+)(?![\d/.])"
    r"|(?P<mant>(?:\d+(?:\.\d*)?|\.\d+))\s*(?:×|x|\*)\s*10\s*\^\s*\(?(?P<exp>[-+]?\d+)\)?"
    r"|(?P<sci>(?:\d+(?:\.\d*)?|\.\d+)[eE][-+]?\d+)"
    r"|(?P<pow>10)\s*\^\s*\(?(?P<pexp>[-+]?\d+)\)?"
    r"|(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+))"
)
_ORDINAL_DEN = {"half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4, "fourth": 4,
                "fourths": 4, "fifth": 5, "fifths": 5, "sixth": 6, "sixths": 6, "seventh": 7, "sevenths": 7,
                "eighth": 8, "eighths": 8, "ninth": 9, "ninths": 9, "tenth": 10, "tenths": 10}
_FRACTION_WORDS_RE = re.compile(
    r"\b(a|an|one|two|three|four|five|six|seven|eight|nine)[-\s](" + "|".join(_ORDINAL_DEN) + r")\b",
    re.IGNORECASE)
_REST_RE = re.compile(r"\b(?:(?:from|at|starts?\s+at|starting\s+(?:from|at))\s+rest|parked|stationary)\b",
                      re.IGNORECASE)
_STOP_RE = re.compile(r"\b(?:comes?|coming|brought|brings?)\s+to\s+(?:a\s+)?(?:stop|rest)\b|\bstops\b",
                      re.IGNORECASE)


def _number_value(m: re.Match[str]) -> float | None:
    g = m.groupdict()
    try:
        if g["mixed"]:
            v = int(g["mixed"]) + int(g["mnum"]) / int(g["mden"])
        elif g["fnum"]:
            v = int(g["fnum"]) / int(g["fden"])
        elif g["mant"]:
            v = float(g["mant"]) * 10.0 ** int(g["exp"])
        elif g["sci"]:
            v = float(g["sci"])
        elif g["pow"]:
            v = 10.0 ** int(g["pexp"])
        else:
            v = float(g["num"].replace(",", ""))
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    if g["neg"]:
        v = -v
    return v if math.isfinite(v) else None


def _word_value(m: re.Match[str]) -> float:
    v = float(_WORD_NUMS[m.group(1).lower()])
    if m.group(2):
        v += _WORD_NUMS[m.group(2).lower()]
    if m.group(3):
        v *= _SCALE_WORDS[m.group(3).lower()]
    return v


# 'heated by 20 °C', 'a rise of 15 °C': the temperature after these is a change (delta_degC), not a reading
_CHANGE_WORDS = r"(?:rise|increase|change|drop|decrease|difference|fall|gain)"
_CHANGE_BEFORE_RE = re.compile(rf"(?:\bby|\b{_CHANGE_WORDS}\s+of)\s*$", re.IGNORECASE)


# '300. K', '300 . K': a trailing decimal point that marks the zeros significant (Engel's thermodynamics), then a
# unit symbol; the article 'A' after a sentence's last number ('... 12. A friend') is not read as amperes
_TRAILING_POINT_RE = re.compile(r" ?\.\s+([A-Za-zμΩ°]+)(?![A-Za-zμΩ°])(?<!\bA)")


def scan_quantities(text: str, rates: bool = True) -> list[Mention]:
    """Every quantity in a (normalised) text, in order: numbers with their units, number words, factors, rest."""
    out: list[Mention] = []
    taken: list[tuple[int, int]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= x or a >= y for x, y in taken)

    for m in _FRACTION_WORDS_RE.finditer(text):
        num = 1.0 if m.group(1).lower() in ("a", "an", "one") else float(_WORD_NUMS[m.group(1).lower()])
        den = _ORDINAL_DEN[m.group(2).lower()]
        out.append(Mention(num / den, "", m.start(), m.end(), m.group(0), "fraction"))
        taken.append((m.start(), m.end()))
    for m in _NUMBER_RE.finditer(text):
        noun = ""
        v = _number_value(m)
        a, b = m.start(), m.end()
        if v is None or not free(a, b) or (a > 0 and text[a - 1] in "^_"):
            continue
        # a negative sign only after a space, an opening bracket, '=' or at the start
        if m.group("neg") and a > 0 and not re.match(r"[\s(=:]", text[a - 1]):
            v, a = -v, a + 1
            v = abs(v)
        kind = "number"
        unit = ""
        sm = re.match(r"\s*(hundred|thousand|million|billion|trillion)\b", text[b:], re.IGNORECASE)
        if sm:
            v *= _SCALE_WORDS[sm.group(1).lower()]
            b += sm.end()
        before = text[max(0, a - 3):a]
        if re.search(r"(\$|US\$|USD)\s?$", before):
            unit, kind = "USD", "money"
        elif re.search(r"€\s?$", before):
            unit, kind = "EUR", "money"
        elif re.search(r"£\s?$", before):
            unit, kind = "GBP", "money"
        end = b
        if not unit:
            dz = re.match(r"\s+dozens?\b", text[b:], re.IGNORECASE)
            if dz:
                v *= 12
                end = b + dz.end()
            u, e = read_unit(text, end)
            if not u and m.group("num") and (tp := _TRAILING_POINT_RE.match(text, end)) is not None \
                    and tp.group(1) in UNIT_SYMBOLS:
                u, e = read_unit(text, tp.end(0) - len(tp.group(1)))
            if u:
                unit, end = u, e
                kind = "percent" if u == "percent" else kind
            elif m.group("fnum") and re.match(r"\s+of\b", text[end:]):
                unit = ""  # '3/4 of the book' is a fraction, not 0.75 books
            else:
                cu, noun = noun_unit(text, end)
                unit = cu
        else:
            # '$5 each', '$12 an hour' stay USD: solutions convert rates with bare factors (12/60), which a
            # unit-carrying rate would contradict (measured: plain USD gives more consistent GSM8K traces)
            cm = re.match(r"\s*cents?\b", text[b:])
            if cm:
                unit, end = "cent", b + cm.end()
        if unit == "dollar":
            unit = "USD"
        if unit in ("degC", "degF") and _CHANGE_BEFORE_RE.search(text[max(0, a - 40):a]):
            unit = "delta_" + unit  # 'heated by 20 °C' is a change, not a reading (pcr_ray/core/temperature.py)
        if m.group("fnum") or m.group("mixed"):
            kind = "fraction" if kind == "number" else kind
        out.append(Mention(v, unit, a, end, text[a:end], kind, noun if unit and not kind == "money" else ""))
        taken.append((a, end))
    for m in _WORD_NUM_RE.finditer(text):
        if not free(m.start(), m.end()):
            continue
        v = _word_value(m)
        u, e = read_unit(text, m.end())
        noun = ""
        if not u:
            u, noun = noun_unit(text, m.end())
            e = m.end()
        if m.group(1).lower() == "one" and not u:
            continue  # 'one of them', 'one day' without a unit is rarely a quantity
        out.append(Mention(v, u, m.start(), e, text[m.start():e], "word", noun))
        taken.append((m.start(), e))
    for m in re.finditer(r"\b(?:a|one)\s+dozen\b|\bdozen\b", text, re.IGNORECASE):
        if free(m.start(), m.end()):
            u, _ = noun_unit(text, m.end())
            out.append(Mention(12.0, u or "", m.start(), m.end(), m.group(0), "word"))
            taken.append((m.start(), m.end()))
    for m in re.finditer(r"\b(?:half|a\s+quarter)\s+(?:an?\s+)?(hour|minute|mile|pound|gallon|day|week|year)\b",
                         text, re.IGNORECASE):
        if free(m.start(), m.end()):
            frac = 0.5 if m.group(0).lower().startswith("half") else 0.25
            out.append(Mention(frac, UNIT_WORDS[m.group(1).lower()], m.start(), m.end(), m.group(0), "word"))
            taken.append((m.start(), m.end()))
    for m in re.finditer(r"\b(" + "|".join(_FACTOR_WORDS) + r")\b", text, re.IGNORECASE):
        if free(m.start(), m.end()):
            out.append(Mention(_FACTOR_WORDS[m.group(1).lower()], "", m.start(), m.end(), m.group(0), "factor"))
            taken.append((m.start(), m.end()))
    for m in _REST_RE.finditer(text):
        out.append(Mention(0.0, "m/s", m.start(), m.end(), m.group(0), "rest"))
    for m in _STOP_RE.finditer(text):
        out.append(Mention(0.0, "m/s", m.start(), m.end(), m.group(0), "rest"))
    out.sort(key=lambda x: x.start)
    shared = _share_units(text, out)
    return _count_rates(text, shared) if rates else shared


_RATE_AFTER = re.compile(r"\s+(?:per|a|an|each|every|(?:in|for|on|to|inside)\s+(?:each|every|one|a|an))\s+([a-z]+)\b"
                         r"(?:\s+([a-z]+)\b)?", re.IGNORECASE)
_TIME_WORDS = {"second": "s", "minute": "minute", "hour": "hour", "day": "day", "week": "week", "month": "month",
               "year": "year"}
_RATE_BEFORE = re.compile(r"\b(?:each|every|a|an|one|per)\s+(?:[a-z]+\s+){0,2}?([a-z]+)\s+(?:has|have|contains?|holds?|"
                          r"had|gets?|got|needs?|uses?|takes?|with|carries|carried|can\s+hold|can\s+carry|"
                          r"comes\s+with|is\s+made\s+of)\s+(?:exactly\s+|about\s+|only\s+)?$", re.IGNORECASE)
_PRICE_AFTER = re.compile(r"\s+(?:per|a|an|each|(?:for|on)\s+(?:each|every|one|a|an))\s+([a-z]+)\b(?:\s+([a-z]+)\b)?",
                          re.IGNORECASE)
_PRICE_EACH = re.compile(r"\s*(?:each|apiece|a\s+piece)\b", re.IGNORECASE)
_PRICE_BEFORE = re.compile(r"\b(?:each|every|a|an|one|per)\s+(?:[a-z]+\s+){0,2}?([a-z]+)\s+(?:costs?|costed|"
                           r"sells?\s+for|is\s+sold\s+for|is\s+priced\s+at|goes\s+for|is|was)\s+"
                           r"(?:only\s+|just\s+)?(?:\$|€|£)?$", re.IGNORECASE)


def _rate_after(pattern: re.Pattern[str], text: str, pos: int) -> tuple[str | None, int]:
    """The count noun or time unit a rate phrase at text[pos:] is per ('per sack', 'in each large box', 'an hour'),
    and its end."""
    after = pattern.match(text, pos)
    if after is None:
        return None, pos
    if per := count_noun(after.group(1).lower()) or _TIME_WORDS.get(after.group(1).lower()):
        return per, after.end(1)
    if after.group(2) and (per := count_noun(after.group(2).lower())):  # an adjective first: 'each large box'
        return per, after.end(2)
    return None, pos


def _subject_noun(text: str, pos: int) -> str | None:
    """The last count noun before pos in its sentence ('Cookies cost $2 each' -> 'cookie')."""
    start = max(text.rfind(". ", 0, pos), text.rfind("? ", 0, pos), text.rfind("! ", 0, pos)) + 1
    for w in reversed(re.findall(r"[A-Za-z]+", text[start:pos])):
        if per := count_noun(w.lower()):
            return per
    return None


def _count_rates(text: str, mentions: list[Mention]) -> list[Mention]:
    """Rates per counted thing: 'each sack contains 35 oranges' and '35 oranges per sack' are 35 orange/sack,
    'each cookie costs $2', '$2 per cookie' and 'cookies cost $2 each' are 2 USD/cookie."""
    out = list(mentions)
    for k, m in enumerate(out):
        if m.kind == "money":
            per, end = _rate_after(_PRICE_AFTER, text, m.end)
            if per is None and (each := _PRICE_EACH.match(text, m.end)):
                per, end = _subject_noun(text, m.start), each.end()
            if per is None and (before := _PRICE_BEFORE.search(text[max(0, m.start - 60):m.start])):
                per, end = count_noun(before.group(1).lower()), m.end
        elif m.noun and m.kind in ("number", "word") and count_noun(m.unit) == m.unit:
            at = text.lower().find(m.noun, m.end, m.end + 40)
            per, end = _rate_after(_RATE_AFTER, text, at + len(m.noun)) if at >= 0 else (None, m.end)
            if per is None and (before := _RATE_BEFORE.search(text[max(0, m.start - 60):m.start])):
                per, end = count_noun(before.group(1).lower()), m.end
        else:
            continue
        if per and per != m.unit:
            out[k] = Mention(m.value, f"{m.unit}/{per}", m.start, max(end, m.end), text[m.start:max(end, m.end)],
                             m.kind, m.noun)
    return out


_CURRENCY, _COUNT = BASE_DIMS.index("[currency]"), BASE_DIMS.index("[count]")
_SHARED_UNIT_GAP = re.compile(r"\s*,?\s*(?:and|or)\s*")


def _share_units(text: str, mentions: list[Mention]) -> list[Mention]:
    """'2.25 and 3.52 kg/L': a bare number joined by 'and'/'or' to the next, which carries a physical unit (not a
    count or currency), takes that unit."""
    out = list(mentions)
    for k in range(len(out) - 2, -1, -1):
        a, b = out[k], out[k + 1]
        if a.unit or a.kind != "number" or b.kind != "number" or not b.unit:
            continue
        if not _SHARED_UNIT_GAP.fullmatch(text[a.end:b.start]):
            continue
        info = try_unit_info(b.unit)
        if info is None or info.dims == DIMENSIONLESS or info.dims[_CURRENCY] or info.dims[_COUNT]:
            continue
        out[k] = Mention(a.value, b.unit, a.start, a.end, a.text, a.kind)
    return out


# ---------------------------------------------------------------- names and descriptions

_DIM_NAMES: dict[str, str] = {
    "m": "d", "s": "t", "m/s": "v", "m/s^2": "a", "kg": "m", "N": "F", "J": "E", "W": "P", "V": "V", "A": "I",
    "ohm": "R", "C": "q", "K": "T", "Hz": "f", "Pa": "p", "kg*m/s": "p_mom", "m^2": "area", "m^3": "vol",
    "F": "cap", "USD": "cost", "item": "n", "N/m": "k", "kg/m^3": "rho", "J/(kg*K)": "c_heat", "mol": "n_mol",
    "USD/item": "price", "USD/s": "rate", "item/s": "rate", "rad/s": "omega",
}


def _dims_name_table() -> dict[Dims, str]:
    table: dict[Dims, str] = {}
    for u, n in _DIM_NAMES.items():
        info = try_unit_info(u)
        if info is not None:
            table.setdefault(info.dims, n)
    return table


_NAME_BY_DIMS = _dims_name_table()


def name_for(unit: str, taken: set[str], hint: str = "") -> str:
    """A short, unused variable name for a quantity of this unit ('v', 't_2'; a noun hint for counts)."""
    info = try_unit_info(unit) if unit else None
    base = ""
    if info is not None and info.dims == _ITEM.dims and hint:
        base = "n_" + re.sub(r"[^a-z0-9_]", "", hint.lower())[:20]
    elif re.fullmatch(r"[a-z]+/[a-z]+", unit or "") and hint:  # a count rate: 'orange/sack' -> oranges_per_sack
        base = re.sub(r"[^a-z0-9_]", "", hint.lower())[:16] + "_per_" + unit.split("/")[1][:12]
    if not base:
        base = _NAME_BY_DIMS.get(info.dims, "q") if info is not None and info.dims != DIMENSIONLESS else "x"
        if unit == "percent":
            base = "pct"
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def _desc(text: str, start: int, end: int) -> str:
    left = text[max(0, start - 40):start]
    left = re.split(r"[.;!?]\s", left)[-1]
    words = left.split()[-5:]
    right = text[end:end + 30].split(".")[0].split(",")[0].split()[:3]
    return " ".join(words + [text[start:end].strip()] + right).strip()


# ---------------------------------------------------------------- target

_ASK_UNIT_RE = re.compile(
    r"(?:\bin\s+(?:units\s+of\s+)?|\bexpress(?:ed)?\s+(?:your\s+answer\s+|it\s+|the\s+answer\s+)?in\s+|"
    r"\(in\s+|\bhow\s+many\s+|\bnumber\s+of\s+)", re.IGNORECASE
)
_IMPLIED: tuple[tuple[str, str], ...] = (
    (r"\bhow\s+long\s+(?:does|did|will|would|do|is\s+it|was\s+it|has|have|had|it|until|before|after|must|can|"
     r"should|to)\b|\bhow\s+much\s+time\b|\bwhat\s+(?:time|period|duration)\b|\bhow\s+soon\b", "s"),
    (r"\bhow\s+far\b|\bhow\s+long\s+is\b|\bwhat\s+(?:distance|displacement|length|height|wavelength|radius|"
     r"range|depth)\b|\bhow\s+(?:high|deep|tall|wide)\b|\bwhat\s+is\s+the\s+(?:distance|displacement|length|"
     r"height|wavelength|range|radius|depth|maximum\s+height|stopping\s+distance|image\s+distance|focal\s+length)"
     r"\b", "m"),
    (r"\b(?:minimum|maximum|closest|farthest)\s+distances?\b|\b(?:predicted\s+)?range\s+of\s+flight\b|"
     r"\bheight\s+change\b", "m"),
    (r"\b(?:the\s+)?time\s+(?:needed|required|taken)\b", "s"),
    (r"\bangular\s+acceleration\b", "rad/s^2"),
    (r"\bangular\s+(?:speed|velocity)\b", "rad/s"),
    (r"\bdiffusion\s+coefficient\b", "m^2/s"),
    (r"\bmolar\s+entropy\b", "J/(mol*K)"),
    (r"\bentropy\b|\\Delta\s*S\b|ΔS\b", "J/K"),
    (r"\\Delta\s*G_\s*f|ΔG_\s*f|\bGibbs\s+energy\s+of\s+formation\b", "J/mol"),
    (r"\bE\s*°\s+for\b|\b(?:standard\s+)?(?:reduction|cell|electrode)\s+potential\b", "V"),
    (r"\bprobabilit(?:y|ies)\b|\bquantum\s+yield\b", "dimensionless"),
    (r"\belectric\s+field\b", "N/C"),
    (r"\bgravitational\s+(?:field|acceleration)\b", "m/s^2"),
    (r"\b(?:boiling|melting|freezing)\s+(?:point|temperature)\b", "K"),
    (r"\bangle\b", "degree"),
    (r"\bhow\s+fast\b|\b(?:speed|velocity)\b", "m/s"),
    (r"\bacceleration\b|\bdeceleration\b", "m/s^2"),
    (r"\bmomentum\b|\bimpulse\b", "kg*m/s"),
    (r"\b(?:net\s+|normal\s+|frictional\s+|friction\s+|tension\s+|average\s+)?force\b|\btension\b|\bweight\b|\bweigh\b",
     "N"),
    (r"\bpower\b", "W"),
    (r"\b(?:work|energy|heat|kinetic|potential\s+energy)\b", "J"),
    (r"\bcurrent\b", "A"),
    (r"\bvoltage\b|\bpotential\s+difference\b|\bemf\b", "V"),
    (r"\bresistance\b", "ohm"),
    (r"\bcapacitance\b", "F"),
    (r"\bcharge\b", "C"),
    (r"\bfrequency\b", "Hz"),
    (r"\bperiod\b", "s"),
    (r"\bpressure\b", "Pa"),
    (r"\btemperature\b", "K"),
    (r"\bmass\b|\bhow\s+heavy\b", "kg"),
    (r"\bdensity\b", "kg/m^3"),
    (r"\bhow\s+much\s+(?:money|did|does|do|will|would|is|was|are|were|more|less|in)\b|\bcost\b|\bprofit\b|"
     r"\bspend\b|\bearn\b|\bpay\b|\bprice\b|\bsave\b|\bdollars?\b|\$", "USD"),
    (r"\bwhat\s+percent(?:age)?\b|\bpercent(?:age)?\b", "percent"),
    (r"\bhow\s+many\b", "item"),
)
_IMPLIED_RE = tuple((re.compile(p, re.IGNORECASE), u) for p, u in _IMPLIED)


# a question that asks a temperature change: its unit in degC/degF means delta_degC/delta_degF (the verifier
# refuses a change answered as a reading, and a reading as a change)
_ASKS_CHANGE_RE = re.compile(
    r"\bby\s+how\s+(?:much|many\s+degrees)|\bhow\s+many\s+degrees\s+(?:warmer|colder|hotter|cooler|higher|lower)|"
    rf"\btemperature\s+{_CHANGE_WORDS}|\b{_CHANGE_WORDS}\s+(?:in|of)\s+(?:the\s+)?temperature",
    re.IGNORECASE)


def _sentences(text: str) -> list[str]:
    """The text split after '.', '?' or '!' and whitespace, except a trailing decimal point before a unit symbol
    ('at 400. K.' is one sentence)."""
    out, start = [], 0
    for m in re.finditer(r"(?<=[.?!])\s+", text):
        if text[m.start() - 2:m.start()].rstrip(".").isdigit() and (tp := _TRAILING_POINT_RE.match(
                text, m.start() - 1)) is not None and tp.group(1) in UNIT_SYMBOLS:
            continue
        out.append(text[start:m.start()])
        start = m.end()
    out.append(text[start:])
    return out


def _question_part(text: str) -> str:
    """The sentence(s) that ask: the last sentence with a '?', or the last sentence."""
    sents = _sentences(text.strip())
    asks = [i for i, s in enumerate(sents) if "?" in s]
    if asks:
        tail = [s for s in sents[asks[-1] + 1:] if re.match(r"\s*(?:give|express|answer|round)", s, re.I)]
        return " ".join(tail + [sents[asks[-1]]])
    imper = [s for s in sents if re.match(r"\s*(?:find|calculate|determine|compute|what|how|estimate)", s, re.I)]
    return imper[-1] if imper else (sents[-1] if sents else "")


def extract_target(text: str) -> Target:
    """The asked unit if the question names one, else the implied dimension, else an unknown target."""
    plain = normalize_text(text)
    q = _question_part(plain)
    for m in _ASK_UNIT_RE.finditer(q):
        u, _ = read_unit(q, m.end())
        if not u:
            cu, noun = noun_unit(q, m.end(), max_words=2)
            if cu and "how many" in m.group(0).lower():
                return Target(cu, _ITEM.dims, q[m.start():m.end() + len(noun) + 8].strip())
            continue
        if u == "percent":
            return Target("percent", DIMENSIONLESS, q[m.start():m.end() + 8].strip())
        info = try_unit_info(u)
        if info is not None:
            if u in ("degC", "degF") and _ASKS_CHANGE_RE.search(q):
                u = f"delta_{u}"  # 'by how much does the temperature rise, in °C?' asks a change, not a reading
            return Target(u, info.dims, q[m.start():].strip()[:60])
    # the implied quantity named first in the question ('what is the electric field ... if both charges ...'):
    # position first, the table's order between matches at one place; 'how many' (a count) only as a fallback
    # searched from the last asking word on ('if it is scattered through an angle, what is its speed?'), then in
    # the whole question
    asks = list(_ASKING_RE.finditer(q))
    for part in ([q[asks[-1].start():]] if asks else []) + [q]:
        hits = [(m.start(), i, m, u) for i, (pat, u) in enumerate(_IMPLIED_RE) if (m := pat.search(part))]
        named = [h for h in hits if h[3] != "item"] or hits
        if named:
            _, _, m, u = min(named, key=lambda h: (h[0], h[1]))
            return Target(None, unit_info(u).dims, m.group(0))
    return Target()


_ASKING_RE = re.compile(r"\b(?:what|which|find|calculate|determine|compute|estimate|how)\b", re.IGNORECASE)


# ---------------------------------------------------------------- the rule-based extractor


class RuleBasedExtractor:
    """The default extractor: regular expressions and the unit vocabulary; no model, microseconds per problem."""

    def __init__(self, include_factors: bool = True, include_unitless: bool = True) -> None:
        self.include_factors = include_factors
        self.include_unitless = include_unitless

    def extract(self, text: str) -> Extraction:
        plain = normalize_text(text)
        mentions = scan_quantities(plain)
        taken: set[str] = set()
        givens: list[Given] = []
        for m in mentions:
            if m.kind == "factor" and not self.include_factors:
                continue
            if not m.unit and not self.include_unitless:
                continue
            unit = m.unit or "dimensionless"
            if unit == "percent":
                unit = "dimensionless"  # '20%' is given as 20 (a percent figure), as GSM8K solutions use it
            name = name_for(unit, taken, m.noun)
            if m.kind == "rest":
                name = "v0" if "v0" not in taken else name
                taken.add(name)
            givens.append(Given(name, m.value, unit, _desc(plain, m.start, m.end)))
        return Extraction(tuple(givens), extract_target(text), tuple(mentions))


DEFAULT_EXTRACTOR = RuleBasedExtractor()


def extract(text: str, extractor: GivensExtractor | None = None) -> Extraction:
    """Extract givens and target with the given extractor (default: rule-based)."""
    return (extractor or DEFAULT_EXTRACTOR).extract(text)


# ---------------------------------------------------------------- measuring an extractor


def _base(value: float, unit: str) -> tuple[float, Dims] | None:
    info: UnitInfo | None = try_unit_info(unit or "dimensionless")
    if info is None:
        return None
    return info.to_base(float(value)), info.dims


def given_matches(gold: Given, found: Iterable[Given], *, check_dims: bool = True, rel_tol: float = 1e-6) -> bool:
    """True when some found given has the gold value (in base units) and, with check_dims, its dimension."""
    g = _base(gold.value, gold.unit)
    if g is None:
        return False
    for f in found:
        b = _base(f.value, f.unit)
        if b is None:
            continue
        if check_dims:
            if b[1] == g[1] and math.isclose(b[0], g[0], rel_tol=rel_tol, abs_tol=1e-12):
                return True
        elif math.isclose(f.value, gold.value, rel_tol=rel_tol, abs_tol=1e-12) or math.isclose(
                b[0], g[0], rel_tol=rel_tol, abs_tol=1e-12):
            return True
    return False


def used_givens(trace: dict) -> list[Given]:
    """The givens of a gold trace that some step (or the answer) actually uses."""
    used: set[str] = set()
    for s in trace.get("steps", []):
        for v in s.get("args", {}).values():
            if isinstance(v, str):
                used.add(v)
    for a in trace.get("answer", []):
        used.add(a.get("name", ""))
    return [Given(g["name"], float(g["value"]), g.get("unit", "dimensionless"), g.get("desc", ""))
            for g in trace.get("givens", []) if g["name"] in used]


def _is_unitless(g: Given) -> bool:
    info = try_unit_info(g.unit or "dimensionless")
    return info is None or info.dims == DIMENSIONLESS


GIVEN_KINDS = ("unitless", "count", "money", "rate", "physical")  # what a gold given is, by its unit


def given_kind(unit: str) -> str:
    """What a gold given's unit makes it: `rate` (a ratio: `USD/hour`, `orange/sack`, `m/s`), `money`, `count` (a
    counted noun: `item`, `orange`), `unitless` (also a unit that does not parse), or `physical` (`hour`, `lb`)."""
    info = try_unit_info(unit or "dimensionless")
    if info is not None and "/" in unit:  # before the dimension: `orange/sack` counts per count, dimensionless
        return "rate"
    if info is None or info.dims == DIMENSIONLESS:
        return "unitless"
    if info.dims == unit_info("USD").dims:
        return "money"
    if info.dims == unit_info("item").dims:  # every counted noun has item's dimension
        return "count"
    return "physical"


@dataclass(frozen=True, slots=True)
class ExtractionScore:
    """Fraction of problems whose complete gold givens were captured (value+dimension, and value only), and per kind
    of given (`given_kind`) the share of gold givens captured."""

    n: int
    complete: float
    complete_value_only: float
    complete_unit_lenient: float  # dimension checked only where the gold given has a unit
    given_recall: float
    target_dims_acc: float
    n_target_known: int
    by_kind: dict[str, dict[str, float | int]] = field(default_factory=dict)  # kind -> givens, value, value_and_unit

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "complete": self.complete, "complete_value_only": self.complete_value_only,
                "complete_unit_lenient": self.complete_unit_lenient, "given_recall": self.given_recall,
                "target_dims_acc": self.target_dims_acc,
                "n_target_known": self.n_target_known, "by_kind": self.by_kind}


def score_extraction(items: Sequence[tuple[str, dict, str]], extractor: GivensExtractor | None = None,
                     ) -> ExtractionScore:
    """Score an extractor on (text, gold trace, gold answer unit) items: complete-givens rate and target accuracy.

    The target counts as right when its dimension equals the gold answer's (only where the extractor names
    one: `n_target_known`).
    """
    ex = extractor or DEFAULT_EXTRACTOR
    n = ok = ok_v = ok_l = 0
    g_tot = g_hit = 0
    t_known = t_ok = 0
    kinds = {k: [0, 0, 0] for k in GIVEN_KINDS}  # givens, value captured, value and unit captured
    for text, trace, ans_unit in items:
        gold = used_givens(trace)
        found = ex.extract(text)
        n += 1
        hits = [given_matches(g, found.givens) for g in gold]
        ok += all(hits)
        vals = [given_matches(g, found.givens, check_dims=False) for g in gold]
        ok_v += all(vals)
        for g, h, v in zip(gold, hits, vals, strict=True):
            row = kinds[given_kind(g.unit)]
            row[0], row[1], row[2] = row[0] + 1, row[1] + v, row[2] + h
        ok_l += all(h or (v and _is_unitless(g)) for h, v, g in zip(hits, vals, gold, strict=True))
        g_tot += len(gold)
        g_hit += sum(hits)
        info = try_unit_info(ans_unit or "dimensionless")
        if found.target.known and info is not None:
            t_known += 1
            t_ok += found.target.dims == info.dims
    def frac(a: int, b: int) -> float:
        return a / b if b else 0.0

    by_kind = {k: {"givens": t, "value": frac(v, t), "value_and_unit": frac(h, t)} for k, (t, v, h) in kinds.items()
               if t}
    return ExtractionScore(n, frac(ok, n), frac(ok_v, n), frac(ok_l, n), frac(g_hit, g_tot), frac(t_ok, t_known),
                           t_known, by_kind)
