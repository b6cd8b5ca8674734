"""The givens extractor measured (docs/reproduction.md, the givens row): on GSM8K test and generated physics, the
problems whose gold givens are all captured, and the gold givens captured per kind (unitless, count, money, rate,
physical); on SciBench physics (no gold givens), the problems with givens found and the targets of the answer's
dimension. The `givens` step of `pcr-ray reproduce` runs it.

    python -m pcr_ray.bench.givens OUT.json
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pcr_ray.bench.records import git_revision, machine_info
from pcr_ray.core.units import try_unit_info
from pcr_ray.data.givens import extract, score_extraction
from pcr_ray.data.physics import generate_problems
from pcr_ray.data.readers import SCIBENCH_PHYSICS, load_dataset


def gold_answer_unit(trace: dict) -> str:
    """The unit of a gold trace's (first) answer; '' when it names none."""
    answers = trace.get("answer") or [{}]
    return str(answers[0].get("unit") or "")


def measure_givens(path: Path) -> dict[str, Any]:
    """The extractor on GSM8K test and generated physics of the unseen templates (complete gold givens captured), and
    on SciBench physics (no gold givens: problems with givens found, and targets of the answer's dimension)."""
    out: dict[str, Any] = {}
    gsm = [p for p in load_dataset("gsm8k_test") if p.gold_trace]
    phys = generate_problems(n=300, seed=0, split="heldout")
    for name, probs in (("gsm8k_test", gsm), ("physics", phys)):
        # GSM8K's rows state no answer unit: the gold trace's answer has it
        out[name] = score_extraction([(p.text, p.gold_trace, p.answer_unit or gold_answer_unit(p.gold_trace))
                                      for p in probs]).to_dict()
    sci = load_dataset("scibench", books=list(SCIBENCH_PHYSICS))
    ex = [(p, extract(p.text)) for p in sci]
    known = [(p, e) for p, e in ex if e.target.known]
    units = [try_unit_info(p.answer_unit or "dimensionless") for p in sci]
    out["scibench_physics"] = {
        "n": len(sci), "with_givens": sum(bool(e.givens) for _, e in ex),
        "answer_units_parsed": sum(u is not None for u in units), "n_target_known": len(known),
        "target_right": sum(e.target.dims == u.dims for (p, e), u in
                            ((pe, try_unit_info(pe[0].answer_unit or "dimensionless")) for pe in known)
                            if u is not None)}
    out.update(command=f"python -m pcr_ray.bench.givens {path}", git_revision=git_revision(), machine=machine_info())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m pcr_ray.bench.givens OUT.json`: measure, write OUT.json."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m pcr_ray.bench.givens OUT.json", file=sys.stderr)
        return 2
    measure_givens(Path(args[0]))
    print(f"givens: {args[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
