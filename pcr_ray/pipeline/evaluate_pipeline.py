"""The Ray Data evaluation pipeline: problems x methods -> givens -> search workers -> grade -> parquet shards.

    from_items(work items) -> map_batches(extract_givens, CPU task)
                           -> map_batches(SearchWorker, ActorPoolStrategy(size=n))   # calls model actors
                           -> map_batches(grade_batch, CPU task)
                           -> driver: iter_batches -> one parquet shard per batch, progress bar

The work of one batch (givens, each method's search or baseline, retries, grades) is BatchRunner's
(pcr_ray/pipeline/search_batch.py, Ray-free). With `pipeline.fuse_light_stages` (the default) givens and
grades run inside the SearchWorker call, on the batch it was given: the same functions, but no task stages,
worker processes or object transfers of their own, which on a small machine take CPU from the search workers.
Turn it off when extraction is heavy and should scale on its own (e.g. an LLM extractor on other nodes).

Fault tolerance: a search worker that dies is restarted by Ray Data (always) and its batch retried
(pipeline.worker_max_task_retries times); model actors restart by their own options; an exception inside a
search is retried problem by problem, then recorded as an error row; if the dataset itself fails, the driver
reruns what is left in smaller batches (`pipeline.rounds`), and whatever still fails becomes error rows.
Completed shards are never rewritten, and a rerun with the same run directory skips (problem_id, method) rows
already done.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import ray
import ray.data
from tqdm import tqdm

from pcr_ray.pipeline import actors as act
from pcr_ray.pipeline.records import error_record, exc_text, grade_row, with_givens
from pcr_ray.pipeline.results import ShardWriter, completed_keys
from pcr_ray.pipeline.search_batch import BatchRunner, MethodSpec, generator_label, work_items

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- stage 1: extract givens (CPU task)

def extract_givens(batch: pd.DataFrame, givens_mode: str) -> pd.DataFrame:
    """Adds sp_givens (JSON list), sp_target_unit, givens_source, extract_failed and extract_error to each row
    (with_givens)."""
    if batch.empty:
        return batch.assign(sp_givens=[], sp_target_unit=[], givens_source=[], extract_failed=[], extract_error=[])
    return pd.DataFrame([with_givens(row, givens_mode) for row in batch.to_dict("records")])


# ---------------------------------------------------------------- stage 2: search workers (actor pool)

class SearchWorker:
    """A Ray Data actor: connects to the model actors once, then runs each batch through a
    search_batch.BatchRunner (givens and grades too when fused)."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        spec = dict(spec)
        refs = dict(spec["generators"])
        self.faults = dict(spec.get("faults") or {})
        self.runner = BatchRunner(
            spec, {k: act.connect(ref) for k, ref in refs.items()},
            {k: act.connect(ref) for k, ref in (spec.get("prms") or {}).items()},
            local_cfgs={k: ref.local_cfg for k, ref in refs.items() if ref.local_cfg is not None},
            labels={k: generator_label(k, ref.local_cfg or _identity(ref)) for k, ref in refs.items()},
            where=f"{socket.gethostname()}:{os.getpid()}", is_fatal=_is_ray_system_error)

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        act.maybe_inject_fault("search_worker", self.faults)
        rows = batch.to_dict("records")
        doomed = str(self.faults.get("exit_for_problem") or "")
        if doomed and any(str(r["id"]) == doomed for r in rows):
            os._exit(18)  # test hook: this problem kills its worker every time
        return pd.DataFrame(self.runner.run(rows))


def _identity(ref: act.ActorRef) -> Mapping[str, Any]:
    """The identity a remote generator actor reported when it started (its `kind` names it in the rows)."""
    ident = ref.info.get("identity")
    return ident if isinstance(ident, Mapping) else {}


def _is_ray_system_error(exc: BaseException) -> bool:
    return isinstance(exc, (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError))


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
    # A batch whose worker keeps dying (after max_task_retries) must not abort the other
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
        # Bounded retries need max_task_retries, which Ray 2.60 only takes as a (deprecated) ray_remote_arg; its
        # default (-1) would retry a batch that always kills its worker forever.
        warnings.simplefilter("ignore", category=DeprecationWarning)
        ds = ds.map_batches(
            SearchWorker, fn_constructor_kwargs={"spec": spec}, batch_format="pandas", batch_size=batch_size,
            compute=ray.data.ActorPoolStrategy(
                size=n_workers, max_tasks_in_flight_per_actor=max(1, int(pcfg["worker_tasks_in_flight"]))),
            num_cpus=float(pcfg["worker_num_cpus"]),
            # restarted without end, as Ray Data's actor pool expects: a worker dead for good would still be sent a
            # batch before the pool noticed, and that batch would fail with it
            max_restarts=-1,
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
                    msg = (f"round {rnd + 1}: {len(todo)} rows not returned (their batches failed "
                           f"{int(pcfg['worker_max_task_retries']) + 1} times)")
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
