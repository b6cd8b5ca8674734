"""The compute-scaling experiment: accuracy, tokens and PRM calls against the budget N, method by method.

As in search-and-learn, the budget N counts whole traces, and M (`scaling.width`) is the width a search expands
per prefix:
- `best_of_n`, `weighted`, `majority` come from one best_of_n run at the largest N: the first k of its samples
  (generator order) are what best-of-k sees, so one set of samples gives every k. best_of_n@k returns the
  best-scored sample, weighted@k the answer with the most summed score (PRM-weighted vote), majority@k the answer
  of the most samples; pass@k says whether any of the k is right. PRM calls and tokens at k are those the first k
  samples cost; generator tokens the run's, times k/N (the enumerator has none).
- `beam` at N keeps max(1, N // M) partial traces (search-and-learn's beam search keeps N/M of its N), `dvts` at N
  grows max(1, N // M) greedy subtrees; each asks an LLM for M candidates per prefix (k = M; the enumerator gives
  its capped list). Each runs once per N; pass@N says whether any answered trace it collected is right.

`scaling_specs` makes the evaluation's method specs (labels `samples_N<max>`, `beam_N<n>`, `dvts_N<n>`);
`scaling_curves` reads the graded rows back into curves (metrics.json `scaling`, scaling.json); `plot_scaling`
draws accuracy against N and against tokens for the report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pcr_ray.pipeline.records import grade_answer
from pcr_ray.pipeline.report import plot_lines
from pcr_ray.search.selection import Answered, select_answered

SCALING_METHODS = ("best_of_n", "weighted", "majority", "beam", "dvts")
SAMPLED = ("best_of_n", "weighted", "majority")  # read off one best_of_n run at the largest N
SELECTION = {"best_of_n": "best", "weighted": "vote", "majority": "vote"}


def check_scaling(scfg: Mapping[str, Any]) -> None:
    """ValueError naming the key when `scaling` (budgets, width, methods) cannot run."""
    budgets = list(scfg["budgets"])
    if any(int(n) < 1 for n in budgets) or len(set(budgets)) != len(budgets):
        raise ValueError(f"scaling.budgets must be distinct numbers >= 1, got {budgets}")
    if int(scfg["width"]) < 1:
        raise ValueError(f"scaling.width must be >= 1, got {scfg['width']}")
    unknown = [m for m in scfg["methods"] if m not in SCALING_METHODS]
    if unknown:
        raise ValueError(f"scaling.methods: unknown {unknown}; known: {list(SCALING_METHODS)}")


def scaling_specs(scfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The method specs (evaluate's `methods` entries) a scaling sweep runs; [] when scaling.budgets is empty."""
    budgets = sorted(int(n) for n in scfg["budgets"])
    if not budgets:
        return []
    check_scaling(scfg)
    width, methods = int(scfg["width"]), list(scfg["methods"])
    specs: list[dict[str, Any]] = []
    if any(m in SAMPLED for m in methods):
        specs.append({"label": f"samples_N{budgets[-1]}", "method": "best_of_n",
                      "overrides": {"n_samples": budgets[-1]}})
    for n in budgets:
        if "beam" in methods:
            specs.append({"label": f"beam_N{n}", "method": "nsprm",
                          "overrides": {"beam_width": max(1, n // width), "k": width}})
        if "dvts" in methods:
            specs.append({"label": f"dvts_N{n}", "method": "dvts",
                          "overrides": {"n_samples": n, "beam_width": width, "k": width}})
    return specs


def _grade(row: Mapping[str, Any], sample: Mapping[str, Any], mode: str) -> bool:
    if sample.get("value") is None or row.get("error"):
        return False
    return grade_answer({**row, "answer_value": sample["value"], "answer_unit": sample.get("unit") or ""}, mode)[0]


def _samples(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    extra = row.get("extra_json") or ""
    try:
        return list(json.loads(extra).get("samples") or []) if extra else []
    except (TypeError, ValueError, AttributeError):
        return []


def _point(n: int, rights: Sequence[bool], passes: Sequence[bool], cost: Mapping[str, float]) -> dict[str, Any]:
    m = len(rights)
    return {"n": n, "problems": m, "correct": sum(rights), "acc": sum(rights) / m if m else None,
            "pass": sum(passes) / m if m else None, **{k: round(v / m, 3) if m else None for k, v in cost.items()}}


def pick(samples: Sequence[Mapping[str, Any]], method: str) -> int | None:
    """The index of the sample `method` (best_of_n, weighted, majority) returns from `samples`; None if none."""
    answered = [s for s in samples if s.get("value") is not None]
    if not answered:
        return None
    items = [Answered(1.0 if method == "majority" else float(s.get("score") or 0.0), int(s.get("order", i)),
                      (s.get("key"),) if s.get("key") else ()) for i, s in enumerate(answered)]
    return samples.index(answered[select_answered(items, SELECTION[method])])


def scaling_curves(rows: Sequence[Mapping[str, Any]], scfg: Mapping[str, Any], mode: str = "default"
                   ) -> dict[str, Any]:
    """{budgets, width, methods: {method: [point per N]}}; a point: n, problems, correct, acc, pass, and the mean
    prm_calls, prm_tokens, prompt_tokens and output_tokens per problem at that N."""
    budgets = sorted(int(n) for n in scfg["budgets"])
    methods = list(scfg["methods"])
    by_label: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_label.setdefault(str(r["method"]), []).append(r)
    out: dict[str, Any] = {"budgets": budgets, "width": int(scfg["width"]), "grading": mode, "methods": {}}
    sampled_runs = sorted(int(k[len("samples_N"):]) for k in by_label
                          if k.startswith("samples_N") and k[len("samples_N"):].isdigit()
                          and int(k[len("samples_N"):]) >= budgets[-1])
    n_run = sampled_runs[0] if sampled_runs else budgets[-1]  # the best_of_n run whose samples are subsampled
    sampled_rows = by_label.get(f"samples_N{n_run}", [])
    graded = [(r, sorted(_samples(r), key=lambda s: int(s.get("i", 0)))) for r in sampled_rows]
    graded = [(r, ss, [_grade(r, s, mode) for s in ss]) for r, ss in graded]
    for m in (x for x in methods if x in SAMPLED):
        curve = []
        for n in budgets:
            rights, passes = [], []
            cost = {"prm_calls": 0.0, "prm_tokens": 0.0, "prompt_tokens": 0.0, "output_tokens": 0.0}
            for r, ss, ok in graded:
                first = [j for j, s in enumerate(ss) if int(s.get("i", 0)) < n]
                j = pick([ss[i] for i in first], m)
                rights.append(j is not None and ok[first[j]])
                passes.append(any(ok[i] for i in first))
                cost["prm_calls"] += sum(int(ss[i].get("prm_calls") or 0) for i in first)
                cost["prm_tokens"] += sum(int(ss[i].get("prm_tokens") or 0) for i in first)
                for k in ("prompt_tokens", "output_tokens"):
                    cost[k] += float(r.get(k) or 0) * n / n_run
            curve.append(_point(n, rights, passes, cost))
        out["methods"][m] = curve
    for m in (x for x in methods if x in ("beam", "dvts")):
        curve = []
        for n in budgets:
            rs = by_label.get(f"{m}_N{n}", [])
            cost = {k: float(sum(float(r.get(k) or 0) for r in rs))
                    for k in ("prm_calls", "prm_tokens", "prompt_tokens", "output_tokens")}
            passes = [any(_grade(r, s, mode) for s in _samples(r)) for r in rs]
            curve.append(_point(n, [bool(r.get("correct")) for r in rs], passes, cost))
        out["methods"][m] = curve
    return out


def scaling_table(curves: Mapping[str, Any]) -> str:
    """Markdown: one row per (method, N): accuracy, pass@N, PRM calls and tokens per problem."""
    lines = ["| method | N | Acc % | pass@N % | PRM calls/problem | PRM tokens/problem | generator tokens/problem |",
             "|---|---|---|---|---|---|---|"]
    for m, pts in curves["methods"].items():
        for p in pts:
            gen = (p.get("prompt_tokens") or 0) + (p.get("output_tokens") or 0)
            acc = "-" if p["acc"] is None else f"{100 * p['acc']:.1f}"
            pas = "-" if p["pass"] is None else f"{100 * p['pass']:.1f}"
            lines.append(f"| {m} | {p['n']} | {acc} | {pas} | {p.get('prm_calls') or 0:.1f} | "
                         f"{p.get('prm_tokens') or 0:.0f} | {gen:.0f} |")
    return "\n".join(lines)


def plot_scaling(curves: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The report's plots: accuracy against N, and against tokens per problem (generator + PRM); base64 PNGs."""
    def tokens(p: Mapping[str, Any]) -> float:
        return float((p.get("prm_tokens") or 0) + (p.get("prompt_tokens") or 0) + (p.get("output_tokens") or 0))

    plots = []
    for title, x_of, xlabel in (("Accuracy vs N", lambda p: float(p["n"]), "N (traces)"),
                                ("Accuracy vs tokens", tokens, "tokens per problem (generator + PRM)")):
        series = {m: [(x_of(p), 100 * p["acc"]) for p in pts if p["acc"] is not None]
                  for m, pts in curves["methods"].items()}
        log2 = all(x > 0 for pts in series.values() for x, _ in pts) and any(series.values())
        plots.append((title, plot_lines(series, xlabel=xlabel, ylabel="Acc (%)", title=title, log2_x=log2)))
    return plots
