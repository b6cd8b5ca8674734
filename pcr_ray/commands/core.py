"""The commands whose options are not a Hydra config: verify, schema, primitives (argparse; no Ray, no torch)."""

from __future__ import annotations

import argparse
import json
import sys

from pcr_ray.core.primitives import REGISTRY, families
from pcr_ray.core.trace import load_trace, step_json_schema, trace_json_schema
from pcr_ray.core.verifier import CODES, Verdict, VerifierConfig, make_diagnostic, verify


def verify_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="pcr-ray verify",
        description="Verify trace JSON files (syntax, units, coherence). Exit 0 when all are valid, 1 otherwise.",
    )
    ap.add_argument("traces", nargs="+", help="trace JSON file(s); '-' reads standard input")
    ap.add_argument("--json", action="store_true", help="print the verdict as JSON (top-level 'ok')")
    ap.add_argument("--rel-tol", type=float, default=1e-6, help="relative tolerance on claimed values")
    ap.add_argument("--coverage", type=float, default=1.0, help="fraction of families whose unit rules are checked")
    args = ap.parse_args(argv)
    cfg = VerifierConfig(rel_tol=args.rel_tol, coverage=args.coverage)
    all_ok = True
    for path in args.traces:
        if path == "-":
            verdict = verify(sys.stdin.read(), cfg)
        else:
            trace, errors = load_trace(path)
            if trace is None:
                verdict = Verdict(False, tuple(make_diagnostic(e.step, e.code if e.code in CODES else "malformed",
                                                     f"{e.path}: {e.message}") for e in errors))
            else:
                verdict = verify(trace, cfg)
        all_ok &= verdict.ok
        if args.json:
            d = verdict.to_dict()
            d["file"] = path
            print(json.dumps(d))
        else:
            if len(args.traces) > 1 and not verdict.ok:
                first = verdict.first_failure
                print(f"{path}: REJECTED {first.feedback() if first else ''}")
            elif len(args.traces) > 1:
                ans = ", ".join(f"{a.name} = {a.value:.6g} {a.unit}" for a in verdict.answer)
                print(f"{path}: VALID {ans}")
            else:
                print(verdict.format_text())
    return 0 if all_ok else 1


def schema_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="pcr-ray schema",
                                 description="Print the JSON Schema generated from the registry.")
    ap.add_argument("--step", action="store_true", help="schema of one step (or final answer) instead of a trace")
    ap.add_argument("--ops", default="", help="comma-separated op names to restrict the enum")
    args = ap.parse_args(argv)
    ops = [o for o in args.ops.split(",") if o] or None
    print(json.dumps(step_json_schema(ops) if args.step else trace_json_schema(ops), indent=2))
    return 0


def primitives_markdown() -> str:
    """The generated docs table (pcr_ray/core/primitives/PRIMITIVES.md)."""
    lines = [
        "# Primitives",
        "",
        "Generated from the registry by `pcr-ray primitives --markdown` (`make docs`); a test keeps it in sync.",
        f"{len(REGISTRY)} primitives in {len(families())} families. Arguments are variable names (or",
        "dimensionless literals); values are computed in SI base units.",
        "",
        "Temperatures: a given in degC or degF is a reading (an absolute temperature), one in delta_degC or",
        "delta_degF a change, one in K either. Parameters named `delta_t` take changes; the other temperature",
        "parameters (gas laws, Carnot, radiation) take readings. reading - reading is a change, reading +/- change",
        "a reading; reading + reading is refused. A change declared in degC or degF converts without the offset",
        "(pcr_ray/core/temperature.py); an answer keeps its role: a change is answered in K or delta_degC/delta_degF,",
        "a reading in K or degC/degF.",
        "",
    ]
    for fam in families():
        lines += [f"## {fam}", "", "| op | signature | formula | description |", "|---|---|---|---|"]
        for p in sorted((p for p in REGISTRY.values() if p.family == fam), key=lambda p: p.name):
            sig = p.signature().replace("|", "\\|")
            formula = p.formula.replace("|", "\\|")
            lines.append(f"| `{p.name}` | `{sig}` | `{formula}` | {p.description} |")
        lines.append("")
    lines += ["## Diagnostic codes", "", "| code | stage | meaning |", "|---|---|---|"]
    lines += [f"| `{c}` | {s} | {m} |" for c, (s, m) in CODES.items()]
    return "\n".join(lines) + "\n"


def primitives_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="pcr-ray primitives", description="List the registered primitives.")
    ap.add_argument("--markdown", action="store_true", help="print the generated PRIMITIVES.md table")
    ap.add_argument("--family", default="", help="only this family")
    args = ap.parse_args(argv)
    if args.markdown:
        sys.stdout.write(primitives_markdown())
        return 0
    for p in sorted(REGISTRY.values(), key=lambda p: (p.family, p.name)):
        if args.family and p.family != args.family:
            continue
        print(f"{p.family:<16} {p.signature():<60} {p.description}")
    return 0
