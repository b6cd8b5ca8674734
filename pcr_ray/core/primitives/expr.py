"""Safe expression parser: a whitelisted walk of Python's AST into a small IR, a float evaluator and SymPy.

Expression strings come from model output, so nothing here calls eval, sympify or parse_expr. The text is
parsed with `ast.parse(text, mode="eval")` and only these nodes are accepted: int/float constants, names
(variables; `pi` and `E` are the constants), binary + - * / ** %, unary + and -, and calls of the functions
in FUNCTIONS with positional arguments. Anything else (attributes, subscripts, lambdas, comprehensions,
strings, comparisons, keywords, `^`, names starting with '_') raises ExprError, which is both a ValueError
and a DomainError. Parsed expressions are cached per string.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import sympy

from pcr_ray.core.primitives.registry import DomainError

MAX_EXPR_LEN = 200
MAX_EXPONENT = 1000  # |exponent| allowed on a constant exponent (keeps SymPy from building giant integers)
CONSTANT_NAMES = ("pi", "E")
# function name -> (min args, max args)
FUNCTIONS: dict[str, tuple[int, int]] = {
    "sqrt": (1, 1), "sin": (1, 1), "cos": (1, 1), "tan": (1, 1), "asin": (1, 1), "acos": (1, 1),
    "atan": (1, 1), "exp": (1, 1), "log": (1, 2), "ln": (1, 1), "log10": (1, 1), "abs": (1, 1),
}
_BINOPS: dict[type, str] = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**",
    ast.Mod: "%"}
_TRANSLATE = str.maketrans({"−": "-", "×": "*", "·": "*", "÷": "/"})

# IR nodes (tuples): ("num", float, exact_text) | ("name", id) | ("const", "pi"|"E")
#                    | ("bin", op, left, right) | ("neg", x) | ("call", fname, (args...))
IR = tuple


class ExprError(DomainError, ValueError):
    """An expression string that is not in the accepted language (or is too long)."""


@dataclass(frozen=True, slots=True)
class Parsed:
    """A parsed expression: the IR and the variable names it references."""

    text: str
    ir: IR
    names: frozenset[str]


def _fail(msg: str) -> ExprError:
    return ExprError(f"invalid expression: {msg}")


def _names(ir: IR, acc: set[str]) -> None:
    tag = ir[0]
    if tag == "name":
        acc.add(ir[1])
    elif tag == "bin":
        _names(ir[2], acc)
        _names(ir[3], acc)
    elif tag == "neg":
        _names(ir[1], acc)
    elif tag == "call":
        for a in ir[2]:
            _names(a, acc)


def _convert(node: ast.AST, depth: int = 0) -> IR:
    if depth > 60:
        raise _fail("nested too deeply")
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool) or not isinstance(v, int | float):
            kind = "strings" if isinstance(v, str | bytes) else f"constant {type(v).__name__}"
            raise _fail(f"{kind} are not allowed; use numbers and variable names")
        if isinstance(v, int):
            if abs(v) > 10**300:
                raise _fail("integer literal too large")
            return ("num", float(v), str(v))
        if not math.isfinite(v):
            raise _fail("non-finite number")
        return ("num", v, repr(v))
    if isinstance(node, ast.Name):
        name = node.id
        if name.startswith("_"):
            raise _fail(f"names starting with '_' are not allowed ({name!r})")
        if name in FUNCTIONS:
            raise _fail(f"function {name!r} must be called, e.g. {name}(x)")
        if name in CONSTANT_NAMES:
            return ("const", name)
        if not name.isascii():
            raise _fail(f"non-ASCII name {name!r}")
        return ("name", name)
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.BitXor):
            raise _fail("'^' is not a power here; write x**2")
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise _fail(f"operator {type(node.op).__name__} is not allowed (use + - * / ** %)")
        left, right = _convert(node.left, depth + 1), _convert(node.right, depth + 1)
        out: IR = ("bin", op, left, right)
        _check_constant(out, op, right)
        return out
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.USub):
            return ("neg", _convert(node.operand, depth + 1))
        if isinstance(node.op, ast.UAdd):
            return _convert(node.operand, depth + 1)
        raise _fail(f"unary operator {type(node.op).__name__} is not allowed")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            what = node.func.id if isinstance(node.func, ast.Name) else type(node.func).__name__
            raise _fail(f"call of {what!r} is not allowed; functions: {', '.join(sorted(FUNCTIONS))}")
        fname = node.func.id
        if node.keywords:
            raise _fail(f"{fname}() takes no keyword arguments")
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise _fail("starred arguments are not allowed")
        lo, hi = FUNCTIONS[fname]
        if not lo <= len(node.args) <= hi:
            raise _fail(f"{fname}() takes {lo if lo == hi else f'{lo} or {hi}'} argument(s)")
        return ("call", fname, tuple(_convert(a, depth + 1) for a in node.args))
    raise _fail(f"{type(node).__name__} is not allowed in an expression")


def _check_constant(node: IR, op: str, right: IR) -> None:
    """Constant sub-expressions must stay finite floats; constant exponents are bounded."""
    acc: set[str] = set()
    _names(right, acc)
    if op == "**" and not acc:
        try:
            e = evaluate_ir(right, {})
        except DomainError as exc:
            raise _fail(f"bad exponent ({exc})") from None
        if abs(e) > MAX_EXPONENT:
            raise _fail(f"exponent {e:g} is too large (|exponent| <= {MAX_EXPONENT})")
    acc.clear()
    _names(node, acc)
    if not acc:
        try:
            evaluate_ir(node, {})
        except DomainError as exc:
            raise ExprError(f"invalid expression: {exc}") from None


@lru_cache(maxsize=4096)
def parse(text: str) -> Parsed:
    """Parse an expression string (no '='). Raises ExprError."""
    if not isinstance(text, str):
        raise _fail(f"expected a string, got {type(text).__name__}")
    if len(text) > MAX_EXPR_LEN:
        raise _fail(f"longer than {MAX_EXPR_LEN} characters")
    src = text.translate(_TRANSLATE).strip()
    if not src:
        raise _fail("empty")
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError as exc:
        raise _fail(f"syntax error ({exc.msg})") from None
    except (ValueError, RecursionError, MemoryError):
        raise _fail("cannot be parsed") from None
    ir = _convert(tree.body)
    acc: set[str] = set()
    _names(ir, acc)
    return Parsed(text, ir, frozenset(acc))


@lru_cache(maxsize=4096)
def parse_equation(text: str) -> tuple[Parsed, Parsed]:
    """Parse 'lhs = rhs' (or '==', or a bare expression meaning expr = 0) into (lhs, rhs)."""
    if not isinstance(text, str):
        raise _fail(f"expected a string, got {type(text).__name__}")
    if len(text) > MAX_EXPR_LEN:
        raise _fail(f"longer than {MAX_EXPR_LEN} characters")
    sep = "==" if "==" in text else "="
    parts = text.split(sep)
    if len(parts) > 2 or "=" in parts[-1] or "=" in parts[0]:
        raise _fail("an equation has exactly one '='")
    if len(parts) == 1:
        return parse(text), parse("0")
    return parse(parts[0]), parse(parts[1])


# ---------------------------------------------------------------- float evaluation


def fpow(x: float, y: float) -> float:
    """x ** y as a float; DomainError for 0 to a negative power, a negative base to a fractional one, overflow."""
    if x == 0 and y < 0:
        raise DomainError("zero raised to a negative power")
    if x < 0 and y != int(y):
        raise DomainError(f"negative base ({x:g}) raised to a non-integer power ({y:g})")
    try:
        out = x**y
    except OverflowError:
        raise DomainError("overflow in a power") from None
    return float(out)


def _call(fname: str, args: list[float]) -> float:
    x = args[0]
    if fname == "sqrt":
        if x < 0:
            raise DomainError(f"sqrt of a negative number ({x:g})")
        return math.sqrt(x)
    if fname in ("log", "ln", "log10"):
        if x <= 0:
            raise DomainError(f"logarithm of a non-positive number ({x:g})")
        if fname == "log10":
            return math.log10(x)
        if len(args) == 2:
            b = args[1]
            if b <= 0 or b == 1:
                raise DomainError(f"logarithm base must be positive and not 1 (got {b:g})")
            return math.log(x) / math.log(b)
        return math.log(x)
    if fname in ("asin", "acos") and not -1 <= x <= 1:
        raise DomainError(f"{fname} of {x:g}: the argument must be in [-1, 1]")
    if fname == "exp" and x > 709:
        raise DomainError(f"exp({x:g}) overflows")
    if fname == "abs":
        return abs(x)
    return float(getattr(math, fname)(x))


def evaluate_ir(ir: IR, env: Mapping[str, float]) -> float:
    """Evaluate an IR tree over float variables. Raises DomainError (undefined names, math domain)."""
    tag = ir[0]
    if tag == "num":
        return ir[1]
    if tag == "name":
        try:
            return float(env[ir[1]])
        except KeyError:
            raise DomainError(f"expression uses undefined or dimensional variable {ir[1]!r}") from None
    if tag == "const":
        return math.pi if ir[1] == "pi" else math.e
    if tag == "neg":
        return -evaluate_ir(ir[1], env)
    if tag == "call":
        return _call(ir[1], [evaluate_ir(a, env) for a in ir[2]])
    op, a, b = ir[1], evaluate_ir(ir[2], env), evaluate_ir(ir[3], env)
    if op == "+":
        out = a + b
    elif op == "-":
        out = a - b
    elif op == "*":
        out = a * b
    elif op == "/":
        if b == 0:
            raise DomainError("division by zero")
        out = a / b
    elif op == "%":
        if b == 0:
            raise DomainError("modulo by zero")
        out = a % b
    else:
        out = fpow(a, b)
    if not math.isfinite(out):
        raise DomainError("overflow: a value in the expression is not finite")
    return out


def check_names(parsed: Parsed, env: Mapping[str, Any] | None, allowed: frozenset[str] = frozenset()) -> None:
    """DomainError unless every name in the expression is in env (or in `allowed`)."""
    env = env or {}
    for name in sorted(parsed.names):
        if name not in env and name not in allowed:
            raise DomainError(f"expression uses undefined or dimensional variable {name!r}")


def evaluate(text: str, env: Mapping[str, float] | None) -> float:
    """Parse (cached) and evaluate an expression over dimensionless variables in env."""
    parsed = parse(text)
    check_names(parsed, env)
    return evaluate_ir(parsed.ir, env or {})


# ---------------------------------------------------------------- SymPy


def _sym(ir: IR) -> sympy.Expr:
    tag = ir[0]
    if tag == "num":
        return sympy.Integer(ir[2]) if ir[2].lstrip("-").isdigit() else sympy.Rational(ir[2])
    if tag == "name":
        return sympy.Symbol(ir[1], real=True)
    if tag == "const":
        return sympy.pi if ir[1] == "pi" else sympy.E
    if tag == "neg":
        return -_sym(ir[1])
    if tag == "call":
        args = [_sym(a) for a in ir[2]]
        fname = ir[1]
        if fname == "ln":
            return sympy.log(args[0])
        if fname == "log10":
            return sympy.log(args[0], 10)
        if fname == "abs":
            return sympy.Abs(args[0])
        return getattr(sympy, fname)(*args)
    op, a, b = ir[1], _sym(ir[2]), _sym(ir[3])
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b
    if op == "%":
        return sympy.Mod(a, b)
    return a**b


@lru_cache(maxsize=4096)
def to_sympy(text: str) -> sympy.Expr:
    """The SymPy expression of an expression string (literals exact: 0.1 -> 1/10). Cached. Raises ExprError."""
    parsed = parse(text)
    try:
        return _sym(parsed.ir)
    except ZeroDivisionError:  # SymPy evaluates constant parts as it builds: 'x % (2 - 2)' is Mod(x, 0)
        raise _fail("modulo or division by zero") from None
    except (TypeError, AttributeError, ValueError, OverflowError):  # SymPy's own failures on extreme constants
        raise _fail("SymPy cannot build this expression (a constant out of range?)") from None


def sympy_value(expr: sympy.Expr) -> float:
    """A real float from a closed SymPy expression, or DomainError (complex, infinite, undefined, free symbols)."""
    free = getattr(expr, "free_symbols", None)
    if free:  # sympy.N of an open expression can run for minutes (log(b - 999999)**1000)
        names = ", ".join(sorted(str(s) for s in free))
        raise DomainError(f"the expression still has unknowns ({names}): no value")
    try:
        val = complex(sympy.N(expr, 20))
    except (TypeError, ValueError, ZeroDivisionError):
        raise DomainError("the expression has no finite real value (division by zero?)") from None
    if not (math.isfinite(val.real) and math.isfinite(val.imag)):
        raise DomainError("the expression is not finite")
    if abs(val.imag) > 1e-12 * max(1.0, abs(val.real)):
        raise DomainError("the expression is not a real number")
    return val.real
