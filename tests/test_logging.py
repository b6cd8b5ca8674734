"""The library logs (`logging.getLogger(__name__)`), it does not print: `pcr-ray` shows pcr_ray's progress and
everyone's warnings on stderr, and a warning the library gives reaches the log records."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest


def test_setup_shows_pcr_ray_info_and_other_libraries_warnings_only() -> None:
    script = textwrap.dedent("""
        import logging
        from pcr_ray import logs
        logs.setup()
        logs.setup()  # twice: still one handler
        logging.getLogger("pcr_ray.prm.checkpoints").info("[prm] progress line")
        logging.getLogger("pcr_ray.data.files").debug("debug line")
        logging.getLogger("httpx").info("HTTP Request: noise")
        logging.getLogger("httpx").warning("a library's warning")
        print("stdout stays the command's")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == ["[prm] progress line", "a library's warning"]
    assert out.stdout == "stdout stays the command's\n"


def test_a_library_warning_is_a_log_record(caplog: pytest.LogCaptureFixture) -> None:
    from pcr_ray.serve.auth import ApiKeyAuth

    with caplog.at_level(logging.WARNING, logger="pcr_ray"), pytest.warns(RuntimeWarning):
        ApiKeyAuth.from_settings("0.0.0.0", "PCR_RAY_TEST_NO_SUCH_KEY", None, True)
    [rec] = [r for r in caplog.records if r.name == "pcr_ray.serve.auth"]
    assert rec.levelno == logging.WARNING and "WITHOUT AN API KEY" in rec.getMessage()
