"""The one way pcr_ray connects to Ray: join a cluster (`address` or RAY_ADDRESS) or start a local Ray."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from pcr_ray.ray_hooks import LOCAL_WORKER_SETUP_HOOK

# environment passed on to every worker when set in the driver: behaviour (offline hubs, tokenizer threads) ...
PASSED_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM")
# ... and, to the workers of a local Ray only, locations: on a cluster each node's own environment names its
# data, cache and run folders (the cluster image or `ray start`'s environment), which may differ from the driver's
LOCAL_ENV = ("PCR_RAY_DATA", "PCR_RAY_CACHE", "PCR_RAY_CONF", "PCR_RAY_RUNS", "HF_HOME")
# set on every worker unless the driver says otherwise: fork-safe tokenizers, OpenMP threads that sleep when idle
WORKER_ENV = {"TOKENIZERS_PARALLELISM": "false", "OMP_WAIT_POLICY": "PASSIVE"}
# set for a local Ray unless the environment says otherwise: Ray Data's parquet reads start 32 footer-reading actors
# per read (sized for object storage on a cluster), each a worker process started and killed; Ray's log monitor
# lists the log folder every 0.1 s while it holds under 1,000 files (2-4% of a core once a few hundred workers have
# run), once a second here: a new worker's output reaches the driver within a second; and no metrics are collected
# (a local Ray runs no dashboard to show them; collecting them costs each node's agent about 1% of a core)
LOCAL_RAY_ENV = {"RAY_DATA_PARQUET_FOOTER_NUM_ACTORS": "1", "RAY_LOG_MONITOR_MANY_FILES_THRESHOLD": "0",
                 "LOG_NAME_UPDATE_INTERVAL_S": "1", "RAY_enable_metrics_collection": "0"}

_started_here = False


def init_ray(rcfg: Mapping[str, Any] | None = None) -> str | None:
    """Connect to Ray: reuse an initialized one; `address` (or RAY_ADDRESS) joins a cluster; else start locally.

    `rcfg` is a `ray:` config block (address, namespace, num_cpus, num_gpus, env_vars, log_to_driver).
    Returns the namespace that named actors live in.
    """
    global _started_here
    import ray  # heavy: ray

    if ray.is_initialized():
        return ray.get_runtime_context().namespace
    rcfg = dict(rcfg or {})
    address = rcfg.get("address") or os.environ.get("RAY_ADDRESS")
    ns = rcfg.get("namespace") or None
    passed = PASSED_ENV if address else PASSED_ENV + LOCAL_ENV
    env_vars = {**WORKER_ENV, **{k: os.environ[k] for k in passed if k in os.environ}}
    env_vars.update({str(k): str(v) for k, v in (rcfg.get("env_vars") or {}).items()})
    runtime_env: dict[str, Any] = {"env_vars": without_job_keys(env_vars)}
    log_to_driver = bool(rcfg.get("log_to_driver", True))
    if address:
        ray.init(address=str(address), namespace=ns, runtime_env=runtime_env, log_to_driver=log_to_driver)
    else:  # no dashboard, hence no State API: the hook quiets what polls it (pcr_ray/ray_hooks.py)
        set_local_ray_env()  # before ray.init: the local Ray's processes inherit this environment
        runtime_env["worker_process_setup_hook"] = LOCAL_WORKER_SETUP_HOOK
        # address="local": a new Ray of this process's own, never a `ray start` cluster that happens to run here
        ray.init(address="local", num_cpus=rcfg.get("num_cpus") or None, num_gpus=rcfg.get("num_gpus"),
                 include_dashboard=False,
                 namespace=ns, runtime_env=runtime_env, log_to_driver=log_to_driver, configure_logging=False)
        _started_here = True
    return ray.get_runtime_context().namespace


def set_local_ray_env() -> None:
    """LOCAL_RAY_ENV into this process's environment where unset: a local Ray's processes inherit it."""
    for key, value in LOCAL_RAY_ENV.items():
        os.environ.setdefault(key, value)


def job_runtime_env() -> dict[str, Any]:
    """The runtime env of the `ray job submit` (or KubeRay RayJob) that started this driver; {} outside a job."""
    raw = os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR")  # the job's config, set by Ray's job manager
    return dict((json.loads(raw) or {}).get("runtime_env") or {}) if raw else {}


def without_job_keys(env_vars: Mapping[str, str]) -> dict[str, str]:
    """env_vars less the keys the job's own runtime env sets: Ray refuses to merge a job's and a driver's runtime
    env that name the same variable (`Failed to merge the Job's runtime env`). The job's value already holds in
    this driver and on every worker, so it wins."""
    taken = set(job_runtime_env().get("env_vars") or {})
    return {k: v for k, v in env_vars.items() if k not in taken}


def started_here() -> bool:
    """Whether this process started the local Ray it is connected to (and so should shut it down)."""
    return _started_here


def shutdown_ray() -> None:
    """Shut down the local Ray this process started (no-op when it joined one)."""
    global _started_here
    if _started_here:
        import ray  # heavy: ray

        from pcr_ray.pipeline.actors import release_all  # heavy: ray

        release_all()
        ray.shutdown()
        _started_here = False
