"""`pcr-ray reproduce`: every claim of the paper measured by one command, beside the paper's number.

Runs one `pcr-ray` command (or benchmark script) per measurement, each in its own process, skipping the steps
whose output is already there (pcr_ray.pipeline.recipe), then reads their
outputs and writes reproduction.md and reproduction.json into the run directory: for every claim the paper's
number, ours, the sample size, a 95% Wilson interval where it is a proportion, and the command of the step
that measured it. `scale=cpu` (the default) runs on one CPU machine (60 minutes on 2 cores from an empty cache,
the quick PRMs' training and the generator's fine-tune included); `scale=paper` is the GPU cluster's
configuration (GSM8K + MATH-500, Qwen2.5-Math-7B-Instruct through vLLM, beam 8, DeBERTa-v3-base PRMs).
docs/reproduction.md explains each row. Every search runs on the givens extracted from the problem text (the
default `pipeline.givens`); a row measured by a step whose run used the gold trace's givens says "(oracle givens)".
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from pcr_ray.bench.records import git_revision, machine_info
from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.configs import ConfigError, to_plain
from pcr_ray.negatives.csp import CSP_KINDS
from pcr_ray.paths import cache_dir, runs_dir
from pcr_ray.pipeline.metrics import ORACLE_GIVENS, TEMPLATE_SPLIT_LABELS, ignored_conditions
from pcr_ray.pipeline.recipe import RecipeStep, run_recipe
from pcr_ray.pipeline.stats import wilson

PCR = (sys.executable, "-m", "pcr_ray.cli")
TABLE_METHODS = ("direct", "pyexec", "prm_only", "nsprm")  # the paper's Table 1 columns, in its order
METHOD_NAMES = {"direct": "direct answer", "pyexec": "ToRA-style Python", "prm_only": "PRM-only",
                "nsprm": "NS-PRM", "verifier_only": "verifier-only"}
PAPER_TABLE1 = {"direct": (52.1, 78.6), "pyexec": (73.4, 89.2), "prm_only": (68.2, 85.5), "nsprm": (81.5, 93.1)}
PAPER_SILENT_LONG = {"pyexec": 21.0, "prm_only": 12.3, "nsprm": 5.0}
PAPER_SHORT_LONG = {"pyexec": (82.0, 67.0), "nsprm": (88.0, 78.0)}
PAPER_ERROR_REMOVED = {"unit": 93.0, "formula_misuse": 87.0, "assumption": 41.0}


@dataclass(frozen=True)
class Scale:
    """How many problems each measurement uses, and the settings of the searches that measure it."""

    name: str
    physics: int
    gsm8k: int
    scibench: int
    ablation_physics: int
    pair_physics: int
    pair_gsm8k: int
    bench_physics: int
    bench_gsm8k: int
    conditions: int
    sft_physics: int  # Table 1 on one backbone, generated physics only (docs/reproduction.md)


SCALES: dict[str, Scale] = {
    "cpu": Scale("cpu", physics=40, gsm8k=20, scibench=30, ablation_physics=40, pair_physics=300, pair_gsm8k=300,
                 bench_physics=300, bench_gsm8k=300, conditions=40, sft_physics=10),
    "paper": Scale("paper", physics=0, gsm8k=0, scibench=0, ablation_physics=0, pair_physics=3000,
                   pair_gsm8k=3000, bench_physics=1000, bench_gsm8k=1319, conditions=200, sft_physics=0),
}
# the CPU searches of the ablations: the demo's settings (typed enumerator, cap 24, beam 2, 5 steps, int8 PRM)
CPU_SEARCH = ("generator=enumerator", "generator.cap=24", "search.beam_width=2", "search.max_steps=5",
              "search.max_backtracks=1", "prm.int8=true", "pipeline.num_search_workers=2", "pipeline.batch_size=5",
              "ray.num_cpus=2")
PAPER_CLUSTER = ("ray.address=auto",)


@dataclass
class Options:
    """A run's options (conf/reproduce.yaml, configs.ReproduceConfig) with their defaults resolved."""

    scale: str = "cpu"
    out: str | None = None
    problems: int = 0
    methods: list[str] = field(default_factory=list)
    checkpoint_csp: str | None = None
    checkpoint_random: str | None = None
    steps: list[str] = field(default_factory=list)
    dry_run: bool = False
    report_only: bool = False


def _sources(items: Sequence[str]) -> str:
    return "dataset.sources=[" + ",".join(items) + "]"


def _physics(n: int, seed: int = 0, mix: str = "") -> str:
    """A physics source for an evaluation: the held-out templates (no learned part trained on them)."""
    extra = f",mix:{mix}" if mix else ""
    return f"{{name:physics,limit:{n},kwargs:{{n:{n},seed:{seed}{extra},split:heldout}}}}"


def _checkpoint(args: Options, kind: str) -> list[str]:
    ck = getattr(args, f"checkpoint_{kind}")
    return [f"prm.checkpoint={Path(ck).resolve()}"] if ck else []


def _n(args: Options, full: int) -> int:
    return min(full, args.problems) if args.problems else full


def _evaluate(name: str, out: Path, overrides: Sequence[str]) -> RecipeStep:
    run = out / name
    return RecipeStep(name, (*PCR, "evaluate", *overrides, f"run_dir={run}", "pipeline.progress=false"),
                      run / "metrics.json")


def recipe(args: Options) -> list[RecipeStep]:
    """The steps of the reproduction for these arguments (nothing is run)."""
    out = Path(args.out).expanduser().resolve()
    sc = SCALES[args.scale]
    methods = [f"methods=[{','.join(args.methods)}]"] if args.methods else []
    steps: list[RecipeStep] = []
    if sc.name == "cpu":
        table_sources = [_physics(_n(args, sc.physics)),
                         f"{{name:gsm8k_test,limit:{_n(args, sc.gsm8k)},sample:random,seed:0}}",
                         f"{{name:scibench,limit:{_n(args, sc.scibench)},sample:random,seed:0,"
                         f"kwargs:{{books:[fund,class,thermo]}}}}"]
        steps.append(_evaluate("table", out, ["experiment=demo", "dataset.name=reproduce_table",
                                              _sources(table_sources), *methods, *_checkpoint(args, "csp")]))
        # the same table with one backbone: every method driven by the fine-tuned SmolLM2 (sft:tiny, docs/sft.md)
        steps.append(_evaluate("table_sft", out, [
            "experiment=one_backbone", "dataset.name=reproduce_table_sft",
            _sources([_physics(_n(args, sc.sft_physics))]), *methods, *_checkpoint(args, "csp")]))
        abl = [_sources([_physics(_n(args, sc.ablation_physics))]), "dataset.name=physics"]
        for kind in ("csp", "random"):
            steps.append(_evaluate(f"csp_ablation_{kind}", out, [
                "experiment=csp_ablation", f"prm=minilm_{kind}", *abl, *CPU_SEARCH, "methods=[nsprm,prm_only]",
                *_checkpoint(args, kind)]))
        for cov in ("0.5", "1.0"):
            steps.append(_evaluate(f"coverage_{cov}", out, [
                "experiment=coverage_ablation", f"search.verifier_coverage={cov}", *abl, *CPU_SEARCH,
                "methods=[nsprm]", *_checkpoint(args, "csp")]))
        # problems that state a condition (friction, air resistance, heat loss, efficiency): the assumption row.
        # Cap 48: the step a condition adds (a sub, mul or div) ranks below the domain formulas in the
        # enumerator's order; at cap 24 the gold path is offered for 13% of them, at 48 for 57% (docs/data.md)
        steps.append(_evaluate("conditions", out, [
            "experiment=demo", "dataset.name=physics_conditions",
            _sources([_physics(_n(args, sc.conditions), mix="assumption")]),
            *(o for o in CPU_SEARCH if not o.startswith("generator.cap=")), "generator.cap=48",
            "methods=[nsprm,prm_only]", *_checkpoint(args, "csp")]))
        pair_sources = [_physics(max(60, _n(args, sc.pair_physics)), 4242),
                        f"{{name:gsm8k_test,limit:{_n(args, sc.pair_gsm8k)}}}"]
        eval_extra = ("use_ray=false", "prm.int8=true")
    else:
        train_pairs = out / "train_pairs"  # make-pairs' own sources: 3,000 physics + 3,000 GSM8K train problems
        steps.append(RecipeStep("train_pairs", (*PCR, "make-pairs", f"out_dir={train_pairs}"),
                                train_pairs / "summary.json"))
        for kind in ("csp", "random"):
            ck = Path(getattr(args, f"checkpoint_{kind}")).resolve()
            steps.append(RecipeStep(f"train_prm_{kind}", (
                *PCR, "train-prm", "prm=deberta_v3_base", f"prm.kind={kind}", f"pairs_dir={train_pairs}",
                "scaling.use_gpu=true", "scaling.num_workers=4", f"output={ck}", *PAPER_CLUSTER), ck / "prm.json"))
        steps.append(_evaluate("table", out, ["experiment=paper_table", *methods, *_checkpoint(args, "csp")]))
        gpu = ("generator=qwen_math_7b", "search=paper", "search.beam_width=8", "dataset=paper",
               "prm=deberta_v3_base", *PAPER_CLUSTER, "actors.generator.placement=actor",
               "actors.generator.num_gpus=1", "actors.prm.num_gpus=0.25")
        for kind in ("csp", "random"):
            steps.append(_evaluate(f"csp_ablation_{kind}", out, [  # experiment=csp_ablation's groups, on the GPU
                *gpu, "methods=[nsprm,prm_only]",
                f"prm.kind={kind}", *_checkpoint(args, kind)]))
        for cov in ("0.5", "1.0"):
            steps.append(_evaluate(f"coverage_{cov}", out, [  # experiment=coverage_ablation's groups, on the GPU
                *gpu, f"search.verifier_coverage={cov}", "methods=[nsprm]", *_checkpoint(args, "csp")]))
        steps.append(_evaluate("conditions", out, [
            "experiment=paper_table", "dataset.name=physics_conditions",
            _sources([_physics(sc.conditions, mix="assumption")]), "methods=[nsprm,prm_only]",
            *_checkpoint(args, "csp")]))
        pair_sources = [_physics(sc.pair_physics, 4242), f"{{name:gsm8k_test,limit:{sc.pair_gsm8k}}}"]
        eval_extra = ("prm=deberta_v3_base", "prm.device=cuda", "prm.bf16=true", *PAPER_CLUSTER)
    pairs = out / "pairs"
    steps.append(RecipeStep("pairs", (*PCR, "make-pairs", f"sources=[{','.join(pair_sources)}]",
                                      f"kinds=[{','.join(CSP_KINDS)}]", f"out_dir={pairs}"), pairs / "summary.json"))
    for kind in ("csp", "random"):
        prm = [*eval_extra, f"prm.kind={kind}"] if sc.name == "paper" else [f"prm=minilm_{kind}", *eval_extra]
        steps.append(RecipeStep(f"eval_prm_{kind}", (*PCR, "eval-prm", *prm, *_checkpoint(args, kind),
                                                     f"pairs_dir={pairs}", "split=test",
                                                     f"out={out / f'eval_prm_{kind}.json'}"),
                                out / f"eval_prm_{kind}.json"))
    ck = args.checkpoint_csp
    sizes = ("--physics", str(max(20, _n(args, sc.bench_physics))), "--gsm8k", str(max(20, _n(args, sc.bench_gsm8k))))
    steps.append(RecipeStep("first_error", (sys.executable, "-m", "pcr_ray.bench.first_error", *sizes,
                                            "--out", str(out / "first_error"),
                                            "--name", "first_error",
                                            *(["--checkpoint", str(Path(ck).resolve())] if ck else [])),
                            out / "first_error" / "first_error.json"))
    steps.append(RecipeStep("givens", (sys.executable, "-m", "pcr_ray.bench.givens", str(out / "givens.json")),
                            out / "givens.json"))
    return steps


# ---------------------------------------------------------------- the report


def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def _prop(label: str, k: int, n: int, paper: str, step: str, how: str) -> dict[str, Any]:
    lo, hi = wilson(k, n)
    return {"label": label, "paper": paper, "ours": round(100 * k / n, 1) if n else None, "k": k, "n": n,
            "ci95": [round(100 * lo, 1), round(100 * hi, 1)] if n else None, "unit": "%", "step": step, "how": how}


def _value(label: str, value: float | None, n: int | None, paper: str, step: str, how: str, unit: str = ""
           ) -> dict[str, Any]:
    return {"label": label, "paper": paper, "ours": None if value is None else round(value, 3), "k": None, "n": n,
            "ci95": None, "unit": unit, "step": step, "how": how}


def _missing(label: str, paper: str, step: str, why: str) -> dict[str, Any]:
    return {"label": label, "paper": paper, "ours": None, "k": None, "n": None, "ci95": None, "unit": "",
            "step": step, "how": why}


def _acc_k(d: Mapping[str, Any]) -> tuple[int, int]:
    n = int(d.get("n") or 0)
    return (round(float(d["acc"]) * n) if n and d.get("acc") is not None else 0), n


def table_claims(metrics: Mapping[str, Any] | None, scale: str) -> list[dict[str, Any]]:
    if metrics is None:
        return [_missing("Table 1", "see paper", "table", "step not run")]
    rows = []
    ms = metrics["methods"]
    for m in TABLE_METHODS + ("verifier_only",):
        if m not in ms:
            continue
        paper = f"MATH {PAPER_TABLE1[m][0]} / GSM8K {PAPER_TABLE1[m][1]}" if m in PAPER_TABLE1 else "-"
        for src, d in sorted(ms[m]["by_source"].items()):
            # generated physics by template split (unseen: held out from every learned part), when rows carry it
            splits = (ms[m].get("by_template_split") or {}) if src == "physics" else {}
            parts = [(f"{src}, {TEMPLATE_SPLIT_LABELS[s]}", ds) for s, ds in splits.items()] or [(src, d)]
            for label, ds in parts:
                k, n = _acc_k(ds)
                rows.append(_prop(f"Table 1 Acc@1, {METHOD_NAMES[m]}, {label}", k, n, paper, "table",
                                  "correct answers / problems of this source"))
    return rows


def horizon_claims(metrics: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if metrics is None:
        return [_missing("silent failures / horizon", "see paper", "table", "step not run")]
    rows = []
    ms = metrics["methods"]
    for m, paper in PAPER_SILENT_LONG.items():
        if m in ms:
            h = ms[m]["by_horizon"]["long"]
            rows.append(_prop(f"silent failures, long horizon (5+ gold steps), {METHOD_NAMES[m]}",
                              int(h["silent_failures"]), int(h["n"]), f"{paper}", "table",
                              "wrong answers returned without an error signal / long-horizon problems"))
    for m, (ps, pl) in PAPER_SHORT_LONG.items():
        if m in ms:
            for h, paper in (("short", ps), ("long", pl)):
                k, n = _acc_k(ms[m]["by_horizon"][h])
                rows.append(_prop(f"Acc@1, {h} horizon, {METHOD_NAMES[m]}", k, n, f"{paper}", "table",
                                  f"correct / problems whose gold trace is {'5+' if h == 'long' else 'under 5'} steps"))
    return rows


def csp_claims(out: Path) -> list[dict[str, Any]]:
    rows = []
    ev = {k: _load(out / f"eval_prm_{k}.json") for k in ("csp", "random")}
    accs = {}
    for k, d in ev.items():
        if d is None:
            rows.append(_missing(f"pairwise accuracy, {k} PRM", "-", f"eval_prm_{k}", "step not run"))
            continue
        a = d["by_kind"]["all"]
        n = int(a["pairs"])
        accs[k] = float(a["pairwise_acc"])
        rows.append(_prop(f"pairwise accuracy on verifier-passing test pairs, PRM trained on {k} negatives",
                          round(accs[k] * n), n, "-", f"eval_prm_{k}", "pairs whose gold step outscores the CSP "
                          "negative (ties half) / pairs"))
    if len(accs) == 2:
        rows.append(_value("without CSP: pairwise accuracy change (random PRM - CSP PRM)",
                           100 * (accs["random"] - accs["csp"]), None, "-14.2", "eval_prm_random",
                           "difference of the two rows above", "points"))
    search = {k: _load(out / f"csp_ablation_{k}" / "metrics.json") for k in ("csp", "random")}
    for k, m in search.items():
        if m is None or "nsprm" not in m["methods"]:
            continue
        kk, n = _acc_k(m["methods"]["nsprm"])
        rows.append(_prop(f"search Acc@1 (NS-PRM search) with the PRM trained on {k} negatives", kk, n, "-",
                          f"csp_ablation_{k}", "correct / generated physics problems, same search and budget"))
    if all(m is not None and "nsprm" in m["methods"] for m in search.values()):
        d = {k: m["methods"]["nsprm"]["acc"] for k, m in search.items()}  # type: ignore[index]
        rows.append(_value("without CSP: search Acc@1 change", 100 * (d["random"] - d["csp"]), None, "-14.2",
                           "csp_ablation_random", "difference of the two rows above", "points"))
    return rows


def coverage_claims(out: Path) -> list[dict[str, Any]]:
    runs = {c: _load(out / f"coverage_{c}" / "metrics.json") for c in ("0.5", "1.0")}
    rows = []
    for c, m in runs.items():
        if m is None or "nsprm" not in m["methods"]:
            rows.append(_missing(f"Acc@1 at verifier coverage {c}", "-", f"coverage_{c}", "step not run"))
            continue
        k, n = _acc_k(m["methods"]["nsprm"])
        rows.append(_prop(f"NS-PRM Acc@1 at verifier coverage {c}", k, n, "-", f"coverage_{c}",
                          "correct / generated physics problems"))
    if all(m is not None and "nsprm" in m["methods"] for m in runs.values()):
        a = {c: m["methods"]["nsprm"] for c, m in runs.items()}  # type: ignore[index]
        rows.append(_value("coverage 50% -> 100%: Acc@1 change", 100 * (a["1.0"]["acc"] - a["0.5"]["acc"]), None,
                           "+6.8", "coverage_1.0", "difference of the two rows above", "points"))
        t5, t1 = a["0.5"].get("mean_time_s"), a["1.0"].get("mean_time_s")
        rows.append(_value("coverage 50% -> 100%: cost (mean search seconds per problem, 1.0 / 0.5)",
                           (t1 / t5) if t5 and t1 else None, None, "1.3x", "coverage_1.0",
                           "ratio of the mean generation + verification + PRM seconds per problem", "x"))
    return rows


def _result_rows(path: Path, traces: bool = False) -> dict[tuple[str, str], dict[str, Any]] | None:
    """{(problem_id, method): row} of a results.parquet (its correct and error_type columns, and with `traces` a
    `left_out` flag: a wrong answer whose trace leaves out a condition its problem states); None when absent."""
    if not path.exists():
        return None
    import pyarrow.parquet as pq  # heavy: pyarrow

    cols = ["problem_id", "method", "correct", "error_type"]
    rows = pq.read_table(path, columns=cols + (["trace_json", "gold_trace_json"] if traces else [])).to_pylist()
    for r in rows:
        if traces:
            pred, gold = (json.loads(r.pop(k) or "null") for k in ("trace_json", "gold_trace_json"))
            r["left_out"] = bool(not r["correct"] and pred and gold and ignored_conditions(pred, gold))
    return {(r["problem_id"], r["method"]): r for r in rows}


def _removed(by: Mapping[tuple[str, str], Mapping[str, Any]], etype: str, paper: float, step: str,
             what: str) -> dict[str, Any]:
    base = [pid for (pid, m), r in by.items() if m == "prm_only" and not r["correct"] and r["error_type"] == etype]
    base = [pid for pid in base if (pid, "nsprm") in by]
    removed = sum(by[(pid, "nsprm")]["correct"] or by[(pid, "nsprm")]["error_type"] != etype for pid in base)
    return _prop(f"error type NS-PRM removes vs PRM-only: {etype.replace('_', ' ')}", removed, len(base),
                 f"{paper}", step, f"PRM-only's {etype} errors on which NS-PRM makes no {etype} error / PRM-only's "
                 f"{etype} errors ({what})")


def error_type_claims(out: Path) -> list[dict[str, Any]]:
    """Unit and formula-misuse errors from the table step; assumption errors from the conditions step (generated
    physics problems that state a condition: pcr_ray.pipeline.metrics.ignored_conditions)."""
    out_rows = []
    table = _result_rows(out / "table" / "results.parquet")
    for etype in ("unit", "formula_misuse"):
        paper = PAPER_ERROR_REMOVED[etype]
        if table is None:
            out_rows.append(_missing(f"error type NS-PRM removes vs PRM-only: {etype.replace('_', ' ')}",
                                     f"{paper}", "table", "step not run"))
        else:
            out_rows.append(_removed(table, etype, paper, "table", "the Table 1 problems"))
    cond = _result_rows(out / "conditions" / "results.parquet", traces=True)
    if cond is None:
        out_rows.append(_missing("error type NS-PRM removes vs PRM-only: assumption",
                                 f"{PAPER_ERROR_REMOVED['assumption']}", "conditions", "step not run"))
        return out_rows
    out_rows.append(_removed(cond, "assumption", PAPER_ERROR_REMOVED["assumption"], "conditions",
                             "generated physics problems that state a condition"))
    # the same with a condition left out counted whatever the row's first error type (a PRM-only trace the
    # verifier rejects is a unit error first, and may leave the condition out as well)
    base = [pid for (pid, m), r in cond.items() if m == "prm_only" and r["left_out"] and (pid, "nsprm") in cond]
    out_rows.append(_prop("condition left out (any error type): NS-PRM removes vs PRM-only",
                          sum(not cond[(pid, "nsprm")]["left_out"] for pid in base), len(base),
                          f"{PAPER_ERROR_REMOVED['assumption']}", "conditions",
                          "PRM-only's wrong answers that leave out a stated condition on which NS-PRM does not / "
                          "those answers"))
    for m in ("prm_only", "nsprm"):
        wrong = [r for (_, mm), r in cond.items() if mm == m and not r["correct"]]
        if wrong:
            out_rows.append(_prop(f"{METHOD_NAMES[m]}'s wrong answers, condition problems: assumption errors",
                                  sum(r["error_type"] == "assumption" for r in wrong), len(wrong), "-",
                                  "conditions", "wrong answers whose first error is a stated condition left out / "
                                  "wrong answers (no answer included)"))
            out_rows.append(_prop(f"{METHOD_NAMES[m]}'s wrong answers, condition problems: condition left out",
                                  sum(r["left_out"] for r in wrong), len(wrong), "-", "conditions",
                                  "wrong answers whose trace leaves out a stated condition, any error type / "
                                  "wrong answers (no answer included)"))
    return out_rows


def givens_claims(out: Path) -> list[dict[str, Any]]:
    g = _load(out / "givens.json")
    if g is None:
        return [_missing("givens parser: full initial state", "95.2", "givens", "step not run")]
    rows = []
    for src in ("gsm8k_test", "physics"):
        d = g[src]
        n = int(d["n"])
        rows.append(_prop(f"givens parser captures every gold given (value and unit), {src}",
                          round(d["complete"] * n), n, "95.2", "givens", "problems whose used gold givens are "
                          "all extracted with their dimension / problems with a gold trace"))
        rows.append(_prop(f"givens parser captures every gold given (value only), {src}",
                          round(d["complete_value_only"] * n), n, "95.2", "givens",
                          "the same, values only (a count's unit may differ)"))
    s = g["scibench_physics"]
    rows.append(_prop("SciBench physics: problems with givens extracted", s["with_givens"], s["n"], "-", "givens",
                      "problems with at least one given found (no gold givens to compare with)"))
    rows.append(_prop("SciBench physics: asked quantity of the answer's dimension", s["target_right"],
                      s["n_target_known"], "-", "givens", "targets of the gold answer's dimension / targets found"))
    return rows


def first_error_claims(out: Path) -> list[dict[str, Any]]:
    d = _load(out / "first_error" / "first_error.json")
    if d is None:
        return [_missing("first-error F1", "- (ours)", "first_error", "step not run")]
    rows = []
    for name, res in d["test"].items():
        a = res["all"]
        rows.append(_value(f"first-error benchmark F1, {name}", 100 * a["f1"], a["n_error"] + a["n_correct"],
                           "- (ours)", "first_error", "harmonic mean of the two accuracies below (test split)", "%"))
        rows.append(_prop(f"first-error benchmark, {name}: earliest wrong step found exactly", a["hits_error"],
                          a["n_error"], "- (ours)", "first_error", "traces with a planted error"))
        rows.append(_prop(f"first-error benchmark, {name}: correct traces passed", a["hits_correct"], a["n_correct"],
                          "- (ours)", "first_error", "traces without an error"))
    return rows


def step_givens(out: Path, step: str) -> str | None:
    """The givens mode of an evaluate step's run (its metrics.json `givens`: extract, or gold: oracle givens);
    None for a step that wrote no metrics.json (a benchmark, or not run)."""
    m = _load(out / step / "metrics.json")
    return None if m is None else m.get("givens")


def label_oracle(claims: Sequence[Mapping[str, Any]], givens: Mapping[str, str | None]) -> None:
    """Append " (oracle givens)" to the label of every row whose step ran on the gold trace's givens (in place)."""
    for c in claims:
        for r in c["rows"]:
            if givens.get(r["step"]) == "gold" and ORACLE_GIVENS not in r["label"]:
                r["label"] += f" ({ORACLE_GIVENS})"


def provenance() -> dict[str, Any]:
    """The machine (platform, CPUs, CPU model) and the git revision of the code writing the report."""
    return {"machine": machine_info(), "git_revision": git_revision()}


def report(out: Path, steps: Sequence[RecipeStep], args: Options, argv: Sequence[str] = ()) -> dict[str, Any]:
    """Read the steps' outputs and write reproduction.json and reproduction.md into `out`; `argv`: the command's
    overrides, for its line in the report."""
    table = _load(out / "table" / "metrics.json")
    claims = [
        {"claim": "Table 1: Acc@1 of direct, ToRA-style Python, PRM-only, NS-PRM", "rows": table_claims(table,
                                                                                                 args.scale)},
        {"claim": "Table 1 on one backbone: every method driven by the fine-tuned SmolLM2-135M (sft:tiny)",
         "rows": table_claims(_load(out / "table_sft" / "metrics.json"), args.scale)},
        {"claim": "silent failures and accuracy by horizon", "rows": horizon_claims(table)},
        {"claim": "without CSP the PRM's accuracy drops", "rows": csp_claims(out)},
        {"claim": "verifier coverage 50% -> 100%", "rows": coverage_claims(out)},
        {"claim": "error types NS-PRM removes vs the PRM baseline", "rows": error_type_claims(out)},
        {"claim": "givens parser captures the full initial state", "rows": givens_claims(out)},
        {"claim": "beyond the paper: first-error benchmark on unit-bearing traces", "rows": first_error_claims(out)},
    ]
    givens = {s.name: step_givens(out, s.name) for s in steps}
    label_oracle(claims, givens)
    commands = {s.name: {"command": s.shell(), "output": str(s.done_when), "done": s.done_when.exists(),
                         "givens": givens[s.name]} for s in steps}
    result = {"scale": args.scale, "run_dir": str(out), "written": time.strftime("%Y-%m-%d %H:%M:%S"),
              "command": shlex.join(["pcr-ray", "reproduce", *argv]),
              **provenance(), "steps": commands,
              "claims": claims}
    (out / "reproduction.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "reproduction.md").write_text(markdown(result))
    return result


def _fmt(r: Mapping[str, Any]) -> tuple[str, str]:
    if r["ours"] is None:
        return "not measured", ""
    unit = r["unit"]
    ours = f"{r['ours']}" + ("x" if unit == "x" else " pts" if unit == "points" else "")
    ci = f"{r['ci95'][0]}-{r['ci95'][1]}" if r["ci95"] else ""
    return ours, ci


def markdown(result: Mapping[str, Any]) -> str:
    """reproduction.md: one table of every claim (paper, ours, n, 95% CI, how), then the steps' commands."""
    where = ""
    if result.get("git_revision"):
        m = result.get("machine") or {}
        where = (f" Git revision {result['git_revision'][:12]}; {m.get('cpu_count', '?')} CPUs "
                 f"({m.get('cpu_model') or m.get('platform', '?')}).")
    lines = [f"# Reproduction ({result['scale']} scale)", "",
             f"`{result['command']}`, written {result['written']}.{where}",
             "Percentages unless marked; 95% CI: Wilson interval of a proportion. Searches start from the givens "
             f"extracted from the problem text; a row marked ({ORACLE_GIVENS}) was measured on the gold trace's "
             "givens. docs/reproduction.md explains each row.", "",
             "| claim | measurement | paper | ours | n | 95% CI | how | step |",
             "|---|---|---|---|---|---|---|---|"]
    for c in result["claims"]:
        for i, r in enumerate(c["rows"]):
            ours, ci = _fmt(r)
            lines.append(f"| {c['claim'] if i == 0 else ''} | {r['label']} | {r['paper']} | {ours} | "
                         f"{r['n'] if r['n'] is not None else ''} | {ci} | {r['how']} | {r['step']} |")
    lines += ["", "## Steps", ""]
    for name, s in result["steps"].items():
        oracle = f", {ORACLE_GIVENS}" if s.get("givens") == "gold" else ""
        lines += [f"- **{name}** ({'done' if s['done'] else 'not done'}{oracle}): `{s['command']}`"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- command line

USAGE = """usage: pcr-ray reproduce [key=value ...]

""" + __doc__.split("\n\n")[1] + """

e.g.  pcr-ray reproduce                                           # CPU scale, 60 min on 2 cores
      pcr-ray reproduce dry_run=true                              # print the steps
      pcr-ray reproduce steps=[table,givens]                      # only these steps
      pcr-ray reproduce scale=paper out=/mnt/shared/repro         # the GPU cluster"""


def options(cfg: Mapping[str, Any]) -> Options:
    """The run's options: the checked config with its defaults resolved (the run folder, paper-scale checkpoints);
    ConfigError for an unknown scale or a negative problem count."""
    opts = Options(**to_plain(cfg))
    if opts.scale not in SCALES:
        raise ConfigError(f"scale must be one of {sorted(SCALES)}, got {opts.scale!r}")
    if opts.problems < 0:
        raise ConfigError(f"problems must be >= 0, got {opts.problems}")
    if opts.out is None:
        opts.out = str(runs_dir() / "reproduce" / opts.scale)
    if opts.scale == "paper":
        for kind in ("csp", "random"):
            if getattr(opts, f"checkpoint_{kind}") is None:
                setattr(opts, f"checkpoint_{kind}", str(cache_dir() / "prm" / f"deberta_{kind}"))
    return opts


def _overrides() -> list[str]:
    """The command line's overrides (for the report's command), when run as the Hydra app."""
    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def run(cfg: DictConfig) -> int:
    """`pcr-ray reproduce`: run the steps (or print them), then write the report."""
    args = options(cfg)
    out = Path(args.out).expanduser().resolve()
    steps = recipe(args)
    wanted = list(args.steps)
    unknown = sorted(set(wanted) - {s.name for s in steps})
    if unknown:
        raise ConfigError(f"unknown step(s) {unknown}; the steps are {[s.name for s in steps]}")
    rc = 0
    if not args.report_only:
        rc = run_recipe([s for s in steps if not wanted or s.name in wanted], dry_run=args.dry_run,
                        label="reproduce")
    if args.dry_run:
        return rc
    out.mkdir(parents=True, exist_ok=True)
    report(out, steps, args, [o for o in _overrides() if not o.startswith("report_only=")])
    print(f"reproduce: {out / 'reproduction.md'}")
    return rc


main = hydra_command("reproduce", "reproduce", run, USAGE)


if __name__ == "__main__":
    sys.exit(main())
