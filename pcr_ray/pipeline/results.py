"""Result rows on disk: one parquet shard per completed batch, a merged results.parquet, and resume keys.

A row is one (problem, method). Shards are written atomically (temp file + rename) as batches finish, so a
crash never loses a completed batch and never leaves a half-written shard; a shard damaged anyway (a disk
that lost its tail) is detected on resume, moved aside, and its rows are run again. On merge, a (problem_id,
method) that appears more than once (a retried error, a resumed run) keeps its latest non-error row.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger(__name__)

SHARDS = "shards"
RESULTS_FILE = "results.parquet"
CORRUPT_SUFFIX = ".corrupt"

# The one schema every shard is written with (so shards always concatenate).
RESULT_SCHEMA = pa.schema([
    ("problem_id", pa.string()),
    ("source", pa.string()),
    ("method", pa.string()),
    ("generator", pa.string()),
    ("question", pa.string()),
    ("gold_answer", pa.string()),
    ("gold_value", pa.float64()),
    ("gold_unit", pa.string()),
    ("gold_steps", pa.int64()),
    ("gold_trace_json", pa.string()),    # the gold trace (JSON) or '' when the source has none
    ("horizon", pa.string()),            # long (gold trace of 5+ steps) | short | unknown (no gold trace)
    ("template_split", pa.string()),     # generated physics: heldout (unseen templates) | train (seen); '' otherwise
    ("answer", pa.string()),             # the answer as returned (text), '' when none
    ("answer_value", pa.float64()),
    ("answer_unit", pa.string()),
    ("answered", pa.bool_()),
    ("correct", pa.bool_()),
    ("grade_reason", pa.string()),       # why the grader said right or wrong
    ("flagged", pa.bool_()),             # the system signalled a problem (no answer, rejected trace, error)
    ("silent_failure", pa.bool_()),      # answered, wrong, not flagged
    ("stop_reason", pa.string()),
    ("error_type", pa.string()),         # one of metrics.ERROR_TYPES (unit, formula_misuse, assumption, ...)
    ("error_detail", pa.string()),
    ("error", pa.string()),              # pipeline error (exception text) or '' when the problem ran
    ("raw_output", pa.string()),         # baselines: the model's last output (answer text or program)
    ("trace_json", pa.string()),         # the final trace (JSON) or ''
    ("givens_json", pa.string()),        # the givens the search started from (JSON list)
    ("givens_source", pa.string()),      # where they came from: extract (the text) | gold (oracle givens)
    ("extract_failed", pa.string()),     # what extraction did not find (records.extract_failures, '; '-joined)
    ("step_verdicts", pa.string()),      # JSON list, one verdict string per step ('ok' or a diagnostic code)
    ("step_scores", pa.string()),        # JSON list, one PRM score (or null) per step
    ("n_steps", pa.int64()),
    ("candidates", pa.int64()),
    ("verifier_rejections", pa.int64()),
    ("prm_calls", pa.int64()),
    ("generator_calls", pa.int64()),
    ("prompt_tokens", pa.int64()),       # generator prompt tokens (0: the enumerator has none)
    ("output_tokens", pa.int64()),       # generator output tokens
    ("prm_tokens", pa.int64()),          # tokens the PRM encoded for this problem's (context, step) pairs
    ("time_s", pa.float64()),            # compute seconds attributed to the problem (its share of batched calls)
    ("attempts", pa.int64()),
    ("worker", pa.string()),
    ("extra_json", pa.string()),         # anything else the search reported
    ("run_id", pa.string()),
    ("written_at", pa.float64()),
])

_DEFAULTS: dict[pa.DataType, Any] = {
    pa.string(): "", pa.bool_(): False, pa.int64(): 0, pa.float64(): None,
}
_NULLABLE = {"gold_value", "answer_value", "gold_steps", "time_s", "written_at"}
# columns added to the schema since runs were first written: a shard without one reads with its default
ADDED_COLUMNS = ("extract_failed",)


def _coerce(name: str, typ: pa.DataType, value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None if name in _NULLABLE else _DEFAULTS.get(typ)
    if typ == pa.string():
        if isinstance(value, (dict, list, tuple)):
            return json.dumps(value, default=str)
        return str(value)
    if typ == pa.bool_():
        return bool(value)
    if typ == pa.int64():
        try:
            return int(value)
        except (TypeError, ValueError):
            return None if name in _NULLABLE else 0
    if typ == pa.float64():
        try:
            f = float(value)
        except (TypeError, ValueError):
            return None
        return f if math.isfinite(f) else None
    return value


def normalize_record(rec: Mapping[str, Any]) -> dict[str, Any]:
    """A row with exactly the schema's columns; unknown keys go into extra_json."""
    out: dict[str, Any] = {}
    for field in RESULT_SCHEMA:
        out[field.name] = _coerce(field.name, field.type, rec.get(field.name))
    extra = {k: v for k, v in rec.items() if k not in RESULT_SCHEMA.names}
    if extra:
        prev = json.loads(out["extra_json"]) if out["extra_json"] else {}
        prev.update(extra)
        out["extra_json"] = json.dumps(prev, default=str)
    return out


def records_to_table(records: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Normalized rows as a pyarrow Table with RESULT_SCHEMA."""
    rows = [normalize_record(r) for r in records]
    return pa.Table.from_pylist(rows, schema=RESULT_SCHEMA)


class ShardWriter:
    """Writes batches of rows as numbered parquet shards under run_dir/shards, atomically."""

    def __init__(self, run_dir: str | Path, run_id: str | None = None) -> None:
        self.dir = Path(run_dir) / SHARDS
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run_id = run_id or uuid.uuid4().hex[:8]
        for stale in self.dir.glob("part-*.parquet.tmp"):  # a write cut short by a kill: never a shard
            stale.unlink(missing_ok=True)
        self._seq = len(list(self.dir.glob("part-*.parquet")))
        self.rows_written = 0

    def write(self, records: list[Mapping[str, Any]]) -> Path | None:
        """Write one shard (nothing when `records` is empty); returns its path."""
        if not records:
            return None
        now = time.time()
        table = records_to_table([{**r, "run_id": self.run_id, "written_at": now} for r in records])
        while True:
            path = self.dir / f"part-{self._seq:06d}-{self.run_id}.parquet"
            self._seq += 1
            if not path.exists():
                break
        tmp = path.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        self.rows_written += table.num_rows
        return path


def shard_paths(run_dir: str | Path) -> list[Path]:
    """Completed shards in write order (temp files of an interrupted write are ignored)."""
    d = Path(run_dir) / SHARDS
    return sorted(d.glob("part-*.parquet")) if d.is_dir() else []


def _with_added_columns(table: pa.Table) -> pa.Table:
    """A shard written before ADDED_COLUMNS were in the schema, with each at its default."""
    for name in ADDED_COLUMNS:
        if name not in table.column_names:
            typ = RESULT_SCHEMA.field(name).type
            table = table.append_column(name, pa.array([_DEFAULTS.get(typ)] * len(table), typ))
    return table


def read_shards(run_dir: str | Path, *, set_aside: bool = False) -> pa.Table:
    """Every row of every shard (duplicates included), in write order; an empty table when none.

    An unreadable shard (cut short, not parquet, wrong columns) is skipped with a one-line warning; with
    `set_aside` (resume) it is renamed to *.parquet.corrupt, so its rows count as not done and run again.
    """
    tables = []
    for p in shard_paths(run_dir):
        try:
            tables.append(_with_added_columns(pq.read_table(p)).select(RESULT_SCHEMA.names).cast(RESULT_SCHEMA))
        except Exception as exc:  # any damage (ArrowInvalid, OSError, KeyError: missing columns) skips the shard
            why = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"
            if set_aside:
                dest = p.with_name(p.name + CORRUPT_SUFFIX)
                os.replace(p, dest)
                log.warning("[results] shard %s is unreadable (%s); moved aside to %s, its rows run again",
                            p.name, why, dest.name)
            else:
                log.warning("[results] skipping unreadable shard %s (%s)", p.name, why)
    return pa.concat_tables(tables) if tables else RESULT_SCHEMA.empty_table()


def dedupe(table: pa.Table) -> pa.Table:
    """One row per (problem_id, method): the latest row without a pipeline error, else the latest row."""
    rows = table.to_pylist()
    best: dict[tuple[str, str], int] = {}
    for i, r in enumerate(rows):
        key = (r["problem_id"], r["method"])
        j = best.get(key)
        if j is None or not r["error"] or rows[j]["error"]:
            best[key] = i
    keep = sorted(best.values())
    return table.take(pa.array(keep, type=pa.int64())) if len(keep) != len(rows) else table


def completed_keys(run_dir: str | Path, retry_errors: bool = True) -> set[tuple[str, str]]:
    """(problem_id, method) pairs already done; with retry_errors, rows that ended in a pipeline error are not done.

    Unreadable shards are moved aside (read_shards(set_aside=True)): their rows are not done.
    """
    t = read_shards(run_dir, set_aside=True)
    done: set[tuple[str, str]] = set()
    for pid, method, err in zip(t.column("problem_id").to_pylist(), t.column("method").to_pylist(),
                                t.column("error").to_pylist(), strict=True):
        if retry_errors and err:
            continue
        done.add((pid, method))
    return done


def merge(run_dir: str | Path) -> Path:
    """Write run_dir/results.parquet from the shards (deduplicated); returns its path."""
    table = dedupe(read_shards(run_dir))
    path = Path(run_dir) / RESULTS_FILE
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path


def read_results(path: str | Path) -> pa.Table:
    """results.parquet of a run (a run folder or the file itself)."""
    p = Path(path)
    if p.is_dir():
        p = p / RESULTS_FILE
    return pq.read_table(p)
