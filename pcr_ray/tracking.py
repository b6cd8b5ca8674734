"""Experiment tracking: a job's config, metrics, loss curves and artifacts logged to MLflow (`tracking=mlflow`).

`tracked(tracking_cfg, command, config, folder)` is a context manager around one job of `evaluate`, `train-prm` or
`sft`: with `kind: none` (the default) it yields a `Tracker` whose methods do nothing and MLflow is never
imported; with `kind: mlflow` it opens an MLflow run, logs the composed config as params, and yields an
`MLflowTracker` the job logs its metrics, curves, tables and files through. The run ends FINISHED, or FAILED when
the job raises. In a Hydra sweep (`-m`) every job's run is a child of one parent run per sweep folder.

Everything is logged from the driver through `MlflowClient` (no global active run): Ray Train workers report to
the driver, which logs their curves after the fit, so a local SQLite store needs no network.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf.errors import MissingMandatoryValue

MAX_PARAM_CHARS = 6000  # MLflow's limit on a param's value
MAX_KEY_CHARS = 250  # and on a param's or metric's name
SWEEP_TAG = "pcr_ray.sweep"  # a sweep's parent run: the sweep folder
COMMAND_TAG = "pcr_ray.command"


def metric_key(name: str) -> str:
    """`name` as a valid MLflow param or metric name: characters other than letters, digits, `_ - . / :` and
    spaces become `_`, empty or dot-only path parts are dropped (MLflow refuses names a path would normalize)."""
    parts = [re.sub(r"[^\w.\- :]", "_", p) for p in str(name).split("/")]
    parts = [p if p.strip(".") else p.replace(".", "_") for p in parts if p]
    return "/".join(parts)[:MAX_KEY_CHARS] or "_"


def flatten_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested config as MLflow params: dotted keys (`search.beam_width`), lists and scalars as JSON text, values
    cut to MLflow's limit; an empty mapping is kept as `{}` so every key of the config appears."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten_params(value, f"{name}."))
            continue
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        out[metric_key(name)] = text if len(text) <= MAX_PARAM_CHARS else text[: MAX_PARAM_CHARS - 3] + "..."
    return out


def numeric_leaves(tree: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The finite numbers of a nested mapping as `a/b/c` metrics; a two-number list under a `*ci95` key becomes
    `<key>_low` and `<key>_high`; booleans, text and other lists are left out."""
    out: dict[str, float] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(numeric_leaves(value, f"{name}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(value):
                out[metric_key(name)] = float(value)
        elif str(key).endswith("ci95") and isinstance(value, (list, tuple)) and len(value) == 2:
            for end, v in zip(("low", "high"), value, strict=True):
                if isinstance(v, (int, float)) and math.isfinite(v):
                    out[metric_key(f"{name}_{end}")] = float(v)
    return out


RUN_METRICS = ("n_problems", "n_rows", "wall_s", "pipeline_s", "rows_this_run", "rows_resumed", "problems_per_s")


def evaluation_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """metrics.json as MLflow metrics: per method (`nsprm/acc`, `nsprm/acc_ci95_low`, `nsprm/total_prm_calls`,
    `nsprm/by_source/gsm8k/acc`, ...), per paired comparison (`paired/nsprm vs prm_only/mcnemar_p`) and the run's
    counts and times (`wall_s`, `problems_per_s`)."""
    out = numeric_leaves({k: metrics[k] for k in RUN_METRICS if k in metrics})
    out.update(numeric_leaves(metrics.get("methods") or {}))
    out.update(numeric_leaves(metrics.get("paired") or {}, "paired/"))
    return out


class Tracker:
    """Where a job logs what it measured; this base logs nothing (`tracking.kind: none`)."""

    run_id: str | None = None

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Log numbers (at `step`, for a curve)."""

    def log_curve(self, name: str, values: Sequence[float], steps: Sequence[int] | None = None) -> None:
        """Log one metric's values in order, at `steps` (default 1, 2, ...)."""

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """Copy a file (or a folder's files) into the run's artifacts; a missing path is skipped."""

    def log_table(self, rows: Sequence[Mapping[str, Any]], name: str) -> None:
        """Log rows as a table artifact the MLflow UI filters and sorts."""


class MLflowTracker(Tracker):
    """One MLflow run, logged through `MlflowClient`."""

    def __init__(self, client: Any, run_id: str, parent_id: str | None = None) -> None:
        self.client, self.run_id, self.parent_id = client, run_id, parent_id

    def end(self, status: str) -> None:
        """Mark the run FINISHED or FAILED, and a sweep's parent run too (FAILED once any of its jobs failed)."""
        self.client.set_terminated(self.run_id, status)
        if self.parent_id and (status == "FAILED" or self.client.get_run(self.parent_id).info.status != "FAILED"):
            self.client.set_terminated(self.parent_id, status)

    def log_params(self, params: Mapping[str, str]) -> None:
        from mlflow.entities import Param  # heavy: mlflow

        self.client.log_batch(self.run_id, params=[Param(k, v) for k, v in params.items()])

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        from mlflow.entities import Metric  # heavy: mlflow

        now = int(time.time() * 1000)
        batch = [Metric(metric_key(k), float(v), now, int(step or 0)) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
        if batch:
            self.client.log_batch(self.run_id, metrics=batch)

    def log_curve(self, name: str, values: Sequence[float], steps: Sequence[int] | None = None) -> None:
        from mlflow.entities import Metric  # heavy: mlflow

        now = int(time.time() * 1000)
        steps = list(steps) if steps is not None else list(range(1, len(values) + 1))
        batch = [Metric(metric_key(name), float(v), now, int(s)) for s, v in zip(steps, values, strict=True)
                 if isinstance(v, (int, float)) and math.isfinite(v)]
        if batch:
            self.client.log_batch(self.run_id, metrics=batch)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        p = Path(path)
        if p.is_dir():
            self.client.log_artifacts(self.run_id, str(p), artifact_path)
        elif p.exists():
            self.client.log_artifact(self.run_id, str(p), artifact_path)

    def log_table(self, rows: Sequence[Mapping[str, Any]], name: str) -> None:
        import pandas as pd  # heavy: pandas

        self.client.log_table(self.run_id, pd.DataFrame(list(rows)), name)


def _sweep() -> tuple[Path, str] | None:
    """(the sweep folder, this job's overrides) when running as a job of a Hydra sweep, else None."""
    try:
        hc = HydraConfig.get()
    except ValueError:
        return None
    if hc.mode != RunMode.MULTIRUN:
        return None
    return Path(str(hc.sweep.dir)).expanduser().resolve(), str(hc.job.override_dirname or f"job {hc.job.num}")


def job_folder(fallback: str | Path) -> Path:
    """The job's folder: Hydra's output folder when running under Hydra, else `fallback` (also where a Hydra config
    is set without a run, as Hydra's compose API leaves it: no output folder)."""
    try:
        return Path(str(HydraConfig.get().runtime.output_dir))
    except (ValueError, MissingMandatoryValue):
        return Path(fallback)


def store_uri(tcfg: Mapping[str, Any], folder: Path) -> str:
    """The tracking URI: `tracking.uri`, else $MLFLOW_TRACKING_URI, else a SQLite file in `folder`."""
    return str(tcfg.get("uri") or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{folder / 'mlflow.db'}")


def _experiment_id(client: Any, name: str, uri: str, folder: Path) -> str:
    """The experiment's id, created when missing; a local SQLite store keeps its artifacts beside it."""
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return str(exp.experiment_id)
    location = (folder / "mlartifacts").as_uri() if uri.startswith("sqlite:///") else None
    try:
        return str(client.create_experiment(name, artifact_location=location))
    except Exception:  # noqa: BLE001  (another job created it meanwhile)
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return str(exp.experiment_id)


def _parent_run(client: Any, experiment_id: str, sweep_dir: Path, command: str) -> str:
    """The sweep's parent run (tagged with its folder), started by its first job."""
    found = client.search_runs([experiment_id], filter_string=f"tags.`{SWEEP_TAG}` = '{sweep_dir}'",
                               max_results=1)
    if found:
        return str(found[0].info.run_id)
    run = client.create_run(experiment_id, run_name=f"{command} sweep {sweep_dir.name}",
                            tags={SWEEP_TAG: str(sweep_dir), COMMAND_TAG: command})
    return str(run.info.run_id)


def start_mlflow(tcfg: Mapping[str, Any], command: str, config: Mapping[str, Any], folder: Path) -> MLflowTracker:
    """An MLflow run for one job, its config logged as params (a sweep's job: a child of the sweep's run)."""
    try:
        from mlflow import MlflowClient  # heavy: mlflow
    except ImportError:
        raise RuntimeError("tracking=mlflow needs MLflow: pip install \".[tracking]\" in the checkout (mlflow-skinny, "
                           "sqlalchemy, alembic), or set tracking=none") from None
    sweep = _sweep()
    store = sweep[0] if sweep else folder
    store.mkdir(parents=True, exist_ok=True)
    uri = store_uri(tcfg, store)
    client = MlflowClient(tracking_uri=uri)
    exp_id = _experiment_id(client, str(tcfg.get("experiment") or "pcr_ray"), uri, store)
    tags = {COMMAND_TAG: command, "pcr_ray.folder": str(folder)}
    parent = _parent_run(client, exp_id, sweep[0], command) if sweep else None
    if parent:
        tags["mlflow.parentRunId"] = parent
    name = tcfg.get("run_name") or (f"{command} {sweep[1]}" if sweep else f"{command} {folder.name}")
    run = client.create_run(exp_id, run_name=str(name), tags=tags)
    tracker = MLflowTracker(client, str(run.info.run_id), parent)
    tracker.log_params(flatten_params(config))
    print(f"[tracking] MLflow run {tracker.run_id} ({uri}, experiment {tcfg.get('experiment')})", flush=True)
    return tracker


@contextmanager
def tracked(tcfg: Mapping[str, Any] | None, command: str, config: Mapping[str, Any], folder: str | Path
            ) -> Iterator[Tracker]:
    """One job's tracking run (see the module's docstring); `folder` is the job's run folder (the default store's
    place outside a sweep)."""
    kind = str((tcfg or {}).get("kind") or "none")
    if kind == "none":
        yield Tracker()
        return
    if kind != "mlflow":
        raise ValueError(f"tracking.kind must be none or mlflow, got {kind!r}")
    tracker = start_mlflow(dict(tcfg or {}), command, config, Path(folder).expanduser().resolve())
    try:
        yield tracker
    except BaseException:
        tracker.end("FAILED")
        raise
    tracker.end("FINISHED")
