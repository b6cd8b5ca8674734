"""An installed (non-editable) pcr_ray carries its configs and data files and works from any directory."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(REPO)], check=True, timeout=300)
    (whl,) = out.glob("pcr_ray-*.whl")
    return whl


@pytest.mark.slow
def test_wheel_holds_every_config_and_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    confs = {"pcr_ray/" + p.relative_to(REPO).as_posix() for p in (REPO / "conf").rglob("*.yaml")}
    assert confs and confs <= names, sorted(confs - names)
    for f in ("pcr_ray/core/primitives/PRIMITIVES.md", "pcr_ray/examples/car_from_rest.json", "pcr_ray/py.typed",
              "pcr_ray/data/scibench_gold.jsonl"):
        assert f in names


@pytest.mark.slow
def test_installed_package_runs_from_another_directory(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, timeout=300)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "PCR_RAY_CACHE": str(tmp_path / "cache")}
    env.pop("PCR_RAY_CONF", None)
    code = ("import pcr_ray, pcr_ray.paths as c, pcr_ray.configs as s; "
            "print(pcr_ray.__file__); print(c.conf_dir()); "
            "print(s.compose('evaluate', ['experiment=smoke']).dataset.name)")
    out = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    pkg, conf, dataset = out.stdout.split()
    assert Path(pkg).is_relative_to(site) and Path(conf) == site / "pcr_ray" / "conf"
    assert dataset == "smoke"
    example = site / "pcr_ray" / "examples" / "car_from_rest.json"
    verify = subprocess.run([sys.executable, "-m", "pcr_ray", "verify", str(example)], cwd=work, env=env,
                            capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0 and "valid" in verify.stdout.lower(), verify.stdout + verify.stderr
    gold = subprocess.run([sys.executable, "-c", "from pcr_ray.data.scibench_gold import read_gold_records as r; "
                           "print(len(r()))"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert gold.returncode == 0 and gold.stdout.split() == ["34"], gold.stdout + gold.stderr
