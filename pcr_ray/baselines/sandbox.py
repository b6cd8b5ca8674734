"""Run model-written Python in a separate, limited process; never in the caller's interpreter.

Layers (each one a guard on its own, none trusted alone):
- bubblewrap (pcr_ray.baselines.confine): the program runs in its own mount, PID, network, IPC and user
  namespaces and sees only the interpreter, its standard library, the allow-listed packages and its own
  folder: no home directory, no /etc, no other /tmp folders, no Ray session, no other processes. Where bwrap is
  missing, run_program refuses (SandboxUnavailable says how to install it) unless `sandbox="unconfined"`;
- a fresh interpreter, `python -I -S` (isolated: no site, no user site, no PYTHON* variables), a minimal env;
- a throwaway temporary directory as its working directory, deleted afterwards;
- resource limits set by the bootstrap before the program is even read: CPU seconds, address space, file
  size (stdout and stderr go to files in that directory, so it also caps output), open files, processes,
  no core dumps;
- its own session, so the whole process group is killed at the wall-clock timeout;
- no network: bwrap's network namespace; unconfined, `unshare -n` when running as root and unshare works;
- and always
- a bootstrap that installs an audit hook (sys.addaudithook) before the program runs: sockets, fork/exec/
  spawn/subprocess/system, kill, ctypes, and writes, renames or deletes outside the working directory end the
  process at once (exit code BLOCKED_EXIT), so the program cannot catch and ignore the refusal.
(RLIMIT_NPROC is not enforced for root, even mapped to nobody inside bwrap, which is why fork is also blocked
by the hook.)
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import warnings
from dataclasses import dataclass
from functools import lru_cache

import pcr_ray.baselines.confine as confine
from pcr_ray.baselines.confine import SandboxUnavailable
from pcr_ray.configs import BaselineOptions

BLOCKED_EXIT = 87

log = logging.getLogger(__name__)

__all__ = ["BLOCKED_EXIT", "SandboxLimits", "SandboxResult", "SandboxUnavailable", "run_program"]

_BOOTSTRAP = r'''
import os, resource, sys
_cpu, _mem, _fsize, _nofile, _nproc = (int(x) for x in sys.argv[1:6])
for _lim, _val in ((resource.RLIMIT_CPU, (_cpu, _cpu + 1)), (resource.RLIMIT_AS, (_mem, _mem)),
                   (resource.RLIMIT_FSIZE, (_fsize, _fsize)), (resource.RLIMIT_NOFILE, (_nofile, _nofile)),
                   (resource.RLIMIT_NPROC, (_nproc, _nproc)), (resource.RLIMIT_CORE, (0, 0))):
    resource.setrlimit(_lim, _val)
_preload, _site = sys.argv[6], sys.argv[7]
if _preload:  # trusted packages the program may use, imported before the hook (their own imports are ours)
    sys.path.append(_site)
    for _m in _preload.split(","):
        __import__(_m)
    sys.path.remove(_site)
_ROOT = os.path.realpath(os.getcwd())
_W = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_DENY = ("socket.", "os.fork", "os.forkpty", "os.exec", "os.spawn", "os.posix_spawn", "os.system",
         "os.kill", "os.killpg", "subprocess.", "ctypes.", "os.startfile", "pty.", "winreg.", "webbrowser.",
         "urllib.", "http.", "ftplib.", "smtplib.", "poplib.", "imaplib.", "telnetlib.", "nntplib.")
_PATH_EVENTS = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.symlink",
                "os.link", "os.truncate", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move",
                "os.chdir", "os.chroot")
_NO_IMPORT = ("ctypes", "_ctypes", "cffi", "_posixsubprocess", "multiprocessing", "socket", "_socket", "ssl",
              "select", "selectors", "asyncio", "mmap")

def _deny(what):
    try:
        sys.stdout.flush()
    except Exception:
        pass
    try:
        os.write(2, ("sandbox: blocked " + what + "\n").encode())
    finally:
        os._exit(@BLOCKED@)

def _inside(p):
    try:
        if isinstance(p, int):
            return True
        p = os.fsdecode(p)
        full = os.path.realpath(p if os.path.isabs(p) else os.path.join(_ROOT, p))
        return full == _ROOT or full.startswith(_ROOT + os.sep)
    except Exception:
        return False

def _hook(event, args):
    if event.startswith(_DENY):
        _deny(event)
    if event == "import" and args and str(args[0]).split(".")[0] in _NO_IMPORT and args[0] not in sys.modules:
        _deny("import " + str(args[0]))
    if event == "open" and args:
        path, mode, flags = (list(args) + [None, None, None])[:3]
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _W)
        if writing and not _inside(path):
            _deny("write outside the working directory: " + str(path)[:80])
    if event in _PATH_EVENTS:
        for a in args[:2]:
            if isinstance(a, (str, bytes, os.PathLike)) and not _inside(a):
                _deny(event + " outside the working directory")

if sys.argv[9] == "1":
    sys.addaudithook(_hook)
_src = open(sys.argv[8], encoding="utf-8").read()
sys.argv[:] = ["program.py"]
_code = compile(_src, "program.py", "exec")
_g = {"__name__": "__main__", "__builtins__": __builtins__}
del _src
exec(_code, _g)
'''.replace("@BLOCKED@", str(BLOCKED_EXIT))


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one run: wall and CPU seconds, memory (address space) MiB, output bytes, processes, files.

    `preload`: trusted packages (pure Python) imported before the audit hook when the program names them.
    `sandbox`: "bwrap" (confined; refused where bubblewrap is missing) or "unconfined" (the layers below bwrap
    only: the program can read whatever the user can). `audit_hook=False` only to test the outer layer alone.
    """

    wall_s: float = BaselineOptions.timeout_s
    cpu_s: int = BaselineOptions.cpu_s
    memory_mb: int = BaselineOptions.memory_mb
    output_bytes: int = BaselineOptions.output_bytes
    nproc: int = 64
    nofile: int = 64
    network_namespace: bool = True
    preload: tuple[str, ...] = ("sympy",)
    sandbox: str = BaselineOptions.sandbox
    audit_hook: bool = True

    def __post_init__(self) -> None:
        confine.check_mode(self.sandbox)


@dataclass(frozen=True)
class SandboxResult:
    """What happened: exit code, stdout/stderr (truncated), and why it failed if it did."""

    ok: bool
    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float
    failure: str = ""  # '' | timeout | blocked | memory | cpu | output_limit | error | killed
    isolated_net: bool = False
    confined: bool = False  # ran inside bubblewrap


def _unshare_exe() -> str | None:
    """`unshare` when it can give the program an empty network namespace here (root); else None."""
    exe = shutil.which("unshare")
    return exe if exe is not None and os.geteuid() == 0 and _unshare_works(exe) else None


@lru_cache(maxsize=4)
def _unshare_works(exe: str) -> bool:
    try:
        return subprocess.run([exe, "-n", "true"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _site_dir() -> str:
    """The site-packages folder of this interpreter's environment (where preloaded packages live)."""
    return sysconfig.get_paths()["purelib"]


def _read(path: str, limit: int) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return ""


def run_program(code: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run `code` in the sandbox and report; never raises for anything the program does.

    Raises SandboxUnavailable (before running anything) when `limits.sandbox` is "bwrap" and bubblewrap is
    missing or cannot start here.
    """
    lim = limits or SandboxLimits()
    exe = confine.require_bwrap() if lim.sandbox == "bwrap" else None
    if exe is None:
        _warn_unconfined()
    top = tempfile.mkdtemp(prefix="pcr_sandbox_")
    try:
        work = os.path.join(top, "work")  # the program's folder (BOX inside bwrap); outputs stay beside it
        os.mkdir(work)
        prog = os.path.join(work, "program.py")
        boot = os.path.join(work, "bootstrap.py")
        with open(prog, "w", encoding="utf-8") as fh:
            fh.write(code)
        with open(boot, "w", encoding="utf-8") as fh:
            fh.write(_BOOTSTRAP)
        preload = tuple(m for m in lim.preload if m in code)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
        if exe is not None:
            inside = confine.BOX
            args = ["-I", "-S", "-B", f"{inside}/bootstrap.py", *_limit_args(lim), ",".join(preload), confine.SITE,
                    f"{inside}/program.py", "1" if lim.audit_hook else "0"]
            cmd = confine.bwrap_command(exe, work, preload, args, {**env, "HOME": inside})
            popen_env: dict[str, str] = {}  # bwrap's own environment (visible as /proc/1/environ inside): none
            net = True
        else:
            cmd = [sys.executable, "-I", "-S", "-B", boot, *_limit_args(lim), ",".join(preload), _site_dir(), prog,
                   "1" if lim.audit_hook else "0"]
            unshare = _unshare_exe() if lim.network_namespace else None
            net = unshare is not None
            if unshare is not None:
                cmd = [unshare, "-n", "--"] + cmd
            popen_env = {**env, "HOME": work}
        out_p, err_p = os.path.join(top, "stdout.txt"), os.path.join(top, "stderr.txt")
        t0 = time.perf_counter()
        with open(out_p, "wb") as out_f, open(err_p, "wb") as err_f:
            try:
                proc = subprocess.Popen(cmd, cwd=work, env=popen_env, stdin=subprocess.DEVNULL, stdout=out_f,
                                        stderr=err_f, start_new_session=True, close_fds=True)
            except OSError as exc:
                return SandboxResult(False, None, "", f"cannot start the sandbox: {exc}", 0.0, "error", net,
                                     exe is not None)
            timed_out = False
            try:
                rc = proc.wait(timeout=lim.wall_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)  # bwrap dies; --die-with-parent and the PID namespace take the program along
                rc = proc.wait()
            finally:
                _kill_group(proc)  # anything the program left behind in its group
        wall = time.perf_counter() - t0
        if exe is not None and rc is not None and rc > 128:
            rc = -(rc - 128)  # bwrap reports a program killed by signal N as exit code 128 + N
        stdout = _read(out_p, lim.output_bytes)
        stderr = _read(err_p, 20000)
        failure = _classify(rc, timed_out, stderr, os.path.getsize(out_p) >= lim.output_bytes)
        return SandboxResult(failure == "", rc, stdout, stderr[-4000:], round(wall, 4), failure, net,
                             exe is not None)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _limit_args(lim: SandboxLimits) -> list[str]:
    return [str(lim.cpu_s), str(lim.memory_mb * 1024 * 1024), str(lim.output_bytes), str(lim.nofile),
            str(lim.nproc)]


@lru_cache(maxsize=1)
def _warn_unconfined() -> None:
    """Once per process: programs run without bubblewrap can read everything this user can."""
    msg = ("pyexec sandbox is UNCONFINED (baselines.sandbox=unconfined): model-written programs can READ every "
           "file this user can (home directory, ~/.ray/auth_token, /etc/shadow as root) and print it into the "
           f"results; install bubblewrap (`{confine.INSTALL_HINT}`) and drop the setting")
    warnings.warn(msg, RuntimeWarning, stacklevel=3)
    log.warning(msg)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _classify(rc: int | None, timed_out: bool, stderr: str, output_full: bool) -> str:
    if timed_out:
        return "timeout"
    if rc == 0:
        return ""
    if rc == BLOCKED_EXIT and "sandbox: blocked" in stderr:
        return "blocked"
    if rc in (-signal.SIGXCPU, -signal.SIGKILL) and not output_full:
        return "cpu" if rc == -signal.SIGXCPU else "killed"
    if rc == -signal.SIGXFSZ or output_full:
        return "output_limit"
    if "MemoryError" in stderr:
        return "memory"
    return "error"
