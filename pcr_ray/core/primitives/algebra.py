"""Algebra primitives: SymPy-backed expressions and equation solving, quadratics, number theory, series.

Expression ops take a param of kind 'expr' (a string in the safe language of `expr.py`) and receive
`_env`, a dict name -> base float of the dimensionless variables defined so far; the unknown of an equation
is a param of kind 'name'. Root choice for `solve_equation`: the smallest positive real root; if there is
none, 0 when it is a root; otherwise the negative root closest to zero. `solve_equation_min` and
`solve_equation_max` return the smallest / largest real root.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import sympy

import pcr_ray.core.primitives.expr as ex
from pcr_ray.core.primitives.numeric import as_int, div, quotient_of, reg, sqrt
from pcr_ray.core.primitives.registry import DimError, DomainError, Param
from pcr_ray.core.units import DIMENSIONLESS, Dims, dims_div

F = "algebra"
D = "dimensionless"
MAX_POLY_DEGREE = 12
EXACT_ROOTS_MAX_DEGREE = 4  # exact real-root isolation above this degree can be very slow
Env = Mapping[str, float] | None

# ---------------------------------------------------------------- roots


def _scan_grid() -> tuple[float, ...]:
    pos = sorted({m * 10.0**k for k in range(-6, 10) for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)})
    return tuple([-p for p in reversed(pos)] + [0.0] + pos)


_GRID = _scan_grid()


def _numeric_roots(lhs: ex.IR, rhs: ex.IR, var: str, env: dict[str, float]) -> list[float]:
    """Real roots of lhs - rhs by a sign-change scan over a log grid and bisection (continuous parts only).

    A grid point is a root when lhs and rhs agree to 1e-12 relative; a bisected sign change is a root when
    |f| there is below 1e-6 of |f| at both bracket ends (a jump or a pole keeps |f| large and is dropped).
    """

    def f(x: float) -> tuple[float, float] | None:
        env[var] = x
        try:
            lv, rv = ex.evaluate_ir(lhs, env), ex.evaluate_ir(rhs, env)
        except DomainError:
            return None
        return lv - rv, max(abs(lv), abs(rv))

    roots: list[float] = []
    prev: tuple[float, float] | None = None  # (x, f(x)) of the last defined grid point
    for x in _GRID:
        fs = f(x)
        if fs is None:
            prev = None
            continue
        fx, scale = fs
        if abs(fx) <= 1e-12 * scale or fx == 0:
            roots.append(x)
        elif prev is not None and prev[1] != 0 and (prev[1] < 0) != (fx < 0):
            a, fa, b = prev[0], prev[1], x
            ok = True
            for _ in range(200):
                m = 0.5 * (a + b)
                if m in (a, b):
                    break
                fm_s = f(m)
                if fm_s is None:
                    ok = False
                    break
                fm = fm_s[0]
                if fm == 0:
                    a = b = m
                    break
                if (fm < 0) == (fa < 0):
                    a, fa = m, fm
                else:
                    b = m
            m = 0.5 * (a + b)
            fm_s = f(m)
            if ok and fm_s is not None and (fm_s[0] == 0 or abs(fm_s[0]) <= 1e-6 * min(abs(prev[1]), abs(fx))):
                roots.append(m)
        prev = (x, fx)
    return roots


def _degree_bound(e: sympy.Expr, x: sympy.Symbol) -> float:
    """An upper bound on the degree in x of num and den of together(e), computed without expanding."""
    if not e.has(x):
        return 0
    if e == x:
        return 1
    if e.is_Add or e.is_Mul:
        return sum(_degree_bound(a, x) for a in e.args)
    if e.is_Pow and e.exp.is_Integer:
        return _degree_bound(e.base, x) * abs(int(e.exp))
    return math.inf


def _poly_roots(expr: sympy.Expr, x: sympy.Symbol) -> list[float] | None:
    """Real roots when expr is a rational function of x (numerator degree <= MAX_POLY_DEGREE), else None."""
    if _degree_bound(expr, x) > 2 * MAX_POLY_DEGREE:
        return None
    num, den = sympy.fraction(sympy.together(expr))
    if not (num.is_polynomial(x) and den.is_polynomial(x)):
        return None
    poly = sympy.Poly(num, x)
    deg = poly.degree()
    if deg > MAX_POLY_DEGREE:
        return None
    if deg <= 0:
        if poly.is_zero:
            raise DomainError("the equation holds for every value of the unknown (no unique solution)")
        raise DomainError("the equation has no solution")
    exact = poly.domain.is_ZZ or poly.domain.is_QQ
    if exact and deg <= EXACT_ROOTS_MAX_DEGREE:
        cands = [float(r) for r in poly.real_roots()]
    else:
        if exact:
            poly = poly.sqf_part()  # simple roots only: nroots is accurate on them
        try:
            found = poly.nroots(n=15, maxsteps=100)
        except Exception:  # mpmath NoConvergence and friends: let the numeric scan try
            return None
        cands = []
        for r in found:
            c = complex(r)
            if abs(c.imag) <= 1e-9 * max(1.0, abs(c.real)):
                cands.append(c.real)
    out = []
    for r in cands:
        dv = complex(sympy.N(den.subs(x, r)))
        if abs(dv) > 1e-12:
            out.append(r)
    return out


def _dedupe(roots: list[float]) -> list[float]:
    out: list[float] = []
    for r in sorted(roots):
        if not out or abs(r - out[-1]) > 1e-9 * max(1.0, abs(r)):
            out.append(r)
    return out


def _check_var(var: str) -> None:
    if not isinstance(var, str) or not var.isidentifier() or var.startswith("_") or var in ex.FUNCTIONS \
            or var in ex.CONSTANT_NAMES:
        raise DomainError(f"the unknown must be a plain variable name, got {var!r}")


@lru_cache(maxsize=4096)
def _solve_cached(text: str, var: str, env_items: tuple[tuple[str, float], ...],
    poly_only: bool) -> tuple[float, ...]:
    env = dict(env_items)
    lhs, rhs = ex.parse_equation(text)
    if var not in lhs.names and var not in rhs.names:
        raise DomainError(f"the unknown {var!r} does not appear in the equation")
    x = sympy.Symbol(var, real=True)
    expr = ex.to_sympy(lhs.text) - ex.to_sympy(rhs.text)
    fenv = {sympy.Symbol(n, real=True): v for n, v in env.items()}
    for p in expr.atoms(sympy.Pow):  # exponents that depend on variables must stay small
        if p.exp.free_symbols - {x}:
            e = ex.sympy_value(p.exp.subs(fenv)) if not (p.exp.free_symbols & {x}) else 0.0
            if abs(e) > ex.MAX_EXPONENT:
                raise DomainError(f"exponent {e:g} is too large")
    exact = {sympy.Symbol(n, real=True): sympy.Rational(repr(float(v))) for n, v in env.items()}
    roots = _poly_roots(expr.subs(exact), x)
    if roots is None:
        if poly_only:
            raise DomainError("not a polynomial in the unknown (of degree <= 12)")
        roots = _numeric_roots(lhs.ir, rhs.ir, var, dict(env))
    roots = _dedupe(roots)
    if not roots:
        raise DomainError("the equation has no real solution")
    return tuple(roots)


def real_roots(equation: str, var: str, env: Env, poly_only: bool = False) -> tuple[float, ...]:
    """Sorted distinct real roots of `equation` in the unknown `var`, other names taken from env."""
    _check_var(var)
    lhs, rhs = ex.parse_equation(equation)
    names = (lhs.names | rhs.names) - {var}
    env = env or {}
    for n in sorted(names):
        if n not in env:
            raise DomainError(f"expression uses undefined or dimensional variable {n!r}")
    items = tuple(sorted((n, float(env[n])) for n in names))
    return _solve_cached(equation, var, items, poly_only)


def pick_root(roots: tuple[float, ...]) -> float:
    """Smallest positive root; else 0 if a root; else the negative root closest to zero."""
    pos = [r for r in roots if r > 0]
    if pos:
        return min(pos)
    return max(roots)


def _solve_equation(equation: str, var: str, _env: Env = None) -> float:
    return pick_root(real_roots(equation, var, _env))


def _solve_min(equation: str, var: str, _env: Env = None) -> float:
    return real_roots(equation, var, _env)[0]


def _solve_max(equation: str, var: str, _env: Env = None) -> float:
    return real_roots(equation, var, _env)[-1]


def _poly_root(expr: str, var: str, _env: Env = None) -> float:
    if "=" in expr:
        raise DomainError("poly_root takes a polynomial expression (= 0 is implied), not an equation")
    return real_roots(expr, var, _env, poly_only=True)[-1]


def _eval_expr(expr: str, _env: Env = None) -> float:
    return ex.evaluate(expr, _env)


def _simplify_eval(expr: str, _env: Env = None) -> float:
    parsed = ex.parse(expr)
    ex.check_names(parsed, _env)
    ex.evaluate_ir(parsed.ir, _env or {})  # float pass first: domain errors and overflow stop here
    sym = ex.to_sympy(expr)
    subs = {sympy.Symbol(n, real=True): sympy.Float(float((_env or {})[n]), 30) for n in parsed.names}
    return ex.sympy_value(sym.subs(subs))


EXPR = Param("expr", kind="expr", desc="expression over earlier dimensionless variables, e.g. '2*x**2 + 3'")
EQ = Param("equation", kind="expr",
    desc="equation in the unknown, e.g. '2*x + 3 = 7' (other names: variables)")
VAR = Param("var", kind="name", desc="name of the unknown symbol in the equation, e.g. 'x'")

reg("eval_expr", F, [EXPR], D, _eval_expr, "value of expr",
    "Evaluate an arithmetic expression over earlier dimensionless variables (referenced by name).")
reg("simplify_eval", F, [EXPR], D, _simplify_eval, "N(expr) with exact SymPy arithmetic",
    "Evaluate an expression with SymPy's exact arithmetic (fractions stay exact until the end).")
reg("solve_equation", F, [EQ, VAR], D, _solve_equation, "root of lhs = rhs in var",
    "Solve an equation for the unknown var; returns the smallest positive real root (else 0, else the "
    "negative root nearest 0).")
reg("solve_equation_min", F, [EQ, VAR], D, _solve_min, "min real root of lhs = rhs",
    "Solve an equation for var and return its smallest real root.")
reg("solve_equation_max", F, [EQ, VAR], D, _solve_max, "max real root of lhs = rhs",
    "Solve an equation for var and return its largest real root.")
reg("poly_root", F, [EXPR, VAR], D, _poly_root, "max real root of poly(var) = 0",
    "Largest real root of a polynomial expression in var (degree <= 12).")

# ---------------------------------------------------------------- quadratics and linear systems


def _quad_rule(dims: Mapping[str, Dims], values: Mapping[str, Any]) -> Dims:
    ca = dims_div(dims["c"], dims["a"])
    if any(e % 2 for e in ca):
        raise DimError("quadratic: c / a must have a squared dimension (a x^2 + b x + c, consistent units)")
    x = tuple(e // 2 for e in ca)
    if dims["b"] != dims_div(dims["c"], x) and not (dims["b"] == DIMENSIONLESS and values.get("b") == 0):
        raise DimError("quadratic: b x must have the dimension of c")
    return x


def _disc_rule(dims: Mapping[str, Dims], values: Mapping[str, Any]) -> Dims:
    _quad_rule(dims, values)
    return tuple(x + y for x, y in zip(dims["a"], dims["c"], strict=True))


def _quad(a: float, b: float, c: float, larger: bool) -> float:
    if a == 0:
        raise DomainError("quadratic with a = 0 (not a quadratic)")
    disc = b * b - 4 * a * c
    if disc < 0 and disc < -1e-12 * max(b * b, abs(4 * a * c)):
        raise DomainError("quadratic has no real root (negative discriminant)")
    s = sqrt(max(disc, 0.0))
    r1, r2 = (-b - s) / (2 * a), (-b + s) / (2 * a)
    return max(r1, r2) if larger else min(r1, r2)


def _det(a1: float, b1: float, a2: float, b2: float) -> float:
    d = a1 * b2 - a2 * b1
    if d == 0:
        raise DomainError("the linear system is singular (no unique solution)")
    return d


ABC = [Param("a"), Param("b"), Param("c")]
reg("quadratic_root_larger", F, ABC, _quad_rule, lambda a, b, c: _quad(a, b, c, True),
    "(-b + sqrt(b^2 - 4ac)) / 2a (larger)", "Larger real root of a x^2 + b x + c = 0.")
reg("quadratic_root_smaller", F, ABC, _quad_rule, lambda a, b, c: _quad(a, b, c, False),
    "(-b - sqrt(b^2 - 4ac)) / 2a (smaller)", "Smaller real root of a x^2 + b x + c = 0.")
reg("discriminant", F, ABC, _disc_rule, lambda a, b, c: b * b - 4 * a * c, "b^2 - 4ac",
    "Discriminant of a x^2 + b x + c.")
reg("solve_linear", F, [Param("a"), Param("b"), Param("c", "=b")], quotient_of("c", "a"),
    lambda a, b, c: div(c - b, a, "solve_linear: a = 0"), "(c - b) / a", "Solve a x + b = c for x.")
L6 = [Param(n, D) for n in ("a1", "b1", "c1", "a2", "b2", "c2")]
reg("solve_2x2_x", F, L6, D, lambda a1, b1, c1, a2, b2, c2: (c1 * b2 - c2 * b1) / _det(a1, b1, a2, b2),
    "(c1 b2 - c2 b1) / (a1 b2 - a2 b1)", "x of the system a1 x + b1 y = c1, a2 x + b2 y = c2.")
reg("solve_2x2_y", F, L6, D, lambda a1, b1, c1, a2, b2, c2: (a1 * c2 - a2 * c1) / _det(a1, b1, a2, b2),
    "(a1 c2 - a2 c1) / (a1 b2 - a2 b1)", "y of the system a1 x + b1 y = c1, a2 x + b2 y = c2.")

# ---------------------------------------------------------------- number theory and counting

NXY = [Param("x", D), Param("y", D)]
BIG = 10**4  # cap on n for combinatorics


def _gcd(x: float, y: float) -> float:
    return float(math.gcd(as_int(x, "x", None), as_int(y, "y", None)))


def _lcm(x: float, y: float) -> float:
    return float(math.lcm(as_int(x, "x", None), as_int(y, "y", None)))


def _factorial(n: float) -> float:
    return float(math.factorial(as_int(n, "n", 0, 170)))


def _binomial(n: float, k: float) -> float:
    ni, ki = as_int(n, "n", 0, BIG), as_int(k, "k", 0, BIG)
    return float(math.comb(ni, ki))


def _binomial_probability(n: float, k: float, p: float) -> float:
    if not 0 <= p <= 1:
        raise DomainError(f"binomial_probability: p must be a probability in [0, 1] (got {p:g})")
    ni, ki = as_int(n, "n", 0, BIG), as_int(k, "k", 0, BIG)
    if ki > ni:
        return 0.0
    if p in (0.0, 1.0):  # a certain outcome: all failures or all successes
        return 1.0 if ki == (0 if p == 0.0 else ni) else 0.0
    log_comb = math.lgamma(ni + 1) - math.lgamma(ki + 1) - math.lgamma(ni - ki + 1)
    return math.exp(log_comb + ki * math.log(p) + (ni - ki) * math.log1p(-p))


def _permutations(n: float, k: float) -> float:
    ni, ki = as_int(n, "n", 0, BIG), as_int(k, "k", 0, BIG)
    return float(math.perm(ni, ki))


def _digit_sum(n: float) -> float:
    return float(sum(int(ch) for ch in str(abs(as_int(n, "n", None)))))


reg("gcd", F, NXY, D, _gcd, "gcd(x, y)", "Greatest common divisor of two integers.", commutative=True)
reg("lcm", F, NXY, D, _lcm, "lcm(x, y)", "Least common multiple of two integers.", commutative=True)
reg("factorial", F, [Param("n", D)], D, _factorial, "n!", "Factorial of a non-negative integer n (n <= 170).")
reg("binomial", F, [Param("n", D), Param("k", D)], D, _binomial, "C(n, k) = n! / (k! (n - k)!)",
    "Number of ways to choose k of n items, order ignored.")
reg("binomial_probability", F, [Param("n", D), Param("k", D), Param("p", D)], D, _binomial_probability,
    "C(n, k) p^k (1 - p)^(n - k)", "Probability of exactly k successes in n independent trials of probability p.")
reg("permutations", F, [Param("n", D), Param("k", D)], D, _permutations, "P(n, k) = n! / (n - k)!",
    "Number of ordered arrangements of k of n items.")
reg("is_prime", F, [Param("n", D)], D, lambda n: 1.0 if sympy.isprime(as_int(n, "n", None)) else 0.0,
    "1 if n is prime else 0", "Primality test of an integer n (1 = prime, 0 = not).")
reg("digit_sum", F, [Param("n", D)], D, _digit_sum, "sum of the decimal digits of |n|",
    "Sum of the decimal digits of an integer.")
reg("num_digits", F, [Param("n", D)], D, lambda n: float(len(str(abs(as_int(n, "n", None))))),
    "number of decimal digits of |n|", "How many decimal digits an integer has.")
reg("divisor_count", F, [Param("n", D)], D, lambda n: float(sympy.divisor_count(as_int(n, "n", 1, 10**12))),
    "d(n)", "Number of positive divisors of a positive integer n.")
reg("sum_first_n", F, [Param("n", D)], D, lambda n: n * (n + 1) / 2, "n (n + 1) / 2",
    "Sum 1 + 2 + ... + n of the first n positive integers.")
reg("arithmetic_nth_term", F, [Param("a1"), Param("d", "=a1"), Param("n", D)], "=a1",
    lambda a1, d, n: a1 + (n - 1) * d, "a1 + (n - 1) d", "n-th term of an arithmetic sequence.")
reg("arithmetic_series_sum", F, [Param("a1"), Param("d", "=a1"), Param("n", D)], "=a1",
    lambda a1, d, n: n * (2 * a1 + (n - 1) * d) / 2, "n (2 a1 + (n - 1) d) / 2",
    "Sum of the first n terms of an arithmetic sequence.")
reg("geometric_nth_term", F, [Param("a1"), Param("r", D), Param("n", D)], "=a1",
    lambda a1, r, n: a1 * ex.fpow(r, n - 1), "a1 r^(n - 1)", "n-th term of a geometric sequence.")
reg("geometric_series_sum", F, [Param("a1"), Param("r", D), Param("n", D)], "=a1",
    lambda a1, r, n: a1 * n if r == 1 else a1 * (1 - ex.fpow(r, n)) / (1 - r), "a1 (1 - r^n) / (1 - r)",
    "Sum of the first n terms of a geometric sequence.")
