"""Test helpers for the pyexec sandbox: whether bubblewrap works here, and a skip marker when it does not."""

from __future__ import annotations

import pytest

from pcr_ray.baselines import confine


def bwrap_reason() -> str:
    """'' when bubblewrap can start the sandbox here; else why not."""
    exe = confine.find_bwrap()
    if exe is None:
        return f"bubblewrap not installed ({confine.INSTALL_HINT}; `make test` installs it when root)"
    return confine._probe(exe)


needs_bwrap = pytest.mark.skipif(bool(bwrap_reason()), reason=bwrap_reason() or "bubblewrap works")
