"""Worker-process setup hooks for the local Ray that pcr_ray starts (runtime_env `worker_process_setup_hook`)."""

from __future__ import annotations

import logging

from pcr_ray import logs

# Ray Train's detached placement-group cleaner polls the State API once a second; the local Ray pcr_ray starts
# has no dashboard (so no State API), and every poll logs a warning that buries the training's own progress.
TRAIN_CLEANER_LOGGER = "ray.train.v2._internal.execution.controller.placement_group_cleaner"


def quiet_local_ray_workers() -> None:
    """Silence the warnings a dashboard-less local Ray cannot act on (errors still show); pcr_ray's own progress
    (a PRM's training epochs) goes to the worker's stderr, which Ray forwards to the driver."""
    logging.getLogger(TRAIN_CLEANER_LOGGER).setLevel(logging.ERROR)
    logs.setup()


LOCAL_WORKER_SETUP_HOOK = f"{__name__}.quiet_local_ray_workers"  # runtime_env["worker_process_setup_hook"]
