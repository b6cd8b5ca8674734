"""Worker-process setup hooks for the local Ray that pcr_ray starts (runtime_env `worker_process_setup_hook`)."""

from __future__ import annotations

import logging

# Ray Train's detached placement-group cleaner polls the State API once a second; the local Ray pcr_ray starts
# has no dashboard (so no State API), and every poll logs a warning that buries the training's own progress.
TRAIN_CLEANER_LOGGER = "ray.train.v2._internal.execution.controller.placement_group_cleaner"


def quiet_local_ray_workers() -> None:
    """Silence the warnings a dashboard-less local Ray cannot act on (errors still show)."""
    logging.getLogger(TRAIN_CLEANER_LOGGER).setLevel(logging.ERROR)


LOCAL_WORKER_SETUP_HOOK = f"{__name__}.quiet_local_ray_workers"  # runtime_env["worker_process_setup_hook"]
