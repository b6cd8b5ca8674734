"""The pyexec sandbox hides the machine: planted secrets, other folders and processes are out of a program's reach."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import pcr_ray
from pcr_ray.baselines import confine, run_baseline
from pcr_ray.baselines.sandbox import SandboxLimits, SandboxUnavailable, run_program
from pcr_ray.search import SearchProblem
from tests.sandbox_util import needs_bwrap

LIM = SandboxLimits(wall_s=6.0, cpu_s=3, memory_mb=256)
NO_HOOK = SandboxLimits(wall_s=6.0, cpu_s=3, memory_mb=256, audit_hook=False)  # bwrap alone

# Tries every read and reports, per probe, 'denied: <error>' or what it got; printed as one JSON object.
PROBE = r'''
import json, os, sys
paths = PATHS
out = {}
for name, p in paths.items():
    try:
        got = sorted(os.listdir(p)) if os.path.isdir(p) else open(p, "rb").read(400).decode("latin-1")
        out[name] = "got: " + repr(got)
    except Exception as e:
        out[name] = "denied: " + type(e).__name__
out["root_listing"] = sorted(os.listdir("/"))
out["tmp_listing"] = sorted(os.listdir("/tmp"))
out["pids"] = sorted(int(x) for x in os.listdir("/proc") if x.isdigit())
out["environ"] = dict(os.environ)
envs = []
for pid in out["pids"]:
    try:
        envs.append(open(f"/proc/{pid}/environ", "rb").read().decode("latin-1"))
    except Exception as e:
        envs.append("denied: " + type(e).__name__)
out["proc_environs"] = envs
out["uid"] = os.getuid()
print(json.dumps(out))
'''


def _probe(paths: dict[str, str], limits: SandboxLimits) -> dict:
    r = run_program(PROBE.replace("PATHS", repr(paths)), limits)
    assert r.ok and r.confined, r
    return json.loads(r.stdout)


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Secrets where a hostile program would look: a fake Ray token in a temp HOME, a file in another /tmp folder,
    a variable in the caller's environment."""
    secret = f"SECRET-{uuid.uuid4().hex}"
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text(secret)
    (home / ".ssh").mkdir()
    other = tmp_path / "other_job"
    other.mkdir()
    (other / "data.txt").write_text(secret)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PCR_PLANTED_SECRET", secret)
    return {"secret": secret, "token": str(home / ".ray" / "auth_token"), "home": str(home),
            "other_tmp": str(other / "data.txt"), "other_dir": str(other)}


@needs_bwrap
@pytest.mark.parametrize("limits", [LIM, NO_HOOK], ids=["with_hook", "bwrap_alone"])
def test_reads_of_secrets_and_other_folders_fail(planted: dict[str, str], limits: SandboxLimits) -> None:
    real_home = os.path.expanduser("~")
    source = str(Path(pcr_ray.__file__).resolve().parent / "baselines" / "sandbox.py")
    paths = {"ray_token": planted["token"], "fake_home": planted["home"], "other_tmp_file": planted["other_tmp"],
             "other_tmp_dir": planted["other_dir"], "real_ray_token": str(Path(real_home) / ".ray" / "auth_token"),
             "real_home": real_home, "root_home": "/root", "home": "/home", "etc_shadow": "/etc/shadow",
             "etc_passwd": "/etc/passwd", "source_file": source, "source_dir": str(Path(source).parent),
             "work": "/work", "ray_sessions": "/tmp/ray", "host_proc_1": f"/proc/{os.getpid()}/environ",
             "proc_1_root_etc": "/proc/1/root/etc/shadow"}
    assert Path(source).exists() and Path(planted["token"]).read_text() == planted["secret"]
    out = _probe(paths, limits)
    for name in paths:
        assert out[name].startswith("denied"), (name, out[name])
    text = json.dumps(out)
    assert planted["secret"] not in text
    assert set(out["root_listing"]) <= {"usr", "lib", "lib64", "opt", "tmp", "proc", "dev"}, out["root_listing"]
    assert out["tmp_listing"] == ["work"]
    assert len(out["pids"]) <= 3 and os.getpid() not in out["pids"], out["pids"]  # bwrap's init and the program
    assert all("PCR_PLANTED_SECRET" not in e for e in out["proc_environs"])  # /proc/1/environ: bwrap's, empty
    assert "PCR_PLANTED_SECRET" not in out["environ"] and out["environ"]["HOME"] == confine.BOX
    assert out["uid"] == 65534


@needs_bwrap
def test_other_processes_are_neither_visible_nor_signalable() -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        code = (f"import os, signal\ntry:\n    os.kill({sleeper.pid}, signal.SIGKILL)\n    print('sent')\n"
                f"except Exception as e:\n    print('refused', type(e).__name__)\n"
                f"print(os.path.exists('/proc/{sleeper.pid}'))")
        alone = run_program(code, NO_HOOK)  # bwrap alone: the PID is not in the program's namespace
        assert alone.ok and alone.stdout.split() == ["refused", "ProcessLookupError", "False"], alone
        hooked = run_program(code, LIM)  # and the audit hook ends the program at the attempt
        assert hooked.failure == "blocked" and "os.kill" in hooked.stderr
        time.sleep(0.2)
        assert sleeper.poll() is None  # still running
    finally:
        sleeper.kill()
        sleeper.wait()


@needs_bwrap
def test_nothing_outside_its_folder_is_writable_even_without_the_hook(tmp_path: Path) -> None:
    target = tmp_path / "escape.txt"
    outside = ['/tmp/x', '/opt/python/x', '/opt/x', '/usr/lib/x', str(target), '/x', '/dev/x', '/dev/shm/x']
    code = (f"import os\nfor p in {outside!r}:\n"
            f"    try:\n        open(p, 'w').write('x'); print('wrote', p)\n"
            f"    except OSError as e:\n        print('denied', e.errno)\n"
            f"open('mine.txt', 'w').write('7'); print(open('mine.txt').read())")
    r = run_program(code, NO_HOOK)
    assert r.ok, r
    lines = r.stdout.split("\n")
    assert all(ln.startswith("denied") for ln in lines[:len(outside)]), r.stdout
    assert lines[len(outside)] == "7" and not target.exists()


@needs_bwrap
def test_a_timed_out_program_leaves_no_process_behind() -> None:
    def sandboxed() -> set[int]:
        pids = set()
        for d in os.listdir("/proc"):
            try:
                if d.isdigit() and b"/tmp/work/bootstrap.py" in Path(f"/proc/{d}/cmdline").read_bytes():
                    pids.add(int(d))
            except OSError:
                pass
        return pids

    before = sandboxed()
    r = run_program("import time\ntime.sleep(60)", SandboxLimits(wall_s=1.0, cpu_s=2))
    assert r.failure == "timeout" and r.confined
    time.sleep(0.3)
    assert sandboxed() - before == set()


@needs_bwrap
def test_allow_listed_packages_work_and_nothing_else_is_importable() -> None:
    r = run_program("import sympy\nprint(sympy.nsimplify('0.5') * 50)", LIM)
    assert r.ok and r.stdout.strip() == "25", r
    r = run_program("import numpy", LIM)  # installed beside the project, not allow-listed
    assert r.failure == "error" and "ModuleNotFoundError" in r.stderr


def test_missing_bwrap_is_refused_with_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on PATH
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        run_program("print(1)", LIM)
    asked = []

    class Gen:
        def propose(self, reqs):
            asked.extend(reqs)
            return [["print(25, 'm')"] for _ in reqs]

    p = SearchProblem("car", "How far?", (), "m", 25.0)
    with pytest.raises(SandboxUnavailable, match="baselines.sandbox=unconfined"):
        run_baseline("pyexec", [p], Gen(), {"timeout_s": 4})
    assert asked == []  # refused before any generation
    from pcr_ray.baselines import sandbox

    sandbox._warn_unconfined.cache_clear()  # it warns once per process: an earlier test may have used it
    with pytest.warns(RuntimeWarning, match="UNCONFINED"):
        res = run_baseline("pyexec", [p], Gen(), {"timeout_s": 4, "sandbox": "unconfined"})[0]
    assert res.answer_value == 25.0
    with pytest.raises(ValueError, match="not one of"):
        SandboxLimits(sandbox="none")


def test_sandbox_setting_is_in_the_configs() -> None:
    from pcr_ray.baselines.base import BaselineConfig
    from pcr_ray.baselines.pyexec import limits_from
    from pcr_ray.evaluate import compose_config

    cfg = compose_config(["baselines.sandbox=unconfined", "baselines.memory_mb=256"])
    limits = limits_from(BaselineConfig.from_mapping(cfg.baselines))
    assert (limits.sandbox, limits.memory_mb) == ("unconfined", 256)
    assert limits_from(BaselineConfig.from_mapping(compose_config([]).baselines)) == SandboxLimits()
    with pytest.raises(ValueError, match="unknown baseline option"):
        BaselineConfig.from_mapping({"timeout": 3})


@needs_bwrap
def test_signal_exit_codes_are_read_back() -> None:
    r = run_program(f"import os\nos.kill(os.getpid(), {int(signal.SIGXCPU)})", NO_HOOK)
    assert r.returncode == -signal.SIGXCPU and r.failure == "cpu"


def test_evaluate_refuses_pyexec_without_bwrap_before_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pcr_ray.evaluate as ev
    from pcr_ray.pipeline.search_batch import parse_methods

    def no_ray(*a, **k):
        raise AssertionError("evaluate started Ray before refusing")

    monkeypatch.setattr(ev, "init_ray", no_ray)
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on PATH
    cfg = ev.compose_config(["experiment=smoke", "methods=[pyexec]", "dataset.limit=1"])
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        ev.evaluate(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "results.parquet").exists()
    ev.check_sandbox(parse_methods(["pyexec"], {}, {}, {}), {"sandbox": "unconfined"})  # allowed (warns at run time)
    ev.check_sandbox(parse_methods(["nsprm"], {}, {}, {}), {"sandbox": "bwrap"})  # no pyexec: no bwrap needed
