"""Verifier throughput (steps/s, one core): the cached dimension-vector path vs a naive pint-Quantity verifier.

Both verify the same mixed corpus (valid and invalid traces over arithmetic and physics primitives) in the
same run; SymPy-backed primitives are measured on their own line. Writes <cache>/bench/bench_verifier.json
(benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_verifier.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import copy
import random
import time

from _machine import add_dry_run, dry_run, machine_info, write_result

from pcr_ray.core.primitives import REGISTRY
from pcr_ray.core.trace import parse_trace
from pcr_ray.core.units import UREG, canonical_unit
from pcr_ray.core.verifier import verify


def _single_step_traces(rng: random.Random, families_: set[str] | None, exclude: set[str]) -> list[dict]:
    """One trace per fixed-signature primitive: givens for each parameter, one step, the answer."""
    out = []
    for p in REGISTRY.values():
        if p.family in exclude or (families_ is not None and p.family not in families_) or p.variadic:
            continue
        if any(q.kind == "var" and q.rkind not in ("exact", "dimless") for q in p.params):
            continue
        givens, args = [], {}
        ok = True
        for i, q in enumerate(p.params):
            if q.kind == "name":
                if not q.choices:
                    ok = False
                    break
                args[q.name] = q.choices[0]
            elif q.kind == "expr":
                ok = False
                break
            else:
                unit = "dimensionless" if q.rkind == "dimless" else q.dim
                givens.append({"name": f"g{i}", "value": round(rng.uniform(0.2, 0.9), 3), "unit": unit})
                args[q.name] = f"g{i}"
        if not ok:
            continue
        try:
            out_dims = p.out_dims_for({q.name: q.rdims for q in p.params if q.kind == "var"}, args)
        except Exception:
            continue
        t = {"givens": givens, "steps": [{"op": p.name, "args": args,
                                          "out": {"name": "r", "unit": canonical_unit(out_dims)}}],
             "answer": [{"name": "r", "unit": canonical_unit(out_dims)}]}
        if verify(t).ok:
            out.append(t)
    return out


def _sympy_expr_traces(rng: random.Random) -> list[dict]:
    """Expression-string ops (solve, evaluate) over varied coefficients."""
    out = []
    for _ in range(40):
        a, b, c = rng.randint(1, 9), rng.randint(-9, 9), rng.randint(10, 99)
        out.append({"givens": [{"name": "k", "value": a}],
                    "steps": [{"op": "solve_equation", "args": {"equation": f"{a}*x + {b} = {c}", "var": "x"},
                               "out": {"name": "x", "unit": "dimensionless"}},
                              {"op": "eval_expr", "args": {"expr": f"k*x**2 + {b}"},
                               "out": {"name": "y", "unit": "dimensionless"}}],
                    "answer": [{"name": "y", "unit": "dimensionless"}]})
    return [t for t in out if verify(t).ok]


def _chain(rng: random.Random, n: int) -> dict:
    """A chain of n arithmetic steps over speeds/times/distances with mixed units."""
    givens = [{"name": "v", "value": rng.randint(1, 90), "unit": "km/h"}, {"name": "w", "value": rng.randint(1, 9),
              "unit": "m/s"}, {"name": "t", "value": rng.randint(1, 60), "unit": "minute"}]
    steps = [{"op": "add", "args": {"x": "v", "y": "w"}, "out": {"name": "s0", "unit": "m/s"}}]
    for i in range(1, n):
        op = rng.choice(["add", "sub", "max", "mul", "abs"])
        prev = f"s{i - 1}"
        if op == "mul":
            args = {"x": prev, "y": round(rng.uniform(0.5, 2), 2)}
        elif op == "abs":
            args = {"x": prev}
        else:
            args = {"x": prev, "y": "w"}
        steps.append({"op": op, "args": args, "out": {"name": f"s{i}", "unit": "m/s"}})
    steps.append({"op": "mul", "args": {"x": f"s{n - 1}", "y": "t"}, "out": {"name": "d", "unit": "km"}})
    return {"givens": givens, "steps": steps, "answer": [{"name": "d", "unit": "m"}]}


def _corrupt(rng: random.Random, t: dict) -> dict:
    t = copy.deepcopy(t)
    k = rng.randrange(4)
    step = rng.choice(t["steps"])
    if k == 0:
        step["out"]["unit"] = "kg*s"
    elif k == 1:
        first = next(iter(step["args"]))
        step["args"][first] = "undefined_q"
    elif k == 2:
        step["value"] = 123456.0
    else:
        t["answer"][0]["unit"] = "mol"
    return t


def build_corpus(seed: int = 0) -> tuple[list, list]:
    rng = random.Random(seed)
    singles = _single_step_traces(rng, None, exclude={"algebra"})
    chains = [_chain(rng, rng.randint(3, 12)) for _ in range(200)]
    valid = singles + chains
    invalid = [_corrupt(rng, rng.choice(valid)) for _ in range(len(valid) // 3)]
    sympy_traces = _single_step_traces(rng, {"algebra"}, exclude=set()) + _sympy_expr_traces(rng)
    parse = lambda ts: [parse_trace(t)[0] for t in ts]  # noqa: E731
    return parse(valid + invalid), parse(sympy_traces)


# ------------------------------------------------------------------ the naive verifier (pint per operation)

Q_ = UREG.Quantity


def naive_verify(trace) -> bool:
    """Same judgement through pint Quantities: construct, multiply, convert on every operation."""
    env = {}
    for g in trace.givens:
        env[g.name] = Q_(g.value, UREG.parse_units(g.unit.replace("^", "**")))
    for s in trace.steps:
        p = REGISTRY.get(s.op)
        if p is None:
            return False
        qargs = {}
        for k, a in s.args.items():
            if isinstance(a, str) and p.params and any(q.name == k and q.kind != "var" for q in p.params):
                qargs[k] = a
            elif isinstance(a, str):
                if a not in env:
                    return False
                qargs[k] = env[a]
            else:
                qargs[k] = Q_(a, "dimensionless")
        try:
            if s.op == "add":
                res = qargs["x"] + qargs["y"]
            elif s.op == "sub":
                res = qargs["x"] - qargs["y"]
            elif s.op in ("max", "min"):
                x, y = qargs["x"], qargs["y"].to(qargs["x"].units)
                res = max(x, y) if s.op == "max" else min(x, y)
            elif s.op == "mul":
                res = qargs["x"] * qargs["y"]
            elif s.op == "div":
                res = qargs["x"] / qargs["y"]
            elif s.op == "abs":
                res = abs(qargs["x"])
            else:
                for q in p.params:
                    if q.kind == "var" and q.rkind == "exact":
                        want = Q_(1, UREG.parse_units(q.dim.replace("^", "**"))).dimensionality
                        if qargs[q.name].dimensionality != want:
                            return False
                base = {k: (v.to_base_units().magnitude if hasattr(v, "to_base_units") else v)
                        for k, v in qargs.items()}
                mag = p.fn(**base)
                dims = {q.name: q.rdims for q in p.params if q.rdims is not None}
                res = Q_(mag, canonical_unit(p.out_dims_for(dims, base)).replace("^", "**"))
            out = res.to(UREG.parse_units(s.out.unit.replace("^", "**")))
        except Exception:
            return False
        tol = 1e-6 * max(abs(s.value or 0), abs(out.magnitude)) + 1e-9
        if s.value is not None and abs(out.magnitude - s.value) > tol:
            return False
        env[s.out.name] = out
    for a in trace.answer:
        if a.name not in env:
            return False
        try:
            env[a.name].to(UREG.parse_units(a.unit.replace("^", "**")))
        except Exception:
            return False
    return True


def _interleaved(fns: dict, traces: list, seconds: float) -> dict[str, float]:
    """Steps/s of each function, measured in alternating passes so machine load hits them alike."""
    steps = sum(len(t.steps) for t in traces)
    spent = dict.fromkeys(fns, 0.0)
    passes = dict.fromkeys(fns, 0)
    t_end = time.perf_counter() + seconds * len(fns)
    while time.perf_counter() < t_end or min(passes.values()) < 3:
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for t in traces:
                fn(t)
            spent[name] += time.perf_counter() - t0
            passes[name] += 1
    return {name: passes[name] * steps / spent[name] for name in fns}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))
    corpus, sympy_corpus = build_corpus()
    valid = sum(verify(t).ok for t in corpus)
    agree = sum(verify(t).ok == naive_verify(t) for t in corpus)
    rates = _interleaved({"cached": verify, "naive": naive_verify}, corpus, args.seconds)
    cached, naive = rates["cached"], rates["naive"]
    sym = _interleaved({"sympy": verify}, sympy_corpus, args.seconds / 2)["sympy"] if sympy_corpus else 0.0
    res = {
        "corpus_traces": len(corpus),
        "corpus_steps": sum(len(t.steps) for t in corpus),
        "valid_traces": valid,
        "naive_agrees_on": agree,
        "cached_steps_per_s": round(cached),
        "naive_pint_steps_per_s": round(naive),
        "ratio_cached_over_naive": round(cached / naive, 1),
        "sympy_traces": len(sympy_corpus),
        "sympy_steps_per_s": round(sym),
        "machine": machine_info(),
    }
    print(f"corpus: {res['corpus_traces']} traces, {res['corpus_steps']} steps, {valid} valid; "
          f"naive and cached agree on {agree}")
    print(f"cached verifier : {cached:12,.0f} steps/s (one core)")
    print(f"naive pint      : {naive:12,.0f} steps/s")
    print(f"ratio           : {cached / naive:12.1f} x")
    print(f"sympy-backed ops: {sym:12,.0f} steps/s ({len(sympy_corpus)} traces, cached path)")
    write_result("bench_verifier", res)


if __name__ == "__main__":
    main()
