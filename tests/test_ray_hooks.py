"""The local Ray pcr_ray starts: its worker setup hook runs in tasks and in detached actors (Ray Train's cleaner),
and its environment keeps Ray Data from starting a pool of parquet footer readers per read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent("""
    import json
    import logging
    import os
    import ray
    from pcr_ray.pipeline.ray_runtime import LOCAL_RAY_ENV, init_ray
    from pcr_ray.ray_hooks import TRAIN_CLEANER_LOGGER

    init_ray({"num_cpus": 1})

    def level():
        return logging.getLogger(TRAIN_CLEANER_LOGGER).getEffectiveLevel()

    @ray.remote(num_cpus=0)
    class Detached:
        def level(self):
            return level()

    task = ray.get(ray.remote(num_cpus=0)(level).remote())
    actor = Detached.options(lifetime="detached", name="hook_probe").remote()
    print("levels", task, ray.get(actor.level.remote()), level())
    env = ray.get(ray.remote(num_cpus=0)(lambda: {k: os.environ.get(k) for k in LOCAL_RAY_ENV}).remote())
    print("local_env", json.dumps(env))
    ray.kill(actor)
    ray.shutdown()
""")


@pytest.mark.slow
def test_local_ray_workers_quiet_the_train_cleaner_but_not_the_driver() -> None:
    """A fresh local Ray (its own process: the test session's Ray is already up) from `init_ray`: its workers
    quiet one logger and see LOCAL_RAY_ENV (parquet footers read by one actor, not Ray Data's 32; a quieter log
    monitor)."""
    from pcr_ray.pipeline.ray_runtime import LOCAL_RAY_ENV

    env = {k: v for k, v in os.environ.items() if k not in LOCAL_RAY_ENV}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("levels"))
    task, actor, driver = (int(x) for x in line.split()[1:])
    assert task == actor == 40  # logging.ERROR in the workers, detached actors included
    assert driver < 40  # the driver's own logging is untouched
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("local_env"))
    assert json.loads(line.split(" ", 1)[1]) == LOCAL_RAY_ENV


def test_a_submitted_jobs_env_vars_are_not_repeated_by_the_driver(monkeypatch):
    """Ray refuses to merge a job's runtime env with a driver's that names the same variable: the driver leaves
    out what the job sets (cluster/runtime_env.yaml sets TOKENIZERS_PARALLELISM)."""
    import json

    import yaml

    from pcr_ray.pipeline.ray_runtime import job_runtime_env, without_job_keys

    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    assert job_runtime_env() == {}
    env = {"TOKENIZERS_PARALLELISM": "false", "PCR_RAY_CACHE": "/x", "OMP_WAIT_POLICY": "PASSIVE"}
    assert without_job_keys(env) == env
    shipped = yaml.safe_load((Path(__file__).resolve().parents[1] / "cluster" / "runtime_env.yaml").read_text())
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps({"runtime_env": shipped}))
    assert without_job_keys(env) == {"PCR_RAY_CACHE": "/x", "OMP_WAIT_POLICY": "PASSIVE"}
    job = {"runtime_env": {"env_vars": {"PCR_RAY_CACHE": "/shared", "TOKENIZERS_PARALLELISM": "true"}}}
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps(job))
    assert without_job_keys(env) == {"OMP_WAIT_POLICY": "PASSIVE"}
