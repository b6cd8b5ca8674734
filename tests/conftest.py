"""Shared fixtures: one local Ray per test session, the data folder, and markers for optional parts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

REPO = Path(__file__).resolve().parent.parent
# This repository's tests read the data sets laid beside the checkout and keep their cache inside it.
os.environ.setdefault("PCR_RAY_DATA", str(REPO.parent / "shared" / "data"))
os.environ.setdefault("PCR_RAY_CACHE", str(REPO / ".cache"))


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole test session (num_cpus=2, dashboard off); shut down at the end."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}})
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    from pcr_ray.paths import data_dir as _data_dir

    d = _data_dir()
    if not (d / "gsm8k" / "test.jsonl").exists():
        pytest.skip(f"data sets not found in {d} (set PCR_RAY_DATA)")
    return d
