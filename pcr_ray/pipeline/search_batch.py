"""One batch of work items through the evaluation, Ray-free: givens, each method's search or baseline (a problem
whose run raises is retried alone), grades.

The pipeline's search workers (pipeline/evaluate_pipeline.py) run every Ray Data batch through BatchRunner over
the model actors; benchmarks/bench_one_backbone.py runs its batches through the same BatchRunner over models
built in its own process, so retries, `grading.mode`, `pipeline.givens` and `method_overrides` are one code.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pcr_ray import baselines
from pcr_ray.baselines import BASELINES
from pcr_ray.generators.base import build_generator
from pcr_ray.pipeline.records import error_record, exc_text, grade_row, search_problem, search_record, with_givens
from pcr_ray.search import SearchConfig, run_search
from pcr_ray.search.strategy import STRATEGIES

# ---------------------------------------------------------------- method specs

@dataclass(frozen=True)
class MethodSpec:
    """One column of the comparison: a label, the method it runs, the generator and PRM keys, search overrides."""

    label: str
    method: str
    generator: str = "default"
    overrides: Mapping[str, Any] = field(default_factory=dict)
    prm: str = "default"

    @property
    def is_baseline(self) -> bool:
        return self.method in BASELINES

    @property
    def uses_prm(self) -> bool:
        """Whether the method scores with a PRM (a search strategy registered with uses_prm; no baseline does)."""
        return not self.is_baseline and STRATEGIES.get(self.method).uses_prm


def parse_methods(methods: Sequence[Any], method_generators: Mapping[str, str] | None = None,
                  method_overrides: Mapping[str, Mapping[str, Any]] | None = None,
                  method_prms: Mapping[str, str] | None = None) -> list[MethodSpec]:
    """Method specs from config: 'nsprm', 'nsprm@llm' (generator key), or {label, method, generator, prm,
    overrides}; `method_prms` maps a method or label to a PRM key (default: 'default', the `prm` group)."""
    gens = dict(method_generators or {})
    prms = dict(method_prms or {})
    ovs = dict(method_overrides or {})
    out: list[MethodSpec] = []
    for m in methods:
        if isinstance(m, Mapping):
            method = str(m["method"])
            label = str(m.get("label") or method)
            gen = str(m.get("generator") or gens.get(label) or gens.get(method) or "default")
            over = dict(m.get("overrides") or {})
            prm = str(m.get("prm") or prms.get(label) or prms.get(method) or "default")
        else:
            label = str(m)
            method, _, gen = label.partition("@")
            gen = gen or gens.get(label) or gens.get(method) or "default"
            over = {}
            prm = str(prms.get(label) or prms.get(method) or "default")
        over = {**dict(ovs.get(method, {}) or {}), **dict(ovs.get(label, {}) or {}), **over}
        if method not in STRATEGIES and method not in BASELINES:
            raise ValueError(f"unknown method {method!r} in `methods`; known: "
                             f"{', '.join(STRATEGIES.names() + BASELINES.names())}")
        out.append(MethodSpec(label, method, gen, over, prm))
    labels = [s.label for s in out]
    if len(set(labels)) != len(labels):
        raise ValueError(f"duplicate method labels in `methods`: {labels}")
    return out


def search_config_for(spec: MethodSpec, source: str, search: Mapping[str, Any],
                      source_overrides: Mapping[str, Mapping[str, Any]] | None = None) -> SearchConfig:
    """The SearchConfig of a method on a problem source: `search`, then the source's options
    (`search_source_overrides`), then the method's (`method_overrides`: they win), then the method itself."""
    over = dict((source_overrides or {}).get(source) or {})
    try:
        return SearchConfig.from_dict({**dict(search), **over, **dict(spec.overrides), "method": spec.method})
    except (TypeError, ValueError) as exc:
        where = f"search_source_overrides.{source} / " if over else ""
        raise ValueError(f"search options of method {spec.label!r} on source {source!r} "
                         f"({where}method_overrides): {exc}") from None


def check_search_configs(specs: Sequence[MethodSpec], search: Mapping[str, Any],
                         source_overrides: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Build every (method, overridden source) SearchConfig once, so that a typo fails before Ray starts."""
    for spec in specs:
        if spec.is_baseline:
            continue
        for source in ["", *sorted(source_overrides or {})]:
            search_config_for(spec, source, search, source_overrides)


def worker_spec(cfg: Mapping[str, Any], specs: Sequence[MethodSpec]) -> dict[str, Any]:
    """What a search worker runs, from a composed evaluate config (plain dict), less its models and the givens
    mode (`fused_givens`, set where the stages are laid out): the methods, the search settings and their
    per-source overrides, the baselines' options, problem attempts, the grading mode, the fault hooks."""
    pcfg = cfg["pipeline"]
    return {"methods": list(specs), "search": dict(cfg["search"]), "grading": str(cfg["grading"]["mode"]),
            "baselines": dict(cfg.get("baselines") or {}), "faults": dict(pcfg.get("faults") or {}),
            "source_overrides": dict(cfg.get("generator_source_overrides") or {}),
            "search_source_overrides": dict(cfg.get("search_source_overrides") or {}),
            "problem_attempts": pcfg["problem_attempts"]}


def work_items(problems: Iterable[Any], specs: Sequence[MethodSpec], done: set[tuple[str, str]] = frozenset()
               ) -> list[dict[str, Any]]:
    """One row per (problem, method) not yet done: the problem's fields plus `method` (the label).

    Method-major order, so a batch holds problems of one method and searches them lock-step (batched calls).
    """
    rows = [p.to_dict() if hasattr(p, "to_dict") else dict(p) for p in problems]
    return [{**row, "method": s.label} for s in specs for row in rows if (row["id"], s.label) not in done]


def baseline_records(spec: MethodSpec, group: list[dict[str, Any]], generator: Any,
                     cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A registered baseline (pcr_ray.baselines: direct, pyexec, ...) on a group of work items: their rows."""
    problems = [search_problem(r) for r in group]
    results = baselines.run_baseline(spec.method, problems, generator, {**dict(cfg), **dict(spec.overrides)})
    return [search_record(r, res) for r, res in zip(group, results, strict=True)]


def generator_label(key: str, cfg: Mapping[str, Any] | None) -> str:
    """'key:kind' of a configured generator (e.g. 'default:enumerate', 'llm:llamacpp'), as result rows name it."""
    return f"{key}:{(cfg or {}).get('kind', '?')}"


# ---------------------------------------------------------------- one batch

class BatchRunner:
    """Runs batches of work items (rows of `work_items`) over connected models: what one search worker does.

    `spec` is the pipeline's worker spec (methods, search, search_source_overrides, baselines,
    problem_attempts, grading, faults, source_overrides, fused_givens: the `pipeline.givens` mode when givens
    and grades are done here, None when they are stages of their own). `generators` and `scorers` map a key
    to a connected generator or PRM scorer; `local_cfgs` holds the config of each generator built in this
    process (with a source's `generator_source_overrides` one is built per source); `labels` names each
    generator in the rows; `is_fatal` tells an exception that must fail the whole batch (a model actor gone
    for good) from one to retry problem by problem.
    """

    def __init__(self, spec: Mapping[str, Any], generators: Mapping[str, Any], scorers: Mapping[str, Any], *,
                 local_cfgs: Mapping[str, Mapping[str, Any]] | None = None,
                 labels: Mapping[str, str] | None = None, where: str = "",
                 is_fatal: Callable[[BaseException], bool] = lambda exc: False) -> None:
        self.generators = dict(generators)
        self.scorers = dict(scorers)
        self.local_cfgs = {k: dict(v) for k, v in (local_cfgs or {}).items()}
        self.labels = dict(labels or {})
        self.where = where
        self.is_fatal = is_fatal
        self.source_overrides = {str(k): dict(v or {}) for k, v in (spec.get("source_overrides") or {}).items()}
        self._by_source: dict[tuple[str, str], Any] = {}
        self.specs = {s.label: s for s in spec["methods"]}
        self.search_base = dict(spec["search"])
        self.search_source_overrides = {str(k): dict(v or {})
                                        for k, v in (spec.get("search_source_overrides") or {}).items()}
        self.baseline_cfg = dict(spec.get("baselines") or {})
        self.attempts = max(1, int(spec["problem_attempts"]))
        self.grading = str(spec.get("grading", "default"))
        self.faults = dict(spec.get("faults") or {})
        self.fused_givens = spec.get("fused_givens")  # None: extract/grade run as their own stages

    def run(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The result rows of a batch: givens extracted and rows graded here when fused, each method searched."""
        items = [dict(r) for r in rows]
        if self.fused_givens is not None:
            items = [with_givens(r, str(self.fused_givens)) for r in items]
        out = self.search(items)
        return [grade_row(r, self.grading) for r in out] if self.fused_givens is not None else out

    def search(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Ungraded result rows of work items whose givens were extracted (a failed extraction is an error row)."""
        out: list[dict[str, Any]] = []
        by_method: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            if r.get("extract_error"):
                out.append(error_record(r, r["extract_error"], attempts=1, worker=self.where))
            else:
                by_method.setdefault(str(r["method"]), []).append(dict(r))
        for label, group in by_method.items():
            out.extend(self._run_group(self.specs[label], group))
        return out

    def _generator(self, key: str, source: str) -> Any:
        """The generator `key`; an in-process one built with the source's overrides when the config has some."""
        if key not in self.generators:
            raise KeyError(f"a method asks for generator {key!r}, which is not configured")
        over = self.source_overrides.get(source)
        if not over or key not in self.local_cfgs:  # model actors serve every source as configured
            return self.generators[key]
        if (key, source) not in self._by_source:
            self._by_source[(key, source)] = build_generator({**self.local_cfgs[key], **over})
        return self._by_source[(key, source)]

    def _runner(self, spec: MethodSpec, source: str = "") -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
        gen = self._generator(spec.generator, source)
        if spec.is_baseline:
            return lambda group: baseline_records(spec, group, gen, self.baseline_cfg)

        cfg = search_config_for(spec, source, self.search_base, self.search_source_overrides)
        scorer = self.scorers.get(spec.prm) if cfg.uses_prm else None
        if cfg.uses_prm and scorer is None:
            raise KeyError(f"method {spec.label!r} needs PRM {spec.prm!r}, which is not configured")

        def run(group: list[dict[str, Any]]) -> list[dict[str, Any]]:
            results = run_search([search_problem(r) for r in group], gen, scorer, cfg)
            return [search_record(r, res) for r, res in zip(group, results, strict=True)]

        return run

    def _run_group(self, spec: MethodSpec, group: list[dict[str, Any]]) -> list[dict[str, Any]]:
        by_source: dict[str, list[dict[str, Any]]] = {}
        for r in group:
            by_source.setdefault(str(r.get("source") or ""), []).append(r)
        return [rec for source, part in by_source.items() for rec in self._run_part(spec, source, part)]

    def _run_part(self, spec: MethodSpec, source: str, group: list[dict[str, Any]]) -> list[dict[str, Any]]:
        t0 = time.perf_counter()
        try:
            runner = self._runner(spec, source)
        except Exception as exc:
            return [error_record(r, exc_text(exc), 1, self.where) for r in group]
        bad = str(self.faults.get("raise_for_problem") or "")
        if bad:  # test hook: searching this problem always raises
            inner = runner

            def runner(g: list[dict[str, Any]]) -> list[dict[str, Any]]:
                if any(str(r["id"]) == bad for r in g):
                    raise RuntimeError(f"injected fault for problem {bad}")
                return inner(g)
        try:
            recs = runner(group)
            for rec in recs:
                rec.setdefault("attempts", 1)
        except Exception as exc:
            if self.is_fatal(exc) and len(group) > 1:
                raise  # a model actor is gone for good: let Ray Data retry the whole batch
            first = exc_text(exc)
            recs = []
            for r in group:  # isolate the culprit: one problem at a time, a bounded number of attempts
                rec, err = None, first
                for attempt in range(2, self.attempts + 1):
                    try:
                        rec = runner([r])[0]
                        rec["attempts"] = attempt
                        break
                    except Exception as exc2:
                        err = exc_text(exc2)
                recs.append(rec if rec is not None else error_record(r, err, self.attempts, self.where))
        dt = time.perf_counter() - t0
        gen_label = self.labels.get(spec.generator, spec.generator)
        for rec in recs:
            rec["worker"] = self.where
            rec["generator"] = gen_label
            rec.setdefault("batch_time_s", dt)
        return recs
