"""pcr_ray.paths.file_lock and build_once: one process at a time, a folder built once and whole."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pcr_ray.paths import build_once, file_lock

TRY_LOCK = """
import fcntl, sys
with open(sys.argv[1], "a") as fh:
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(3)
"""


def _other_process_gets(path: Path) -> bool:
    return subprocess.run([sys.executable, "-c", TRY_LOCK, str(path)], timeout=60).returncode == 0


def test_file_lock_keeps_other_processes_out_until_released(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "x.lock"
    with file_lock(path):
        assert path.exists() and not _other_process_gets(path)
    assert _other_process_gets(path)


def test_build_once_builds_a_missing_folder_once(tmp_path: Path) -> None:
    calls: list[Path] = []

    def make(tmp: Path) -> None:
        calls.append(tmp)
        (tmp / "done").write_text("1")

    def complete(folder: Path) -> bool:
        return (folder / "done").exists()

    folder = tmp_path / "model"
    assert build_once(folder, complete, make) == folder and complete(folder)
    assert build_once(folder, complete, make) == folder and len(calls) == 1
    assert not calls[0].exists()  # built beside it, then renamed into place
