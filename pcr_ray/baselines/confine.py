"""Bubblewrap confinement for sandboxed programs: they see the interpreter, its stdlib, allowed packages, own folder.

Inside the sandbox (`bwrap --unshare-all`: own mount, PID, network, IPC, UTS, user and cgroup namespaces):
- `/opt/python`: the interpreter binary, its standard library (the base installation's own site-packages
  hidden under an empty read-only tmpfs) and libpython, all read-only;
- `/opt/site`: only the allow-listed packages (`SandboxLimits.preload`) and what they require, read-only;
- `/usr/lib`, `/usr/lib64` (and the `/lib`, `/lib64` links to them): the shared libraries, read-only;
- `/proc` of its own PID namespace (bwrap's init and the program), a minimal `/dev`;
- `/tmp`: an empty tmpfs holding `/tmp/work`, the program's throwaway folder: the only writable place (`/`,
  `/tmp` and `/dev` are remounted read-only);
- no `/etc`, no `/home`, no `/root`, no `/work`, no shell or other binaries, no network, a cleared environment,
  uid/gid 65534 (nobody).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from functools import lru_cache

INSTALL_HINT = "apt-get install bubblewrap"
MODES = ("bwrap", "unconfined")
BOX = "/tmp/work"
PY_ROOT = "/opt/python"
SITE = "/opt/site"
_NOBODY = "65534"


class SandboxUnavailable(RuntimeError):
    """Bubblewrap is missing or does not work here, and the config did not allow running unconfined."""


def find_bwrap() -> str | None:
    """The bwrap executable on PATH, or None."""
    return shutil.which("bwrap")


def check_mode(mode: str) -> str:
    """`mode` when it is one of MODES; else a ValueError naming them."""
    if mode not in MODES:
        raise ValueError(f"sandbox mode {mode!r} is not one of {MODES} (baselines.sandbox)")
    return mode


def require_bwrap() -> str:
    """The path of a working bwrap; SandboxUnavailable with how to install it when there is none."""
    exe = find_bwrap()
    if exe is None:
        raise SandboxUnavailable(
            "pyexec runs model-written programs only inside bubblewrap, which is not installed: "
            f"`{INSTALL_HINT}` (Debian/Ubuntu; `make test` does it when root), or set "
            "baselines.sandbox=unconfined to run them with the audit hook alone (they can then read your files)")
    why = _probe(exe)
    if why:
        raise SandboxUnavailable(
            f"bubblewrap ({exe}) cannot start a sandbox here: {why}. It needs user namespaces (run as root, or "
            "enable kernel.unprivileged_userns_clone); or set baselines.sandbox=unconfined to run programs "
            "with the audit hook alone (they can then read your files)")
    return exe


@lru_cache(maxsize=4)
def _probe(exe: str) -> str:
    """'' when bwrap runs this interpreter with the sandbox's binds; else the first line of what went wrong."""
    box = tempfile.mkdtemp(prefix="pcr_sandbox_probe_")
    try:
        cmd = bwrap_command(exe, box, (), ["-c", "pass"])
        run = subprocess.run(cmd, capture_output=True, timeout=30, env={}, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(box, ignore_errors=True)
    if run.returncode == 0:
        return ""
    lines = run.stderr.decode("utf-8", "replace").strip().splitlines()
    return (lines[0] if lines else f"exit code {run.returncode}")[:300]


@lru_cache(maxsize=1)
def _interpreter_binds() -> tuple[tuple[str, ...], dict[str, str]]:
    """bwrap arguments that place this interpreter under PY_ROOT, and the environment it needs there."""
    ver = sysconfig.get_config_var("VERSION") or f"{sys.version_info[0]}.{sys.version_info[1]}"
    exe = os.path.realpath(sys.executable)
    stdlib = os.path.dirname(os.path.realpath(os.__file__))
    inner_lib = f"{PY_ROOT}/lib/python{ver}"
    args = ["--ro-bind", exe, f"{PY_ROOT}/bin/python{ver}", "--ro-bind", stdlib, inner_lib]
    dynload = sysconfig.get_config_var("DESTSHARED")
    if dynload and os.path.isdir(dynload) and not os.path.realpath(dynload).startswith(stdlib + os.sep):
        args += ["--ro-bind", dynload, f"{inner_lib}/lib-dynload"]
    base_site = os.path.join(stdlib, "site-packages")
    if os.path.isdir(base_site):  # the base installation's packages: not the program's business
        args += ["--tmpfs", f"{inner_lib}/site-packages", "--remount-ro", f"{inner_lib}/site-packages"]
    env: dict[str, str] = {}
    soname, libdir = sysconfig.get_config_var("INSTSONAME"), sysconfig.get_config_var("LIBDIR")
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and soname and libdir and \
            os.path.exists(os.path.join(libdir, soname)):
        args += ["--ro-bind", os.path.join(libdir, soname), f"{PY_ROOT}/lib/{soname}"]
        env["LD_LIBRARY_PATH"] = f"{PY_ROOT}/lib"
    for d in ("/usr/lib", "/usr/lib64"):
        if os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for link in ("/lib", "/lib64"):
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    return tuple(args), env


def inner_python() -> str:
    """The interpreter's path inside the sandbox."""
    ver = sysconfig.get_config_var("VERSION") or f"{sys.version_info[0]}.{sys.version_info[1]}"
    return f"{PY_ROOT}/bin/python{ver}"


_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@lru_cache(maxsize=32)
def package_dirs(modules: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(host path, name under SITE) of each module in `modules` and of the packages its distribution requires."""
    out: dict[str, str] = {}
    todo = list(modules)
    seen: set[str] = set()
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        spec = importlib.util.find_spec(mod)
        if spec is None:
            continue
        if spec.submodule_search_locations:
            path = list(spec.submodule_search_locations)[0]
        elif spec.origin and os.path.isfile(spec.origin):
            path = spec.origin
        else:
            continue
        out[os.path.basename(path)] = path
        todo.extend(_required_modules(mod))
    return tuple((p, n) for n, p in sorted(out.items()))


def _required_modules(mod: str) -> list[str]:
    """Top-level modules of the distributions that `mod`'s distribution requires (extras left out)."""
    names: list[str] = []
    for dist_name in importlib.metadata.packages_distributions().get(mod, []):
        for req in importlib.metadata.requires(dist_name) or []:
            if "extra ==" in req or "extra==" in req:
                continue
            m = _REQ_NAME.match(req)
            if not m:
                continue
            try:
                dist = importlib.metadata.distribution(m.group(1))
            except importlib.metadata.PackageNotFoundError:
                continue
            top = (dist.read_text("top_level.txt") or "").split()
            names.extend(top or [m.group(1).replace("-", "_").lower()])
    return names


def bwrap_command(exe: str, box: str, modules: Sequence[str], argv: Sequence[str],
                  env: dict[str, str] | None = None) -> list[str]:
    """The bwrap command line running the sandbox's Python with `argv`, `box` (host folder) as BOX, cwd BOX."""
    binds, py_env = _interpreter_binds()
    cmd = [exe, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
           "--uid", _NOBODY, "--gid", _NOBODY, "--hostname", "sandbox", *binds]
    for host, name in package_dirs(tuple(modules)):
        cmd += ["--ro-bind", host, f"{SITE}/{name}"]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", box, BOX,
            "--remount-ro", "/tmp", "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", BOX, "--clearenv"]
    for k, v in {**(env or {}), **py_env}.items():
        cmd += ["--setenv", k, v]
    return [*cmd, "--", inner_python(), *argv]
