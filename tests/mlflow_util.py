"""Reading MLflow runs back through MLflow's own client, for the tracking tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def client(db: Path) -> Any:
    """An MlflowClient on the SQLite store `db`."""
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{db}")


def runs(db: Path, experiment: str = "pcr_ray") -> list[Any]:
    """Every run of `experiment` in the store, oldest first."""
    c = client(db)
    exp = c.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment!r} in {db}"
    return sorted(c.search_runs([exp.experiment_id]), key=lambda r: r.info.start_time)


def artifacts(db: Path, run_id: str) -> set[str]:
    """The paths of a run's top-level artifacts."""
    return {a.path for a in client(db).list_artifacts(run_id)}


def curve(db: Path, run_id: str, key: str) -> list[tuple[int, float]]:
    """A metric's (step, value) history."""
    return [(m.step, m.value) for m in sorted(client(db).get_metric_history(run_id, key), key=lambda m: m.step)]
