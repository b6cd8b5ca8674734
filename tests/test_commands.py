"""Every Hydra command is built by the one wrapper (pcr_ray.commands.hydra_app): Hydra's flags, a checked config,
the same exit statuses; `pcr-ray -sc` completes command names, then a command's config keys."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from pcr_ray import cli
from pcr_ray.commands.core import verify_main
from pcr_ray.commands.hydra_app import HydraCommand, flags_first, positional_override, run_hydra

# the arguments a command takes before its overrides
LEADING = {"data": ["build"], "solve": ["A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go?"],
           "verify": ["trace.json"]}
EXAMPLE = Path(__file__).resolve().parent.parent / "pcr_ray" / "examples" / "car_from_rest.json"


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


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
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


def test_leading_bare_arguments_become_one_quoted_list_override() -> None:
    values = ["a b.json", "x,y[1]{2}.json", "it's", "back\\slash\\", "-", "${not_interpolated}", '"dq"', "k:v"]
    argv = positional_override("traces", [*values, "json=true", "--cfg", "job", "c.json"])
    assert argv[1:] == ["json=true", "--cfg", "job", "c.json"]  # only the leading ones: a flag's argument is kept
    value = OverridesParser.create().parse_overrides(argv[:1])[0].value()
    assert list(OmegaConf.create({"traces": value}).traces) == values
    assert positional_override("traces", ["-m", "a.json"]) == ["-m", "a.json"]
    assert positional_override("traces", []) == []
    assert flags_first(["t=[a]", "-m", "x=1,2", "--cfg", "job", "--info", "y=1"]) == \
        ["-m", "--cfg", "job", "--info", "all", "t=[a]", "x=1,2", "y=1"]


def test_verify_takes_several_files_one_line_each(tmp_path, capsys) -> None:
    odd = tmp_path / "a trace, [odd].json"
    shutil.copy(EXAMPLE, odd)
    assert verify_main([str(odd), str(EXAMPLE)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(": VALID")[0] for ln in lines] == [str(odd), str(EXAMPLE)]
    assert verify_main([str(odd), str(tmp_path / "missing.json"), "json=true"]) == 1
    verdicts = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]  # stdout: the verdicts only
    assert [(v["file"], v["ok"]) for v in verdicts] == [(str(odd), True), (str(tmp_path / "missing.json"), False)]


def test_verify_dash_reads_standard_input(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(EXAMPLE.read_text()))
    assert verify_main(["-", "json=true"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["ok"] is True and verdict["file"] == "-"


def test_verify_keeps_hydra_flags_and_their_arguments(capsys) -> None:
    for argv in (["a.json", "b c.json", "json=true", "--cfg", "job"],
                 ["a.json", "b c.json", "--cfg", "job", "json=true"]):
        assert verify_main(argv) == 0
        shown = OmegaConf.create(capsys.readouterr().out)
        assert list(shown.traces) == ["a.json", "b c.json"] and shown.json is True
    assert verify_main(["a.json", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: pcr-ray verify TRACE.json")
    assert verify_main([str(EXAMPLE), "-m", "json=true,false"]) == 0  # a sweep: no Hydra log line on stdout
    out = capsys.readouterr().out.splitlines()
    assert json.loads(out[0])["ok"] is True and out[-1].startswith("VALID") and "[HYDRA]" not in "".join(out)


def test_verify_without_a_trace_is_a_bad_configuration_naming_traces(capsys) -> None:
    assert verify_main([]) == 2
    assert verify_main(["json=true"]) == 2
    err = capsys.readouterr().err
    assert err.count("pcr-ray verify: bad configuration:") == 2 and "traces" in err
