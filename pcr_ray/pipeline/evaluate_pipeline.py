"""The Ray Data evaluation pipeline: problems x methods -> givens -> search workers -> grade -> parquet shards.

    from_items(work items) -> map_batches(extract_givens, CPU task)
                           -> map_batches(SearchWorker, ActorPoolStrategy(size=n))   # calls model actors
                           -> map_batches(grade_batch, CPU task)
                           -> driver: iter_batches -> one parquet shard per batch, progress bar

With `pipeline.fuse_light_stages` (the default) extract_givens and grade_batch run inside the SearchWorker
call, on the batch it was given: the same functions, but no task stages, worker processes or object
transfers of their own, which on a small machine take CPU from the search workers. Turn it off when
extraction is heavy and should scale on its own (e.g. an LLM extractor on other nodes).

Fault tolerance: search workers are restarted by Ray Data (max_restarts) and their batch retried
(max_task_retries); model actors restart by their own options; an exception inside a search is retried
problem by problem, then recorded as an error row; if the dataset itself fails, the driver reruns what is
left in smaller batches (`pipeline.rounds`), and whatever still fails becomes error rows. Completed shards
are never rewritten, and a rerun with the same run directory skips (problem_id, method) rows already done.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import ray
import ray.data
from tqdm import tqdm

from pcr_ray import baselines
from pcr_ray.baselines import BASELINES
from pcr_ray.generators.base import build_generator
from pcr_ray.pipeline import actors as act
from pcr_ray.pipeline.records import (
    error_record,
    exc_text,
    grade_row,
    search_problem,
    search_record,
    with_givens,
)
from pcr_ray.pipeline.results import ShardWriter, completed_keys
from pcr_ray.search import SearchConfig, run_search
from pcr_ray.search.strategy import STRATEGIES

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pcr_ray.search import SearchConfig


# ---------------------------------------------------------------- work items and method specs

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


def work_items(problems: Iterable[Any], specs: Sequence[MethodSpec], done: set[tuple[str, str]] = frozenset()
               ) -> list[dict[str, Any]]:
    """One row per (problem, method) not yet done: the problem's fields plus `method` (the label).

    Method-major order, so a batch holds problems of one method and searches them lock-step (batched calls).
    """
    rows = [p.to_dict() if hasattr(p, "to_dict") else dict(p) for p in problems]
    return [{**row, "method": s.label} for s in specs for row in rows if (row["id"], s.label) not in done]


# ---------------------------------------------------------------- stage 1: extract givens (CPU task)

def extract_givens(batch: pd.DataFrame, givens_mode: str) -> pd.DataFrame:
    """Adds sp_givens (JSON list), sp_target_unit, givens_source and extract_error to each row (with_givens)."""
    if batch.empty:
        return batch.assign(sp_givens=[], sp_target_unit=[], givens_source=[], extract_error=[])
    return pd.DataFrame([with_givens(row, givens_mode) for row in batch.to_dict("records")])


# ---------------------------------------------------------------- stage 2: search workers (actor pool)

class SearchWorker:
    """A Ray Data actor: connects to the model actors once, then runs lock-step search over each batch."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.spec = dict(spec)
        self.refs = dict(self.spec["generators"])
        self.generators = {k: act.connect(ref) for k, ref in self.refs.items()}
        self.source_overrides = {str(k): dict(v or {}) for k, v in (self.spec.get("source_overrides") or {}).items()}
        self._by_source: dict[tuple[str, str], Any] = {}
        self.scorers = {k: act.connect(ref) for k, ref in (self.spec.get("prms") or {}).items()}
        self.specs = {s.label: s for s in self.spec["methods"]}
        self.search_base = dict(self.spec["search"])
        self.search_source_overrides = {str(k): dict(v or {})
                                        for k, v in (self.spec.get("search_source_overrides") or {}).items()}
        self.baseline_cfg = dict(self.spec.get("baselines") or {})
        self.attempts = max(1, int(self.spec["problem_attempts"]))
        self.grading = str(self.spec.get("grading", "default"))
        self.faults = dict(self.spec.get("faults") or {})
        self.where = f"{socket.gethostname()}:{os.getpid()}"
        self.fused_givens = self.spec.get("fused_givens")  # None: extract/grade run as their own stages

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        act.maybe_inject_fault("search_worker", self.faults)
        if self.fused_givens is not None:
            batch = extract_givens(batch, str(self.fused_givens))
        out = self._search(batch)
        return grade_batch(out, self.grading) if self.fused_givens is not None else out

    def _search(self, batch: pd.DataFrame) -> pd.DataFrame:
        rows = batch.to_dict("records")
        doomed = str(self.faults.get("exit_for_problem") or "")
        if doomed and any(str(r["id"]) == doomed for r in rows):
            os._exit(18)  # test hook: this problem kills its worker every time
        out: list[dict[str, Any]] = []
        by_method: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            if r.get("extract_error"):
                out.append(error_record(r, r["extract_error"], attempts=1, worker=self.where))
            else:
                by_method.setdefault(str(r["method"]), []).append(r)
        for label, group in by_method.items():
            out.extend(self._run_group(self.specs[label], group))
        return pd.DataFrame(out)

    def _generator(self, key: str, source: str) -> Any:
        """The generator `key`; an in-worker one built with the source's overrides when the config has some."""
        ref = self.refs.get(key)
        if ref is None:
            raise KeyError(f"a method asks for generator {key!r}, which is not configured")
        over = self.source_overrides.get(source)
        if not over or ref.local_cfg is None:  # model actors serve every source as configured
            return self.generators[key]
        if (key, source) not in self._by_source:
            self._by_source[(key, source)] = build_generator({**dict(ref.local_cfg), **over})
        return self._by_source[(key, source)]

    def _runner(self, spec: MethodSpec, source: str = "") -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
        gen = self._generator(spec.generator, source)
        if spec.is_baseline:
            return lambda group: run_baseline(spec, group, gen, self.baseline_cfg)

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
            if _is_ray_system_error(exc) and len(group) > 1:
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
        gen_label = self._generator_label(spec.generator)
        for rec in recs:
            rec["worker"] = self.where
            rec["generator"] = gen_label
            rec.setdefault("batch_time_s", dt)
        return recs

    def _generator_label(self, key: str) -> str:
        """'key:kind' of a configured generator (e.g. 'default:enumerate', 'llm:llamacpp')."""
        ref = self.refs.get(key)
        if ref is None:
            return key
        cfg = ref.local_cfg or (ref.info.get("identity") if isinstance(ref.info.get("identity"), Mapping) else {})
        return f"{key}:{(cfg or {}).get('kind', '?')}"


def _is_ray_system_error(exc: BaseException) -> bool:
    return isinstance(exc, (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError))


def run_baseline(spec: MethodSpec, group: list[dict[str, Any]], generator: Any,
                 cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A registered baseline (pcr_ray.baselines: direct, pyexec, ...) on a group of work items."""
    problems = [search_problem(r) for r in group]
    results = baselines.run_baseline(spec.method, problems, generator, {**dict(cfg), **dict(spec.overrides)})
    return [search_record(r, res) for r, res in zip(group, results, strict=True)]


# ---------------------------------------------------------------- stage 3: grade (CPU task)

def grade_batch(batch: pd.DataFrame, mode: str = "default") -> pd.DataFrame:
    """correct / flagged / silent_failure / error_type per row (pcr_ray.grading for answer equivalence; `mode`:
    grading.mode)."""
    return pd.DataFrame([grade_row(r, mode) for r in batch.to_dict("records")])


# ---------------------------------------------------------------- driver

@dataclass
class PipelineStats:
    """What the driver saw: rows written, correct so far, elapsed seconds, rounds and dataset failures."""

    rows: int = 0
    correct: int = 0
    seconds: float = 0.0
    rounds: int = 0
    failures: list[str] = field(default_factory=list)
    shards: int = 0


def build_dataset(items: list[dict[str, Any]], spec: Mapping[str, Any], pcfg: Mapping[str, Any], batch_size: int
                  ) -> Any:
    """The Ray Dataset of the pipeline over these work items."""
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.execution_options.preserve_order = False
    # A batch whose worker keeps dying (after max_restarts / max_task_retries) must not abort the other
    # batches: it is skipped, its items stay pending, and the next round retries them in smaller batches.
    ctx.max_errored_blocks = int(pcfg["max_errored_blocks"])
    task_cpus = float(pcfg["task_num_cpus"])
    n_blocks = max(1, math.ceil(len(items) / max(1, batch_size)))
    n_workers = max(1, min(int(pcfg["num_search_workers"]), n_blocks))  # no idle workers on small runs
    ds = ray.data.from_items(items, override_num_blocks=n_blocks)
    fused = bool(pcfg["fuse_light_stages"])
    givens_mode = str(pcfg["givens"])
    spec = {**spec, "fused_givens": givens_mode if fused else None}
    # The light CPU stages ask for few logical CPUs, so the worker pool never starves them, and a bounded task
    # pool, so a zero-CPU request cannot fan out into one worker process per block.
    tasks = ray.data.TaskPoolStrategy(size=max(1, int(pcfg["task_concurrency"])))
    if not fused:
        ds = ds.map_batches(extract_givens, batch_format="pandas", batch_size=batch_size, num_cpus=task_cpus,
                            compute=tasks, fn_kwargs={"givens_mode": givens_mode})
    with warnings.catch_warnings():
        # Bounded restarts need max_restarts/max_task_retries, which Ray 2.60 only takes as (deprecated)
        # ray_remote_args; its defaults (-1, -1) would retry a batch that always kills its worker forever.
        warnings.simplefilter("ignore", category=DeprecationWarning)
        ds = ds.map_batches(
            SearchWorker, fn_constructor_kwargs={"spec": spec}, batch_format="pandas", batch_size=batch_size,
            compute=ray.data.ActorPoolStrategy(
                size=n_workers, max_tasks_in_flight_per_actor=max(1, int(pcfg["worker_tasks_in_flight"]))),
            num_cpus=float(pcfg["worker_num_cpus"]),
            max_restarts=int(pcfg["worker_max_restarts"]),
            max_task_retries=int(pcfg["worker_max_task_retries"]),
        )
    if not fused:
        ds = ds.map_batches(grade_batch, fn_kwargs={"mode": str(spec.get("grading", "default"))},
                            batch_format="pandas", batch_size=None, num_cpus=task_cpus, compute=tasks)
    return ds


def run_pipeline(items: list[dict[str, Any]], spec: Mapping[str, Any], pcfg: Mapping[str, Any], run_dir: Path,
                 *, progress: bool = True, run_id: str | None = None) -> PipelineStats:
    """Run every work item through the pipeline, writing shards as batches finish; returns the stats."""
    writer = ShardWriter(run_dir, run_id)
    stats = PipelineStats()
    t0 = time.perf_counter()
    n_methods = max(1, len(spec["methods"]))
    bar = None
    if progress:
        bar = tqdm(total=len(items), unit="row", desc="evaluate", dynamic_ncols=True, mininterval=1.0)
    rounds = max(1, int(pcfg["rounds"]))
    batch_size = max(1, int(pcfg["batch_size"]))
    pending = list(items)
    key = lambda it: (str(it["id"]), str(it["method"]))  # noqa: E731
    try:
        for rnd in range(rounds):
            if not pending:
                break
            stats.rounds += 1
            bs = batch_size if rnd == 0 else max(1, batch_size // (4 ** rnd))
            todo = {key(it) for it in pending}
            try:
                # Retry rounds isolate each batch (1 in flight): a batch queued behind one that kills its worker
                # would die with it again.
                ds = build_dataset(pending, spec, pcfg if rnd == 0 else {**pcfg, "worker_tasks_in_flight": 1}, bs)
                for batch in ds.iter_batches(batch_size=None, batch_format="pandas", prefetch_batches=0):
                    recs = [r for r in batch.to_dict("records") if (str(r["problem_id"]), str(r["method"])) in todo]
                    for r in recs:
                        todo.discard((str(r["problem_id"]), str(r["method"])))
                    if writer.write(recs):
                        stats.shards += 1
                    stats.rows += len(recs)
                    stats.correct += sum(bool(r.get("correct")) for r in recs)
                    if bar is not None:
                        el = time.perf_counter() - t0
                        bar.update(len(recs))
                        bar.set_postfix(problems=f"{stats.rows / n_methods:.1f}",
                                        acc=f"{stats.correct / max(1, stats.rows):.3f}",
                                        problems_s=f"{stats.rows / n_methods / max(el, 1e-9):.2f}")
            except Exception as exc:  # the dataset failed: keep what was written, rerun the rest smaller
                msg = f"round {rnd + 1}: {exc_text(exc)}"
                stats.failures.append(msg)
                log.warning("[pipeline] %s; %d rows left", msg, len(todo))
            else:
                if todo:  # batches that failed for good were skipped (max_errored_blocks)
                    msg = (f"round {rnd + 1}: {len(todo)} rows not returned (their batches failed after "
                           f"{int(pcfg.get('worker_max_restarts', 3))} worker restarts)")
                    stats.failures.append(msg)
                    log.warning("[pipeline] %s", msg)
            pending = [it for it in pending if key(it) in todo]
        if pending:
            reason = "failed in every round: " + (stats.failures[-1] if stats.failures else "no result returned")
            recs = [grade_row(error_record(it, reason, stats.rounds)) for it in pending]
            writer.write(recs)
            stats.rows += len(recs)
            if bar is not None:
                bar.update(len(recs))
    finally:
        if bar is not None:
            bar.close()
    stats.seconds = time.perf_counter() - t0
    return stats


def pending_items(problems: Sequence[Any], specs: Sequence[MethodSpec], run_dir: Path, resume: bool = True,
                  retry_errors: bool = True) -> tuple[list[dict[str, Any]], int]:
    """Work items still to do and how many were already done (resume)."""
    done = completed_keys(run_dir, retry_errors) if resume else set()
    items = work_items(problems, specs, done)
    return items, len(problems) * len(specs) - len(items)
