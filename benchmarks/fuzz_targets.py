"""Fuzz targets over bytes: the verifier (whole-trace, incremental), unit parser, expression parser, trace loader,
Serve request models. Each target turns bytes into a structured input and checks its contract.

A *finding* is any exception the contract does not allow, a last-resort guard that caught one (the verifier's
"internal error" verdict, check_step's "evaluation failed"), or whole-trace and incremental verdicts that differ.
Findings are appended (JSON lines, one per distinct kind and place) to the file named by $PCR_FUZZ_FINDINGS.

    python benchmarks/fuzz_targets.py TARGET [libFuzzer flags] [CORPUS_DIR]   # atheris, coverage-guided
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.setrecursionlimit(5000)

import pint  # noqa: E402,F401  (third-party code is imported before instrumentation: only ours is measured)
import pydantic  # noqa: E402,F401
import sympy  # noqa: E402,F401

TARGETS = ("verifier", "incremental", "units", "expr", "trace_loader", "serve_models")


class Provider:
    """Structured values consumed from a byte string (what libFuzzer mutates); past the end, zeros."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.i = 0

    def byte(self) -> int:
        if self.i >= len(self.data):
            return 0
        b = self.data[self.i]
        self.i += 1
        return b

    def int_in(self, lo: int, hi: int) -> int:
        span = hi - lo + 1
        v = self.byte() | (self.byte() << 8) if span > 256 else self.byte()
        return lo + v % span

    def pick(self, seq: Any) -> Any:
        return seq[self.int_in(0, len(seq) - 1)]

    def chance(self, k: int) -> bool:
        """True with probability about k/256."""
        return self.byte() < k

    def text(self, max_len: int = 24) -> str:
        n = self.int_in(0, max_len)
        raw = bytes(self.byte() for _ in range(n))
        return raw.decode("utf-8", errors="replace") if self.chance(128) else raw.decode("latin-1")

    def number(self) -> Any:
        k = self.byte() % 16
        if k < 6:
            return self.int_in(-1000, 1000) / self.pick((1, 1, 3, 7, 1000, 0.001))
        return self.pick((0, -0.0, 1, -1, 0.5, 1e-300, 1e300, 1.7e308, -1.7e308, float("nan"), float("inf"),
                          10**400, True, "3.5", None, 2**63))

    def rest(self) -> bytes:
        out = self.data[self.i:]
        self.i = len(self.data)
        return out


# ---------------------------------------------------------------------------------- structured inputs

UNIT_TOKENS = ("m", "s", "kg", "km", "h", "N", "J", "W", "Pa", "mol", "K", "degC", "degF", "A", "V", "ohm", "C",
               "L", "g", "minute", "hour", "day", "USD", "$", "%", "dimensionless", "rad", "deg", "Hz", "eV",
               "item", "cats", "/", "*", "^", "**", "2", "-1", "3", "(", ")", " ", "10^", "10^{-3}", "\\mathrm{",
               "}", "~", "\\cdot", "·", "²", "per", "square", "cubic", "1", "0", "e", "kWh", "mph", "ft", "lbf")
EXPR_TOKENS = ("x", "y", "a", "b", "t", "pi", "E", "+", "-", "*", "/", "**", "%", "(", ")", ",", "=", "==",
               "sqrt(", "sin(", "log(", "ln(", "exp(", "abs(", "acos(", "log10(", "1", "2", "0", "0.5", "1e308",
               "999", "1000", "-1001", " ", "^", "_x", "x.y", "[0]", "lambda", "'s'", "<", "×", "−", "√")


def unit_text(p: Provider) -> str:
    if p.chance(40):
        return p.text(30)
    return "".join(p.pick(UNIT_TOKENS) for _ in range(p.int_in(0, 8)))


def expr_text(p: Provider) -> str:
    if p.chance(40):
        return p.text(60)
    return "".join(p.pick(EXPR_TOKENS) for _ in range(p.int_in(0, 20)))


def _seed_traces() -> list[dict[str, Any]]:
    from pcr_ray.data.physics import generate_problems

    ex = Path(__file__).resolve().parent.parent / "pcr_ray" / "examples" / "car_from_rest.json"
    out = [json.loads(ex.read_text())]
    out += [p.gold_trace for p in generate_problems(40, seed=5) if isinstance(p.gold_trace, dict)]
    return out


_SEEDS: list[dict[str, Any]] = []
_OPS: list[str] = []


def _setup_pools() -> None:
    from pcr_ray.core.primitives import REGISTRY

    if not _SEEDS:
        _SEEDS.extend(_seed_traces())
        _OPS.extend(sorted(REGISTRY))


def arg_value(p: Provider, names: list[str], kind: str) -> Any:
    k = p.byte() % 8
    if kind == "expr" or k == 7:
        return expr_text(p)
    if kind == "name" or k == 6:
        return p.text(10) if p.chance(60) else p.pick(("g", "c", "G", "R", "k_e", "h", "N_A", "e"))
    if names and k < 4:
        return p.pick(names)
    return p.number() if k < 6 else p.pick(([], {}, None, "", ["x"]))


def trace_obj(p: Provider) -> Any:
    """A trace-like object: a seed trace mutated in place, or one built from registry ops, or junk."""
    from pcr_ray.core.primitives import REGISTRY

    _setup_pools()
    mode = p.byte() % 8
    if mode == 7:
        return p.pick(([], "x", 1, None, {"givens": {}}, {"steps": "a"}, {"answer": 3}))
    if mode < 4:
        t = json.loads(json.dumps(p.pick(_SEEDS)))
        for _ in range(p.int_in(0, 4)):
            _mutate(p, t)
        return t
    givens, names = [], []
    for _ in range(p.int_in(0, 5)):
        name = p.pick(("a", "b", "t", "v", "m", "x", "g")) if p.chance(200) else p.text(8)
        givens.append({"name": name, "value": p.number(), "unit": unit_text(p)})
        names.append(name)
    steps = []
    for i in range(p.int_in(0, 6)):
        op = p.pick(_OPS) if p.chance(230) else p.text(10)
        prim = REGISTRY.get(op)
        params = [(q.name, q.kind) for q in prim.params] if prim is not None else [("x", "var"), ("y", "var")]
        if prim is not None and prim.variadic:
            params = [(f"x{j}", "var") for j in range(1, p.int_in(1, 9) + 1)]
        args = {n: arg_value(p, names, kind) for n, kind in params if p.chance(245)}
        if p.chance(10):
            args[p.text(5)] = p.number()
        out = {"name": f"s{i}" if p.chance(220) else p.pick(names or ["s0"]), "unit": unit_text(p)}
        step: dict[str, Any] = {"op": op, "args": args, "out": out}
        if p.chance(60):
            step["value"] = p.number()
        steps.append(step)
        names.append(out["name"])
    answer = [{"name": p.pick(names or ["z"]), "unit": unit_text(p)} for _ in range(p.int_in(0, 2))]
    return {"givens": givens, "steps": steps, "answer": answer}


def _dicts(x: Any) -> list[dict[str, Any]]:
    return [d for d in x if isinstance(d, dict)] if isinstance(x, list) else []


def _mutate(p: Provider, t: dict[str, Any]) -> None:
    """One random edit of a (possibly already edited) trace; whatever shape it has, the edit applies or is skipped."""
    k = p.byte() % 10
    steps = t.get("steps") if isinstance(t.get("steps"), list) else []
    step_dicts = _dicts(steps)
    givens = _dicts(t.get("givens"))
    if k == 0 and givens:
        p.pick(givens)["value"] = p.number()
    elif k == 1 and givens:
        p.pick(givens)["unit"] = unit_text(p)
    elif k == 2 and step_dicts:
        s = p.pick(step_dicts)
        s["out"] = {**s["out"], "unit": unit_text(p)} if isinstance(s.get("out"), dict) else {"unit": unit_text(p)}
    elif k == 3 and step_dicts:
        s = p.pick(step_dicts)
        if isinstance(s.get("args"), dict) and s["args"]:
            key = p.pick(sorted(s["args"], key=str))
            s["args"][key] = arg_value(p, [str(g.get("name")) for g in givens], "var")
    elif k == 4 and step_dicts:
        p.pick(step_dicts)["op"] = p.pick(_OPS)
    elif k == 5 and step_dicts:
        p.pick(step_dicts)["value"] = p.number()
    elif k == 6 and steps:
        steps.insert(p.int_in(0, len(steps)), json.loads(json.dumps(p.pick(steps))))
    elif k == 7 and steps:
        del steps[p.int_in(0, len(steps) - 1)]
    elif k == 8:
        t["answer"] = [{"name": p.text(4), "unit": unit_text(p)}] if p.chance(100) else []
    else:
        t[p.pick(("givens", "steps", "answer", "extra"))] = p.pick(([], {}, None, 1, "x", [1]))


# ---------------------------------------------------------------------------------- the contracts

_GUARD = re.compile(r"evaluation failed: (\w+)|internal error on this input: (\w+)")


class Finding(Exception):
    """A contract broken (raised inside a target, recorded by `run_one`)."""


def _guarded(verdict: Any) -> None:
    for d in verdict.diagnostics:
        m = _GUARD.search(d.message)
        if m:
            raise Finding(f"guard caught {m.group(1) or m.group(2)}: {d.message[:200]}")


def t_verifier(data: bytes) -> None:
    from pcr_ray.core.verifier import verify

    p = Provider(data)
    raw = p.byte() >= 224
    obj: Any = p.rest().decode("utf-8", errors="replace") if raw else trace_obj(p)
    v = verify(obj)
    _guarded(v)
    json.dumps(v.to_dict(), allow_nan=True)
    v.format_text()


def t_incremental(data: bytes) -> None:
    from pcr_ray.core.trace import parse_trace
    from pcr_ray.core.verifier import VerifierState, check_answer, verify, verify_incrementally, verify_step

    p = Provider(data)
    t = trace_obj(p)
    whole, inc = verify(t), verify_incrementally(t)
    _guarded(whole)
    _guarded(inc)
    a, b = json.dumps(whole.to_dict(), sort_keys=True), json.dumps(inc.to_dict(), sort_keys=True)
    if a != b:
        raise Finding(f"whole-trace and incremental verdicts differ: {a[:300]} vs {b[:300]}")
    parsed, _ = parse_trace(t)
    if parsed is None or not isinstance(t, dict) or not isinstance(t.get("steps"), list):
        return
    state, _ = VerifierState.from_givens(parsed.givens)
    for i, raw in enumerate(t["steps"]):  # raw dict steps, as the search and the service send them
        chk = verify_step(state, raw, i)
        if chk.diagnostic is not None and _GUARD.search(chk.diagnostic.message):
            raise Finding(f"guard caught: {chk.diagnostic.message[:200]}")
        if chk.ok:
            state = chk.state
    check_answer(state, parsed.answer)


def t_units(data: bytes) -> None:
    from pcr_ray.core.units import UnitError, convert, unit_info

    p = Provider(data)
    a, b = unit_text(p), unit_text(p)
    try:
        u = unit_info(a)
    except UnitError:
        return
    if not (math.isfinite(u.scale) and u.scale != 0 and math.isfinite(u.offset)):
        raise Finding(f"unit_info({a!r}) has scale {u.scale}, offset {u.offset}")
    try:
        n = p.number()
        convert(float(n) if isinstance(n, float) else 1.0, a, b)  # convert() takes floats
    except (UnitError, ValueError, TypeError):
        pass


def t_expr(data: bytes) -> None:
    from pcr_ray.core.primitives.expr import ExprError, evaluate, parse, parse_equation, sympy_value, to_sympy
    from pcr_ray.core.primitives.registry import DomainError

    p = Provider(data)
    text = expr_text(p)
    env = {n: p.number() for n in ("x", "y", "a", "b", "t") if p.chance(128)}
    env = {k: float(v) for k, v in env.items() if isinstance(v, float) or (type(v) is int and abs(v) < 2**53)}
    for fn in (parse, parse_equation):
        try:
            fn(text)
        except (ExprError, DomainError):
            pass
    try:
        evaluate(text, env)
    except (ExprError, DomainError):
        pass
    try:
        e = to_sympy(text)
        sympy_value(e.subs({sympy.Symbol(k): v for k, v in env.items()}))
    except (ExprError, DomainError):
        pass


def t_trace_loader(data: bytes) -> None:
    from pcr_ray.core.trace import parse_trace

    p = Provider(data)
    k = p.byte() % 4
    obj: Any = p.rest() if k == 0 else p.rest().decode("utf-8", "replace") if k == 1 else trace_obj(p)
    parsed, errors = parse_trace(obj)
    if parsed is None and not errors:
        raise Finding("parse_trace returned neither a trace nor errors")
    for e in errors:
        str(e.path), str(e.message)


def t_serve_models(data: bytes) -> None:
    from pydantic import TypeAdapter, ValidationError

    from pcr_ray.serve.app import plan_candidates, plan_trace
    from pcr_ray.serve.models import CandidatesScoreRequest, ScoreRequest, TraceScoreRequest, VerifyRequest

    p = Provider(data)
    k = p.byte() % 4
    if k == 0:
        body: Any = p.rest()
    else:
        t = trace_obj(p)
        problem = p.text(40) if p.chance(240) else ""
        if k == 1:
            body = {"problem": problem, "trace": t}
        elif k == 2:
            steps = t.get("steps") if isinstance(t, dict) and isinstance(t.get("steps"), list) else []
            cut = p.int_in(0, len(steps))
            prefix = {**t, "steps": steps[:cut]} if isinstance(t, dict) else t
            body = {"problem": problem, "prefix": prefix, "candidates": steps[cut:] or [p.pick(([], {}, "x"))]}
        else:
            body = {"trace": t}
        if p.chance(30):
            body[p.pick(("id", "extra", "problem"))] = p.pick((None, 5, "x" * 200, [], {}))
        body = json.dumps(body, allow_nan=True).encode()
    try:
        VerifyRequest.model_validate_json(body)
    except ValidationError:
        pass
    try:
        req = TypeAdapter(ScoreRequest).validate_json(body)
    except ValidationError:
        return
    if isinstance(req, TraceScoreRequest):
        plan = plan_trace(req.problem, req.trace)
    elif isinstance(req, CandidatesScoreRequest):
        plan = plan_candidates(req.problem, req.prefix, req.candidates)
    else:
        raise Finding(f"ScoreRequest validated to {type(req).__name__}")
    steps = req.trace.get("steps") if isinstance(req, TraceScoreRequest) else req.candidates
    if isinstance(steps, list) and len(plan.rows) != len(steps):
        raise Finding(f"{len(plan.rows)} plan rows for {len(steps)} steps")


TARGET_FNS: dict[str, Callable[[bytes], None]] = {
    "verifier": t_verifier, "incremental": t_incremental, "units": t_units, "expr": t_expr,
    "trace_loader": t_trace_loader, "serve_models": t_serve_models,
}


# ---------------------------------------------------------------------------------- running and recording

_SEEN: set[str] = set()


def run_one(target: str, data: bytes) -> str | None:
    """Run one input; returns the finding's signature (recorded once per process) or None."""
    try:
        TARGET_FNS[target](data)
        return None
    except Exception as exc:  # every exception that reaches here broke the target's contract
        tb = traceback.extract_tb(exc.__traceback__)
        where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb)
                      if "/pcr_ray/" in f.filename), f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?")
        kind = "finding" if isinstance(exc, Finding) else "uncaught"
        sig = f"{target}|{kind}|{type(exc).__name__}|{where}"
        if isinstance(exc, Finding):
            sig += "|" + re.sub(r"[0-9.e+-]+", "N", str(exc))[:80]
        if sig not in _SEEN:
            _SEEN.add(sig)
            out = os.environ.get("PCR_FUZZ_FINDINGS")
            rec = {"signature": sig, "target": target, "kind": kind, "error": f"{type(exc).__name__}: {exc}"[:500],
                   "input_hex": data[:4096].hex(), "traceback": traceback.format_exception(exc)[-6:]}
            if out:
                with open(out, "a") as fh:
                    fh.write(json.dumps(rec) + "\n")
            else:
                print(json.dumps(rec), file=sys.stderr)
        return sig


def seed_inputs(target: str) -> list[bytes]:
    """Corpus seeds: the example and generated gold traces as raw JSON (where the target reads raw input)."""
    _setup_pools()
    texts = [json.dumps(t).encode() for t in _SEEDS[:20]]
    if target == "verifier":
        return [b"\xf0" + t for t in texts]
    if target == "trace_loader":
        return [b"\x01" + t for t in texts]
    if target == "serve_models":
        return [b"\x00" + json.dumps({"problem": "p", "trace": t}).encode() for t in _SEEDS[:20]]
    return [bytes([i]) * 8 for i in range(0, 256, 16)]


def main_atheris(argv: list[str]) -> int:
    """Fuzz one target with atheris (libFuzzer flags and a corpus folder after it); --help, --dry-run."""
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[-1].strip() + f"\n\nusage: fuzz_targets.py TARGET [libFuzzer flags] "
              f"[CORPUS_DIR] | --dry-run\ntargets: {', '.join(TARGETS)}")
        return 0 if len(argv) >= 2 else 2
    if argv[1] == "--dry-run":
        from _machine import dry_run

        return dry_run(__file__, {"targets": TARGETS, "seed_inputs": {t: len(seed_inputs(t)) for t in TARGETS}})
    import atheris

    target = argv[1]
    with atheris.instrument_imports(include=["pcr_ray"]):
        import pcr_ray.core.primitives.expr  # noqa: F401
        import pcr_ray.core.trace  # noqa: F401
        import pcr_ray.core.units  # noqa: F401
        import pcr_ray.core.verifier  # noqa: F401
        import pcr_ray.serve.app  # noqa: F401
        import pcr_ray.serve.models  # noqa: F401
    _setup_pools()

    def one(data: bytes) -> None:
        run_one(target, data)

    atheris.Setup([argv[0], *argv[2:]], one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main_atheris(sys.argv))
