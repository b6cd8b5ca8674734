"""The file commands: verify, schema, primitives (Hydra apps over conf/<name>.yaml; no Ray, no torch)."""

from __future__ import annotations

import json
import sys

from omegaconf import DictConfig

from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.core.primitives import REGISTRY, families
from pcr_ray.core.trace import load_trace, step_json_schema, trace_json_schema
from pcr_ray.core.verifier import CODES, Verdict, VerifierConfig, make_diagnostic, verify

VERIFY_USAGE = """usage: pcr-ray verify TRACE.json [TRACE.json ...] [key=value ...]

Verify trace JSON files (syntax, units, coherence); `-` reads standard input. Exit 0 when all are valid, 1 otherwise.
  pcr-ray verify trace.json
  pcr-ray verify a.json b.json json=true      # one JSON verdict per line (top-level "ok")
  cat trace.json | pcr-ray verify -"""

SCHEMA_USAGE = """usage: pcr-ray schema [key=value ...]

Print the JSON Schema generated from the registry: of a trace, or (step=true) of one step.
  pcr-ray schema step=true ops=[add,mul]"""

PRIMITIVES_USAGE = """usage: pcr-ray primitives [key=value ...]

List the registered primitives, or (markdown=true) print the generated PRIMITIVES.md.
  pcr-ray primitives family=kinematics
  pcr-ray primitives markdown=true"""


def run_verify(verify_cfg: DictConfig) -> int:
    """Print the verdict on each trace of `verify_cfg.traces`; 0 when all are valid, 1 otherwise."""
    verifier = VerifierConfig(rel_tol=verify_cfg.rel_tol, coverage=verify_cfg.coverage)
    traces = list(verify_cfg.traces)
    all_ok = True
    for path in traces:
        if path == "-":
            verdict = verify(sys.stdin.read(), verifier)
        else:
            trace, errors = load_trace(path)
            if trace is None:
                verdict = Verdict(False, tuple(make_diagnostic(e.step, e.code if e.code in CODES else "malformed",
                                                     f"{e.path}: {e.message}") for e in errors))
            else:
                verdict = verify(trace, verifier)
        all_ok &= verdict.ok
        if verify_cfg.json:
            d = verdict.to_dict()
            d["file"] = path
            print(json.dumps(d))
        else:
            if len(traces) > 1 and not verdict.ok:
                first = verdict.first_failure
                print(f"{path}: REJECTED {first.feedback() if first else ''}")
            elif len(traces) > 1:
                ans = ", ".join(f"{a.name} = {a.value:.6g} {a.unit}" for a in verdict.answer)
                print(f"{path}: VALID {ans}")
            else:
                print(verdict.format_text())
    return 0 if all_ok else 1


def run_schema(schema_cfg: DictConfig) -> int:
    """Print the JSON Schema of a trace (or of one step), its op enum restricted to `schema_cfg.ops` when given."""
    ops = [str(o) for o in schema_cfg.ops if o] or None
    print(json.dumps(step_json_schema(ops) if schema_cfg.step else trace_json_schema(ops), indent=2))
    return 0


def primitives_markdown() -> str:
    """The generated docs table (pcr_ray/core/primitives/PRIMITIVES.md)."""
    lines = [
        "# Primitives",
        "",
        "Generated from the registry by `pcr-ray primitives markdown=true` (`make docs`); a test keeps it in sync.",
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


def run_primitives(primitives_cfg: DictConfig) -> int:
    """Print the registered primitives (only `primitives_cfg.family`'s when set), or the generated PRIMITIVES.md."""
    if primitives_cfg.markdown:
        sys.stdout.write(primitives_markdown())
        return 0
    for p in sorted(REGISTRY.values(), key=lambda p: (p.family, p.name)):
        if primitives_cfg.family and p.family != primitives_cfg.family:
            continue
        print(f"{p.family:<16} {p.signature():<60} {p.description}")
    return 0


verify_main = hydra_command("verify", "verify", run_verify, VERIFY_USAGE, positional="traces")
schema_main = hydra_command("schema", "schema", run_schema, SCHEMA_USAGE)
primitives_main = hydra_command("primitives", "primitives", run_primitives, PRIMITIVES_USAGE)
