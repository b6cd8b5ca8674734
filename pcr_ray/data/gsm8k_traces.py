"""GSM8K calculator annotations (`<<48/2=24>>`) -> structured gold traces that pass the verifier.

How a solution is converted:
1. Every annotation `<<expr=result>>` is parsed (numbers and + - * / ( ) only) and checked: the expression
   must evaluate to the written result (GSM8K rounds some results; those problems are skipped).
2. Each binary operation becomes one step (add, sub, mul, div, pow; unary minus -> neg). A number in the
   expression is linked, in this order, to an earlier result with that value, a number in the question (a
   given), a percentage in the question used as a fraction (a `div(pct, 100)` step is inserted), or a small
   constant (1-12, 100, 60, 24, 1000, ... see ALLOWED_LITERALS) used as a dimensionless literal. Anything
   else is untraceable and the problem is skipped with that reason: never forced.
3. Units: each given takes the unit written next to it (USD for '$', minute/hour/..., mile/km/kg/..., a
   count unit for count nouns, 'item' for other plural nouns; percentages are given as plain numbers). Each
   step's out unit is chosen so that the verifier's recomputed value, in that unit, equals the annotation's
   number. When the words' units make a step impossible (m + s, or a result like USD*minute that the
   solution reaches by an implicit conversion such as '12/60'), givens involved are demoted to
   dimensionless one at a time (greedy, the demotion that gets furthest first) until every step checks.
   The trace records how many givens were demoted (`meta`, not part of the trace).
4. The final answer is the last step whose value equals the `####` answer (later steps are dropped).
5. The finished trace is run through `pcr_ray.core.verifier.verify`; it must pass and give the gold answer.
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pcr_ray.core.primitives import REGISTRY, DimError, DomainError
from pcr_ray.core.units import DIMENSIONLESS, Dims, canonical_unit, generic_count_unit, try_unit_info
from pcr_ray.core.verifier import verify
from pcr_ray.data.givens import Mention, extract_target, name_for, normalize_text, noun_unit, read_unit, scan_quantities

ANNOTATION_RE = re.compile(r"<<([^<>=]*)=([^<>]*)>>")
# Numbers a solution may introduce without the question stating them (dimensionless literals).
ALLOWED_LITERALS: frozenset[float] = frozenset(
    [float(i) for i in range(0, 13)]
    + [15.0, 16.0, 20.0, 24.0, 30.0, 31.0, 36.0, 48.0, 52.0, 60.0, 90.0, 100.0, 120.0, 360.0, 365.0, 1000.0,
       1440.0, 3600.0, 5280.0, 10000.0, 0.5, 0.25, 0.75, 0.1, 0.01, 0.2, 1 / 3, 2 / 3, 1.5]
)
_OPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow", ast.FloorDiv: "floordiv"}
# Out-unit candidates by dimension (GSM8K vocabulary); scale-1 units first. Args' and givens' units come first.
_CANDIDATE_UNITS: tuple[str, ...] = (
    "USD", "item", "s", "minute", "hour", "day", "week", "month", "year", "m", "km", "cm", "mile", "foot",
    "inch", "yard", "kg", "g", "lb", "oz", "ton", "L", "mL", "gallon", "quart",
    "USD/item", "USD/hour", "USD/minute", "USD/day", "USD/week", "USD/month", "USD/year", "USD/mile", "USD/kg",
    "USD/lb", "USD/oz", "USD/gallon", "USD/foot", "USD/inch", "USD/yard", "item/hour", "item/minute",
    "item/day", "item/week", "item/month", "item/year", "item/USD", "mile/hour", "km/hour", "m/s",
    "mile/minute", "foot/s", "mile/day", "mile/gallon", "minute/item", "hour/item", "day/item", "mile/item",
    "foot/item", "inch/item", "lb/item", "oz/item", "kg/item", "gallon/item", "L/item", "m^2", "foot^2",
    "inch^2", "yard^2", "mile^2", "m^3", "foot^3", "inch^3", "hour/week", "gallon/hour", "gallon/minute",
    "lb/week", "oz/day", "minute/mile", "item/foot", "item/lb",
)
_TOL_REL, _TOL_ABS = 1e-6, 1e-9


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= _TOL_REL * max(abs(a), abs(b)) + _TOL_ABS


@dataclass(frozen=True, slots=True)
class ConversionResult:
    """The outcome for one problem: a verified trace dict, or None and the reason it was skipped."""

    ok: bool
    trace: dict[str, Any] | None
    reason: str = ""
    detail: str = ""
    n_steps: int = 0
    n_annotations: int = 0
    n_demoted: int = 0


class _Skip(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


# ---------------------------------------------------------------- skeleton (values, links) before units

Ref = tuple[str, Any]  # ('given', i) | ('step', i) | ('lit', value)


@dataclass(slots=True)
class _GivenSlot:
    value: float
    unit: str  # preferred unit ('' = dimensionless)
    desc: str
    hint: str
    mention: int


@dataclass(slots=True)
class _StepSkel:
    op: str
    args: dict[str, Ref]
    value: float  # the written (annotated or implied intermediate) value
    hint: str = ""
    hint_unit: str = ""
    annotation: int = -1
    final_of_annotation: bool = False


@dataclass(slots=True)
class _Skeleton:
    givens: list[_GivenSlot] = field(default_factory=list)
    steps: list[_StepSkel] = field(default_factory=list)
    mention_to_given: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Calc:
    """One calculation of a solution: expression, written result, unit hint, and whether it was annotated."""

    expr: str
    result: str
    hint_unit: str
    hint_word: str
    implicit: bool = False


_TERM = r"\(?\s*\$?\s?(?:\d[\d,]*(?:\.\d+)?|\.\d+)\s*%?\s*\)?(?:\s*\(\s*(?:\d[\d,]*(?:\.\d+)?|\.\d+)\s*\))?"
_WORD = r"(?:\s*[A-Za-z]+(?:/[A-Za-z]+)?){0,2}"
_OPR = r"\s*(?:[-+*/×÷−–]|\bx\b|\btimes\b)\s*"
_N = r"(?:\d[\d,]*(?:\.\d+)?|\.\d+)"
_IMPLICIT_RE = re.compile(
    r"(?<![\w.,$])(" + _TERM + _WORD + r"(?:" + _OPR + _TERM + _WORD + r")+|" + _N + r"\s*\(\s*" + _N + r"\s*\))"
    r"\s*=\s*\$?\s?(" + _N + r")(?![\d.]\d)"
)


def _hint(line: str, result_text: str, before: str, after: str) -> tuple[str, str]:
    """(unit, word) the solution writes for a result: '$<<..>>10' -> USD, '>>24 clips' -> ('item', 'clips')."""
    if before.rstrip().endswith("$"):
        return "USD", "money"
    m = re.match(r"\s*\$?\s?[\d.,]*", after)
    pos = m.end() if m else 0
    u, _ = read_unit(after, pos)
    if u and u != "percent":
        return u, re.sub(r"[^a-z]", "", after[pos:].split()[0].lower()) if after[pos:].split() else ""
    cu, noun = noun_unit(after, pos, max_words=1)
    if cu:
        return cu, noun
    # the same number written elsewhere in the line with a unit ('has 1,200 pages because 240 x 5 = ...')
    try:
        val = float(result_text.replace(",", ""))
    except ValueError:
        return "", ""
    for mm in re.finditer(r"(\$)?\s?(\d[\d,]*(?:\.\d+)?)", line):
        try:
            if float(mm.group(2).replace(",", "")) != val:
                continue
        except ValueError:
            continue
        if mm.group(1):
            return "USD", "money"
        u, _ = read_unit(line, mm.end())
        if u and u != "percent":
            return u, ""
        cu, noun = noun_unit(line, mm.end(), max_words=1)
        if cu:
            return cu, noun
    return "", ""


def parse_calculations(solution: str, implicit: bool = True) -> list[Calc]:
    """Every `<<expr=result>>` annotation, in order, and (with implicit=True) the plain-text equations that a
    line writes after its last annotation ('$12 + $6 = $18', 'Work: 200(.40)=80')."""
    out: list[Calc] = []
    for line in solution.split("\n"):
        if line.strip().startswith("####"):
            continue
        last_end = 0
        for m in ANNOTATION_RE.finditer(line):
            u, w = _hint(line, m.group(2).strip(), line[:m.start()], line[m.end():])
            out.append(Calc(m.group(1).strip(), m.group(2).strip(), u, w))
            last_end = m.end()
        if not implicit:
            continue
        rest = line[last_end:]
        if last_end:
            rest = re.sub(r"^\s*\$?\s?[\d,]*(?:\.\d+)?", " ", rest)  # the annotation's written result
        for m in _IMPLICIT_RE.finditer(rest):
            expr = m.group(1)
            expr = re.sub(r"(\d)\s*\(", r"\1*(", expr)
            expr = re.sub(r"\b(?:times|x)\b", "*", expr)
            expr = re.sub(r"[A-Za-z]+(?:/[A-Za-z]+)?", " ", expr).replace("×", "*").replace("÷", "/")
            expr = expr.replace("−", "-").replace("–", "-").replace("$", "")
            if not re.search(r"[\d)]\s*[-+*/]\s*[\d(.]", expr):
                continue
            u, w = _hint(line, m.group(2), rest[:m.start(2)], rest[m.end(2) - len(m.group(2)):])
            out.append(Calc(expr.strip(), m.group(2), u, w, implicit=True))
    return out


_NUM_TOKEN = re.compile(r"\d*\.?\d+(?:[eE][-+]?\d+)?")


def _parse_expr(expr: str) -> ast.expr:
    """A Python AST of a calculator expression where every number literal became a float constant."""
    clean = expr.replace(",", "").replace("x", "*").replace("X", "*").replace("^", "**").replace("÷", "/")
    clean = clean.replace("$", "").replace("%", "*0.01").strip()
    if not clean or re.search(r"[^0-9.+\-*/() eE]", clean):
        raise _Skip("bad_annotation", f"unsupported characters in {expr!r}")
    clean = _NUM_TOKEN.sub(lambda m: repr(float(m.group(0))), clean)
    try:
        tree = ast.parse(clean, mode="eval")
    except SyntaxError:
        raise _Skip("bad_annotation", f"cannot parse {expr!r}") from None
    return tree.body


def _mentions(question: str, rates: bool = True) -> tuple[str, list[Mention]]:
    """The question's quantities: the scanner's mentions plus every bare digit string (fraction parts etc.)."""
    plain = normalize_text(question)
    ms = scan_quantities(plain, rates)
    seen = {(m.start, m.value) for m in ms}
    extra = []
    for m in re.finditer(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.,])\d+(?:\.\d+)?|(?<![\w\d])\.\d+", plain):
        v = float(m.group(0).replace(",", ""))
        if (m.start(), v) not in seen:
            extra.append(Mention(v, "", m.start(), m.end(), m.group(0), "raw"))
    for m in ms:  # '3 dozen eggs' is 36 eggs, and solutions write 3*12: the 3 counts eggs too
        if "dozen" in m.text.lower() and m.unit:
            extra.append(Mention(m.value / 12.0, m.unit, m.start, m.end, m.text, "raw", m.noun))
    return plain, sorted(ms + extra, key=lambda x: (x.start, x.kind == "raw"))


class _Builder:
    """Turns annotations into a skeleton, linking each number to a result, a given, or a literal."""

    def __init__(self, question: str, rates: bool = True) -> None:
        self.plain, self.mentions = _mentions(question, rates)
        self.sk = _Skeleton()
        self.pct_frac: dict[int, int] = {}  # given index -> step index of div(pct, 100)
        self._emitted_here = 0  # steps emitted by the calculation being added
        self._used_here: set[Ref] = set()  # references already used in that calculation
        self.cents = bool(re.search(r"\bcents?\b", question, re.IGNORECASE))

    def _given_for_mention(self, mi: int) -> int:
        if mi in self.sk.mention_to_given:
            return self.sk.mention_to_given[mi]
        m = self.mentions[mi]
        unit = "" if m.unit == "percent" else m.unit
        if unit and try_unit_info(unit) is None:
            unit = ""
        hint = m.noun
        left = self.plain[max(0, m.start - 40):m.start]
        left = re.split(r"[.;!?]\s", left)[-1].split()[-5:]
        right = self.plain[m.end:m.end + 30].split(".")[0].split(",")[0].split()[:3]
        desc = " ".join(left + [m.text.strip()] + right)
        desc = re.sub(r"\s+", " ", desc).strip()
        self.sk.givens.append(_GivenSlot(m.value, unit, desc, hint, mi))
        gi = len(self.sk.givens) - 1
        self.sk.mention_to_given[mi] = gi
        return gi

    @staticmethod
    def _dims_of(unit: str) -> Dims | None:
        info = try_unit_info(unit) if unit and unit != "percent" else None
        return info.dims if info is not None else None

    def link(self, w: float, results: list[tuple[float, int]], want: Dims | None = None) -> Ref:
        """The reference for a number written in an annotation.

        An earlier result comes first, except that a value written twice in one expression ('30-15-5-5')
        takes the question's number the second time when the question has an unused one.
        """
        unused = [i for i, m in enumerate(self.mentions) if _close(m.value, w) and i not in self.sk.mention_to_given
                  and m.unit != "percent" and m.kind not in ("factor", "fraction")]
        if want is not None:
            # an add/sub whose result the solution names ('25-4 = 21 students'): take the candidate whose
            # words have that dimension (the question's '25 students', not an earlier '$25')
            for val, si in reversed(results):
                if _close(val, w) and ("step", si) not in self._used_here and self._dims_of(
                        self.sk.steps[si].hint_unit) == want:
                    self._used_here.add(("step", si))
                    return ("step", si)
            for i in unused:
                if self._dims_of(self.mentions[i].unit) == want:
                    ref = ("given", self._given_for_mention(i))
                    self._used_here.add(ref)
                    return ref
        for val, si in reversed(results):
            if _close(val, w):
                if ("step", si) in self._used_here and unused:
                    break
                self._used_here.add(("step", si))
                return ("step", si)
        if unused:
            ref = ("given", self._given_for_mention(unused[0]))
            self._used_here.add(ref)
            return ref
        is_lit = any(_close(w, c) for c in ALLOWED_LITERALS)
        for i, m in enumerate(self.mentions):
            if _close(m.value, w) and i in self.sk.mention_to_given:
                ref = ("given", self.sk.mention_to_given[i])
                if ref in self._used_here and is_lit:
                    return ("lit", w)  # '(12-2)/2': the second 2 halves, it is not the question's 2 again
                self._used_here.add(ref)
                return ref
        for i, m in enumerate(self.mentions):
            if (m.unit == "percent" or m.kind in ("factor", "fraction")) and _close(m.value, w):
                if m.kind == "factor" and any(_close(w, c) for c in ALLOWED_LITERALS):
                    break  # 'twice' written as 2: a literal
                return ("given", self._given_for_mention(i))
        for i, m in enumerate(self.mentions):
            if m.unit == "percent" and _close(m.value / 100.0, w):
                gi = self._given_for_mention(i)
                if gi not in self.pct_frac:
                    self.sk.steps.append(_StepSkel("div", {"x": ("given", gi), "y": ("lit", 100.0)}, m.value / 100.0,
                                                   "frac"))
                    self.pct_frac[gi] = len(self.sk.steps) - 1
                return ("step", self.pct_frac[gi])
        if any(_close(w, c) for c in ALLOWED_LITERALS):
            return ("lit", w)
        raise _Skip("untraceable_number", f"{w:g}")

    def snapshot(self) -> tuple[int, int, dict[int, int], dict[int, int]]:
        return len(self.sk.steps), len(self.sk.givens), dict(self.sk.mention_to_given), dict(self.pct_frac)

    def restore(self, snap: tuple[int, int, dict[int, int], dict[int, int]]) -> None:
        del self.sk.steps[snap[0]:]
        del self.sk.givens[snap[1]:]
        self.sk.mention_to_given, self.pct_frac = snap[2], snap[3]

    def add_calc(self, k: int, calc: Calc, results: list[tuple[float, int]]) -> None:
        """Add one calculation's steps (an implicit one that does not check is dropped, not fatal)."""
        if not calc.implicit:
            self._add(k, calc, results)
            return
        snap = self.snapshot()
        n_results = len(results)
        try:
            self._add(k, calc, results)
        except _Skip:
            self.restore(snap)
            del results[n_results:]

    def _add(self, k: int, calc: Calc, results: list[tuple[float, int]]) -> None:
        try:
            written = float(calc.result.replace(",", "").replace("$", "").rstrip("%").strip())
        except ValueError:
            raise _Skip("bad_annotation", f"result {calc.result!r} is not a number") from None
        node = _parse_expr(calc.expr)
        value = _eval(node)
        if not _close(value, written):
            raise _Skip("annotation_mismatch", f"{calc.expr} = {value:g}, written {written:g}")
        want = self._dims_of(calc.hint_unit)
        ref = self._emit(node, results, k, want=want if want != DIMENSIONLESS else None)
        if ref[0] != "step" or ref[1] < len(self.sk.steps) - 1 or self._emitted_here == 0:
            # the expression is a bare number ('<<24=24>>') or an earlier value: a restatement, no step
            if ref[0] == "step":
                results.append((written, ref[1]))
            return
        st = self.sk.steps[ref[1]]
        st.value, st.annotation, st.final_of_annotation = written, k, True
        st.hint, st.hint_unit = calc.hint_word, calc.hint_unit
        results.append((written, ref[1]))

    def _fraction_given(self, node: ast.expr) -> Ref | None:
        """'(1/3)' in an expression where the question writes '1/3': the question's fraction, as a given."""
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
                and isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant)):
            return None
        a, b = float(node.left.value), float(node.right.value)
        if b == 0:
            return None
        for i, m in enumerate(self.mentions):
            if m.kind in ("fraction", "factor") and _close(m.value, a / b):
                return ("given", self._given_for_mention(i))
        return None

    def _emit(self, node: ast.expr, results: list[tuple[float, int]], k: int, top: bool = True,
              want: Dims | None = None) -> Ref:
        if top:
            self._emitted_here = 0
            self._used_here = set()
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return self.link(float(node.value), results, want)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            if isinstance(node.operand, ast.Constant) and isinstance(node.op, ast.USub):
                try:
                    return self.link(-float(node.operand.value), results)
                except _Skip:
                    pass
            inner = self._emit(node.operand, results, k, top=False)
            if isinstance(node.op, ast.UAdd):
                return inner
            val = -_eval(node.operand)
            self.sk.steps.append(_StepSkel("neg", {"x": inner}, val, "", k))
            self._emitted_here += 1
            return ("step", len(self.sk.steps) - 1)
        frac = self._fraction_given(node)
        if frac is not None:
            return frac
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            sub_want = want if isinstance(node.op, (ast.Add, ast.Sub)) else None
            left = self._emit(node.left, results, k, top=False, want=sub_want)
            right = self._emit(node.right, results, k, top=False, want=sub_want)
            val = _eval(node)
            op = _OPS[type(node.op)]
            args = {"x": left, "y": right}
            self.sk.steps.append(_StepSkel(op, args, val, "", k))
            self._emitted_here += 1
            return ("step", len(self.sk.steps) - 1)
        raise _Skip("bad_annotation", f"unsupported expression {ast.dump(node)[:60]}")


def _eval(node: ast.expr) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
        return _eval(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _eval(node.left), _eval(node.right)
        try:
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.Div):
                return a / b
            if isinstance(node.op, ast.FloorDiv):
                return float(math.floor(a / b))
            if abs(b) > 64:
                raise _Skip("bad_annotation", "exponent too large")
            r = a**b
            if isinstance(r, complex):
                raise _Skip("bad_annotation", "complex power")
            return float(r)
        except ZeroDivisionError:
            raise _Skip("bad_annotation", "division by zero") from None
        except OverflowError:
            raise _Skip("bad_annotation", "overflow") from None
    raise _Skip("bad_annotation", "unsupported expression")


# ---------------------------------------------------------------- unit assignment


@dataclass(slots=True)
class _Sim:
    ok: bool
    fail_step: int
    culprits: set[int]
    out_units: list[str]
    # for an add/sub whose sides disagree: (ancestors, dims, unit) of each side
    sides: tuple[tuple[frozenset[int], Dims, str], ...] = ()


@lru_cache(maxsize=1)
def _base_candidates() -> dict[Dims, tuple[str, ...]]:
    """The GSM8K out-unit vocabulary grouped by dimension (computed once)."""
    table: dict[Dims, list[str]] = {}
    for u in _CANDIDATE_UNITS:
        info = try_unit_info(u)
        if info is None or info.offset != 0.0 or info.dims == DIMENSIONLESS:
            continue
        table.setdefault(info.dims, []).append(u)
    return {d: tuple(v) for d, v in table.items()}


def _simulate(sk: _Skeleton, units: list[str], cents: bool, strict: bool = False) -> _Sim:
    """Run the skeleton through the primitives' dimension rules with these given units; pick each out unit."""
    extra = [u for u in dict.fromkeys(units) if u]
    if cents:
        extra.append("cent")
    base_cands = _base_candidates()
    # per variable: (base value, dims, unit text, ancestor givens)
    gvals: list[tuple[float, Dims, str, frozenset[int]]] = []
    for i, (g, u) in enumerate(zip(sk.givens, units, strict=True)):
        info = try_unit_info(u or "dimensionless")
        assert info is not None
        gvals.append((info.to_base(g.value), info.dims, u or "dimensionless", frozenset([i])))
    svals: list[tuple[float, Dims, str, frozenset[int]]] = []
    out_units: list[str] = []
    for si, st in enumerate(sk.steps):
        dims: dict[str, Dims] = {}
        bases: dict[str, float] = {}
        anc: set[int] = set()
        arg_units: list[str] = []
        sides = []
        for pname, ref in st.args.items():
            if ref[0] == "lit":
                dims[pname], bases[pname] = DIMENSIONLESS, float(ref[1])
                sides.append((frozenset(), DIMENSIONLESS, "dimensionless"))
                continue
            b, d, u, a = gvals[ref[1]] if ref[0] == "given" else svals[ref[1]]
            dims[pname], bases[pname] = d, b
            anc |= a
            arg_units.append(u)
            sides.append((a, d, u))
        prim = REGISTRY[st.op]
        try:
            prim.check_args(dims)
            out_dims = prim.out_dims_for(dims, bases)
            base = float(prim.fn(**bases))
        except DimError:
            return _Sim(False, si, anc, out_units, tuple(sides))
        except (DomainError, ZeroDivisionError, ValueError, OverflowError):
            return _Sim(False, si, anc, out_units)
        if not math.isfinite(base):
            return _Sim(False, si, anc, out_units)
        if strict and st.hint_unit and out_dims != DIMENSIONLESS:
            hinfo = try_unit_info(st.hint_unit)
            if hinfo is not None and hinfo.dims != out_dims:
                return _Sim(False, si, anc, out_units)
        choice = None
        if out_dims == DIMENSIONLESS:
            ordered: list[str] | tuple[str, ...] = ("dimensionless",)
        else:
            ordered = ([st.hint_unit] if st.hint_unit else []) + [u for u in arg_units if u != "dimensionless"]
            ordered += [u for u in extra if (i := try_unit_info(u)) is not None and i.dims == out_dims]
            ordered += base_cands.get(out_dims, ())
        for u in ordered:
            info = try_unit_info(u)
            if info is not None and info.dims == out_dims and _close(info.from_base(base), st.value):
                choice = u
                break
        if choice is None:
            return _Sim(False, si, anc, out_units)
        out_units.append(choice)
        svals.append((base, out_dims, choice, frozenset(anc)))
    return _Sim(True, len(sk.steps), set(), out_units)


def _assign_units(sk: _Skeleton, cents: bool) -> tuple[list[str], list[str], int]:
    """Given units and step out units that check; promote unit-less givens or demote givens when needed.

    First with the solution's own words as constraints (a result written '1,200 pages' must be a count or
    dimensionless), then without them.
    """
    best: tuple[tuple[int, int], tuple[list[str], list[str], int]] | None = None
    for strict in (True, False):
        got = _search_units(sk, cents, strict)
        if got is None:
            continue
        score = _hint_score(sk, got[1]), sum(1 for u in got[0] if u)
        if best is None or score > best[0]:
            best = (score, got)
    if best is None:
        raise _Skip("unit_assignment", "no consistent units even with dimensionless givens")
    return best[1]


def _hint_score(sk: _Skeleton, out_units: list[str]) -> int:
    """Steps whose unit has the dimension the solution's words give it, minus steps that contradict them."""
    score = 0
    for st, u in zip(sk.steps, out_units, strict=True):
        h = try_unit_info(st.hint_unit) if st.hint_unit else None
        o = try_unit_info(u)
        if h is None or o is None:
            continue
        if o.dims == h.dims:
            score += 1
        elif o.dims != DIMENSIONLESS:
            score -= 1
    return score


def _search_units(sk: _Skeleton, cents: bool, strict: bool) -> tuple[list[str], list[str], int] | None:
    """Greedy repair: at the first failing step try (a) giving the unit-less givens on the dimensionless side
    of an add/sub the other side's unit ('12 + 5 years': the 12 is years too), (b) demoting one given to
    dimensionless; keep the fix that gets furthest (promotion first on ties)."""
    units = [g.unit for g in sk.givens]
    free = [not g.unit for g in sk.givens]  # unit-less in the text: may take a unit from an add/sub partner
    n_demoted = 0
    for _ in range(2 * len(units) + 2):
        sim = _simulate(sk, units, cents, strict)
        if sim.ok:
            return units, sim.out_units, n_demoted
        fixes: list[tuple[str, list[str]]] = []
        if len(sim.sides) == 2:
            for (a_anc, a_dims, _), (_, b_dims, b_unit) in (sim.sides, sim.sides[::-1]):
                if a_dims == DIMENSIONLESS and b_dims != DIMENSIONLESS and a_anc and all(free[i] for i in a_anc):
                    trial = list(units)
                    for i in a_anc:
                        trial[i] = b_unit
                    fixes.append(("promote", trial))
        for gi in sorted((i for i in sim.culprits if units[i]), reverse=True):
            trial = list(units)
            trial[gi] = ""
            fixes.append(("demote", trial))
        if not fixes:
            return None
        best: tuple[int, int, str, list[str]] | None = None
        for kind, trial in fixes:
            s2 = _simulate(sk, trial, cents, strict)
            prog = len(sk.steps) + 1 if s2.ok else s2.fail_step
            key = (prog, 1 if kind == "promote" else 0)
            if best is None or key > best[:2]:
                best = (key[0], key[1], kind, trial)
        assert best is not None
        if best[0] < sim.fail_step or (best[0] == sim.fail_step and best[2] == "promote"):
            # nothing gets further: demote every culprit at once
            culprits = [i for i in sim.culprits if units[i]]
            if not culprits:
                return None
            for i in culprits:
                units[i] = ""
                free[i] = False
                n_demoted += 1
            continue
        for i, (old, new) in enumerate(zip(units, best[3], strict=True)):
            if old != new:
                free[i] = False
                n_demoted += best[2] == "demote"
        units = best[3]
    return None


# ---------------------------------------------------------------- putting it together


def _slug(word: str) -> str:
    s = re.sub(r"[^a-z0-9_]", "", word.lower())
    return s[:24] if s and s[0].isalpha() else ""


def convert_gsm8k(question: str, solution: str, *, implicit: bool = True) -> ConversionResult:
    """Convert one GSM8K problem; never raises on bad input (a skipped result carries the reason).

    implicit=True also reads plain-text equations a solution writes without an annotation ('$12 + $6 = $18').
    """
    with_rates = _try_convert(question, solution, implicit, rates=True)
    if with_rates.ok and not with_rates.n_demoted:
        return with_rates
    # a rate the solution converts with bare factors ($12 an hour as 12/60 a minute) demotes quantities to plain
    # numbers: the question read without rates ($12) may keep more of its units
    plain = _try_convert(question, solution, implicit, rates=False)
    return plain if plain.ok and (not with_rates.ok or plain.n_demoted < with_rates.n_demoted) else with_rates


def _try_convert(question: str, solution: str, implicit: bool, rates: bool) -> ConversionResult:
    try:
        return _convert(question, solution, implicit, rates)
    except _Skip as s:
        return ConversionResult(False, None, s.reason, s.detail)
    except (RecursionError, MemoryError):
        return ConversionResult(False, None, "bad_annotation", "expression too deep")


def _convert(question: str, solution: str, implicit: bool, rates: bool) -> ConversionResult:
    if "####" not in solution:
        raise _Skip("no_final_answer", "no #### line")
    final_text = solution.rsplit("####", 1)[1].strip().replace(",", "").replace("$", "")
    try:
        final = float(final_text)
    except ValueError:
        raise _Skip("no_final_answer", f"#### {final_text!r} is not a number") from None
    calcs = parse_calculations(solution, implicit=implicit)
    anns = [c for c in calcs if not c.implicit]
    if not anns:
        raise _Skip("no_annotations", "the solution has no <<...>> annotations")
    b = _Builder(question, rates)
    results: list[tuple[float, int]] = []
    for k, calc in enumerate(calcs):
        b.add_calc(k, calc, results)
    sk = b.sk
    if not sk.steps:
        raise _Skip("no_steps", "annotations only restate numbers")
    # the answer: the last step whose value is the #### answer; later steps are dropped
    ans_idx = next((i for i in range(len(sk.steps) - 1, -1, -1) if _close(sk.steps[i].value, final)
                    and sk.steps[i].final_of_annotation), None)
    if ans_idx is None:
        ans_idx = next((i for i in range(len(sk.steps) - 1, -1, -1) if _close(sk.steps[i].value, final)), None)
    if ans_idx is None:
        raise _Skip("answer_not_computed", f"no annotation computes the #### answer {final:g}")
    sk.steps = sk.steps[: ans_idx + 1]
    last = sk.steps[ans_idx]
    if not last.hint_unit:
        target = extract_target(question)
        if target.dims is not None and target.dims != DIMENSIONLESS:
            last.hint_unit = target.unit or canonical_unit(target.dims)
    used_givens = sorted({r[1] for st in sk.steps for r in st.args.values() if r[0] == "given"})
    remap = {old: new for new, old in enumerate(used_givens)}
    sk.givens = [sk.givens[i] for i in used_givens]
    for st in sk.steps:
        st.args = {p: (("given", remap[r[1]]) if r[0] == "given" else r) for p, r in st.args.items()}
    units, out_units, n_demoted = _assign_units(sk, b.cents)
    trace = _to_trace(sk, units, out_units, ans_idx)
    verdict = verify(trace)
    if not verdict.ok and _counts_failed(verdict):
        # the solution's words did not type every count (16 slices a pizza read as 16 slices): keep the
        # arithmetic and read its counts as generic items, which the verifier does not tell apart
        units = [generic_count_unit(u) if u else u for u in units]
        out_units = [generic_count_unit(u) if u else u for u in out_units]
        trace = _to_trace(sk, units, out_units, ans_idx)
        verdict = verify(trace)
    if not verdict.ok:
        d = verdict.first_failure
        raise _Skip("verify_failed", d.feedback() if d else "rejected")
    got = verdict.answer[0].value
    if not _close(got, final):
        raise _Skip("verify_failed", f"answer {got:g} != {final:g}")
    return ConversionResult(True, trace, "", "", len(sk.steps), len(anns), n_demoted)


def _counts_failed(verdict: Any) -> bool:
    """Whether the verifier rejected the trace for what its counts count (sacks for oranges)."""
    d = verdict.first_failure
    return d is not None and d.code == "count_mismatch"


def _to_trace(sk: _Skeleton, units: list[str], out_units: list[str], ans_idx: int) -> dict[str, Any]:
    taken: set[str] = set()
    gnames: list[str] = []
    givens = []
    for g, u in zip(sk.givens, units, strict=True):
        unit = u or "dimensionless"
        name = name_for(unit, taken, _slug(g.hint) if unit not in ("dimensionless",) else "")
        gnames.append(name)
        givens.append({"name": name, "value": g.value, "unit": unit, "desc": g.desc})
    snames: list[str] = []
    steps = []
    for st, ou in zip(sk.steps, out_units, strict=True):
        base = _slug(st.hint) if st.hint and st.final_of_annotation and st.hint_unit else ""
        if not base or base in ("dimensionless",):
            base = "r"
        name, k = base, 2
        while name in taken or name in REGISTRY:
            name, k = f"{base}_{k}", k + 1
        taken.add(name)
        snames.append(name)
        args: dict[str, Any] = {}
        for p, r in st.args.items():
            if r[0] == "given":
                args[p] = gnames[r[1]]
            elif r[0] == "step":
                args[p] = snames[r[1]]
            else:
                v = float(r[1])
                args[p] = int(v) if v.is_integer() and abs(v) < 2**53 else v
        val = st.value
        steps.append({"op": st.op, "args": args, "out": {"name": name, "unit": ou},
                      "value": int(val) if float(val).is_integer() and abs(val) < 2**53 else val})
    return {"givens": givens, "steps": steps, "answer": [{"name": snames[ans_idx], "unit": out_units[ans_idx]}]}


# ---------------------------------------------------------------- statistics


@dataclass(frozen=True, slots=True)
class ConversionStats:
    """Conversion rate, skip reasons, and the steps-per-trace distribution over a set of problems."""

    n: int
    converted: int
    reasons: dict[str, int]
    steps_hist: dict[int, int]
    long_horizon: int  # converted traces with 5+ steps
    demoted_traces: int  # converted traces where at least one given lost its unit

    @property
    def rate(self) -> float:
        return self.converted / self.n if self.n else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "converted": self.converted, "rate": self.rate, "reasons": dict(self.reasons),
                "steps_hist": {str(k): v for k, v in sorted(self.steps_hist.items())},
                "long_horizon": self.long_horizon, "long_horizon_frac": self.long_horizon / max(1, self.converted),
                "demoted_traces": self.demoted_traces}


def conversion_stats(results: Iterable[ConversionResult]) -> ConversionStats:
    """Aggregate ConversionResults."""
    n = conv = lh = dem = 0
    reasons: Counter[str] = Counter()
    hist: Counter[int] = Counter()
    for r in results:
        n += 1
        if r.ok:
            conv += 1
            hist[r.n_steps] += 1
            lh += r.n_steps >= 5
            dem += r.n_demoted > 0
        else:
            reasons[r.reason] += 1
    return ConversionStats(n, conv, dict(reasons.most_common()), dict(sorted(hist.items())), lh, dem)
