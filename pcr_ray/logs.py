"""Where the library's log messages go when a `pcr-ray` command runs: pcr_ray's INFO and up, other libraries'
WARNING and up, to stderr as plain lines.

Library modules log through `logging.getLogger(__name__)` and configure nothing; `pcr-ray` calls `setup()`
before a command. A Hydra command (pcr_ray.commands.hydra_app) then replaces the handler with Hydra's job
logging, which keeps pcr_ray's level.
"""

from __future__ import annotations

import logging
import sys

PACKAGE = "pcr_ray"


def setup(level: int = logging.INFO) -> None:
    """pcr_ray's messages at `level` and up, everyone's warnings, on stderr; a no-op where logging is set up."""
    logging.getLogger(PACKAGE).setLevel(level)
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
