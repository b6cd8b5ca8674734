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


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    """(site folder the wheel is installed into, a working directory outside the checkout, the environment)."""
    root = tmp_path_factory.mktemp("installed")
    site = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, timeout=300)
    work = root / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "PCR_RAY_CACHE": str(root / "cache")}
    env.pop("PCR_RAY_CONF", None)
    return site, work, env


@pytest.mark.slow
def test_installed_package_runs_from_another_directory(installed: tuple[Path, Path, dict[str, str]]) -> None:
    site, work, env = installed
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
    shown = subprocess.run([str(site / "bin" / "pcr-ray"), "make-pairs", "--cfg", "job", "csp_per_kind=3"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "csp_per_kind: 3" in shown.stdout, shown.stderr
    # a sweep of the installed Hydra command: two jobs, each failing with its message (no quick PRM in the cache)
    sweep = subprocess.run([str(site / "bin" / "pcr-ray"), "eval-prm", "-m", "use_ray=false", "split=test,validation"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert sweep.returncode == 1 and sweep.stderr.count("pcr-ray eval-prm: error: ") == 2, sweep.stderr
    assert not list(work.iterdir()), "Hydra's run logs go to the cache, not the working directory"


@pytest.mark.slow
@pytest.mark.parametrize(("command", "steps"), [
    ("reproduce", ["table", "pairs", "eval_prm_csp", "first_error", "givens"]),
    ("listwise-rounds", ["make-pairs", "train lw1", "mine round 1", "train lw2", "search benchmark"]),
])
def test_installed_recipes_plan_their_steps_outside_the_checkout(
        installed: tuple[Path, Path, dict[str, str]], command: str, steps: list[str]) -> None:
    """The installed `pcr-ray reproduce dry_run=true` and `pcr-ray listwise-rounds dry_run=true` print every step's
    command, each a pcr_ray module of the installed package (nothing from the checkout's benchmarks/)."""
    site, work, env = installed
    out_dir = work / command
    run = subprocess.run([str(site / "bin" / "pcr-ray"), command, "dry_run=true", f"out={out_dir}"], cwd=work,
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    planned = [ln.split("] ", 1)[1].rstrip(":") for ln in run.stdout.splitlines() if ln.startswith(f"[{command} ")]
    assert set(steps) <= set(planned), planned
    commands = [ln.strip() for ln in run.stdout.splitlines() if ln.startswith("  ")]
    assert len(commands) == len(planned)
    assert all(" -m pcr_ray." in c for c in commands), commands
    plan = run.stdout.replace(sys.executable, "python")  # the interpreter may live in the checkout (.venv/)
    assert str(REPO) not in plan and "benchmarks/" not in plan
    assert not out_dir.exists(), "a dry run writes nothing"
    for module in {c.split(" -m ", 1)[1].split()[0] for c in commands}:  # every module a step runs is installed
        where = f"import importlib.util as u; print(u.find_spec({module!r}).origin)"
        found = subprocess.run([sys.executable, "-c", where], cwd=work, env=env, capture_output=True, text=True,
                               timeout=60)
        assert found.returncode == 0 and Path(found.stdout.strip()).is_relative_to(site), (module, found.stderr)
