"""Every Hydra command is built by the one wrapper (pcr_ray.commands.hydra_app): Hydra's flags, a checked config,
the same exit statuses; `pcr-ray -sc` completes command names, then a command's config keys."""

from __future__ import annotations

import pytest

from pcr_ray import cli
from pcr_ray.commands.hydra_app import HydraCommand, run_hydra

ARGPARSE = {"verify", "schema", "primitives"}  # file tools (a trace file, `-` for stdin), not jobs
# the arguments a command takes before its overrides
LEADING = {"data": ["build"], "solve": ["A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go?"]}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PCR_RAY_CACHE", str(tmp_path / "cache"))  # Hydra's run logs go there
    monkeypatch.chdir(tmp_path)


def _run(argv, job, name="x"):
    return run_hydra(name, "make_pairs", argv, job, "usage: pcr-ray x [key=value ...]")


def test_the_job_gets_the_checked_config_and_its_status_is_the_exit_status() -> None:
    seen = []
    assert _run(["csp_per_kind=7"], lambda cfg: seen.append(cfg.csp_per_kind) or 3) == 3
    assert _run([], lambda cfg: {"a summary": 1}) == 0  # not an int: success
    assert seen == [7]


def test_a_bad_configuration_exits_2_in_one_line_naming_the_key(capsys) -> None:
    ran = []
    for argv, key in ((["nosuch=1"], "nosuch"), (["csp_per_kind=many"], "csp_per_kind"), (["csp_per_kind=[1"], "[1"),
                      (["+ray.extra=1"], "extra")):
        assert _run(argv, ran.append) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("pcr-ray x: bad configuration: ") and key in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) <= 2
    assert not ran


def test_a_runtime_error_exits_1_with_its_message(capsys) -> None:
    def fails(cfg):
        raise FileNotFoundError("no pairs at /nowhere; run `pcr-ray make-pairs` first")

    assert _run([], fails) == 1
    assert capsys.readouterr().err == "pcr-ray x: error: no pairs at /nowhere; run `pcr-ray make-pairs` first\n"


def test_a_sweep_runs_every_point_and_exits_with_the_worst_status(capsys) -> None:
    seen = []
    def job(cfg):
        seen.append(cfg.csp_per_kind)
        return int(cfg.csp_per_kind == 2)

    assert _run(["-m", "csp_per_kind=1,2,3"], job) == 1
    assert seen == [1, 2, 3]


def test_help_and_cfg_job_run_nothing(capsys) -> None:
    ran = []
    assert _run(["--help"], ran.append) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: pcr-ray x") and "-m (--multirun)" in out and "config (conf/make_pairs.yaml):" in out
    assert _run(["--cfg", "job", "csp_per_kind=9"], ran.append) == 0
    assert "csp_per_kind: 9" in capsys.readouterr().out and not ran


@pytest.mark.parametrize("name", sorted(set(cli.COMMANDS) - ARGPARSE))
def test_every_hydra_command_is_a_hydra_app(name: str, capsys) -> None:
    """`--cfg job` (a Hydra flag) prints the command's composed config and runs nothing."""
    main = cli.load(name)
    assert main([*LEADING.get(name, []), "--cfg", "job"]) == 0
    out = capsys.readouterr().out
    assert out.strip() and "hydra:" not in out  # the job's config, without Hydra's own
    assert isinstance(main, HydraCommand) or name in ("data", "solve", "plan")  # these take leading arguments


def test_shell_completion_names_commands_then_a_commands_keys(monkeypatch, capsys) -> None:
    monkeypatch.setenv("COMP_LINE", "pcr-ray tr")
    assert cli.main(["-sc", "query=bash"]) == 0
    assert "train-prm" in capsys.readouterr().out.split()
    monkeypatch.setenv("COMP_LINE", "pcr-ray make-pairs csp_")
    assert cli.main(["-sc", "query=bash"]) == 0
    assert capsys.readouterr().out.split() == ["csp_per_kind="]
    monkeypatch.setenv("COMP_LINE", "pcr-ray eval-prm prm=minilm_")
    assert cli.main(["-sc", "query=bash"]) == 0
    assert "prm=minilm_csp" in capsys.readouterr().out.split()
    assert cli.main(["-sc", "install=bash"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("-F hydra_bash_completion pcr-ray")
