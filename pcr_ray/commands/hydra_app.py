"""The one wrapper around `@hydra.main` that every command of `pcr-ray` is built with.

`hydra_command(name, config_name, run, usage)` is a command's `main(argv) -> int`: `--help` prints the usage and
the composed config; anything else goes to `@hydra.main` over conf/<config_name>.yaml, so `-m` sweeps, `--cfg job`,
`--info` and `--shell-completion` work as in any Hydra app. A command with a `positional` key takes its leading
bare arguments (`pcr-ray verify a.json b.json json=true`) as that key's list (positional_override). Each job's
config is checked against its schema (pcr_ray.configs.check) and handed to `run`.
Exit statuses, the same for every command:
- 2: a bad configuration (an unknown key, a malformed override, a wrong type), in one line naming the key;
- 1: the job raised ValueError, FileNotFoundError or RuntimeError (its message, no traceback);
- else what `run` returned when it is an int (else 0); in a sweep, the largest of its jobs'.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from pcr_ray import configs
from pcr_ray.paths import conf_dir

# Hydra's flags that take an argument (`--cfg job`) or may (`--info [what]`); the others take none
HYDRA_FLAG_ARGS = {**dict.fromkeys(("--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn",
                                    "--config-dir", "-cd", "--experimental-rerun"), "one"),
                   "--info": "optional", "-i": "optional"}
HYDRA_INFO = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")
Job = Callable[[DictConfig], Any]  # the checked config -> an exit status (an int; anything else: 0)
RUNTIME_ERRORS = (ValueError, FileNotFoundError, RuntimeError)
HYDRA_FLAGS = ("Hydra flags: -m (--multirun) runs every combination of comma-separated values; --cfg job prints the "
               "composed config;\n--info, --shell-completion and --hydra-help as for any Hydra app.")


def hydra_quote(value: str) -> str:
    """`value` as a single-quoted string of Hydra's override grammar: the backslashes before a quote (or the closing
    quote) doubled, each quote escaped, `${` escaped (a literal, not an interpolation)."""
    quoted = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", value)
    quoted = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, quoted).replace("${", "\\${")
    return f"'{quoted}'"


def is_bare(arg: str) -> bool:
    """Whether `arg` is a positional value: no `=`, no leading `-` (a lone `-`, standard input, is a value)."""
    return arg == "-" or ("=" not in arg and not arg.startswith("-"))


def positional_override(key: str, argv: Sequence[str]) -> list[str]:
    """`argv` with its leading bare arguments (is_bare: those before the first override or flag) made one override
    `key=['a','b',...]`, each value quoted for Hydra (hydra_quote); `argv` unchanged when it has none."""
    argv = list(argv)
    n = next((i for i, a in enumerate(argv) if not is_bare(a)), len(argv))
    if n == 0:
        return argv
    return [f"{key}=[{','.join(hydra_quote(a) for a in argv[:n])}]", *argv[n:]]


def flags_first(argv: Sequence[str]) -> list[str]:
    """`argv` in the order Hydra's parser takes (its overrides in one run): the flags with their arguments first
    (HYDRA_FLAG_ARGS; a bare `--info` made `--info all`, its default), then the overrides in their order
    (`a.json -m json=true,false` -> `-m a.json json=true,false`)."""
    flags: list[str] = []
    overrides: list[str] = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if not arg.startswith("-") or arg == "-":
            overrides.append(arg)
            continue
        flags.append(arg)
        takes = HYDRA_FLAG_ARGS.get(arg)
        if takes == "one" and args:
            flags.append(args.pop(0))
        elif takes == "optional":
            flags.append(args.pop(0) if args and args[0] in HYDRA_INFO else "all")
    return [*flags, *overrides]


def compose_config(config_name: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The config `config_name` with overrides, composed and checked (pcr_ray.configs), as plain dicts."""
    return configs.to_plain(configs.compose(config_name, overrides))


def help_text(config_name: str, usage: str, overrides: Sequence[str] = ()) -> str:
    """A command's `--help`: its usage, Hydra's flags and the config composed with the overrides given."""
    try:
        config = OmegaConf.to_yaml(compose_config(config_name, overrides))
    except Exception as exc:  # noqa: BLE001  (help still prints when the config does not compose)
        config = f"(cannot compose the config: {exc})\n"
    return f"{usage.rstrip()}\n\n{HYDRA_FLAGS}\n\nconfig (conf/{config_name}.yaml):\n{config}"


def is_config_error(exc: BaseException) -> bool:
    """Whether `exc` says the configuration is bad (a schema, override or composition error)."""
    return isinstance(exc, configs.ConfigError) or type(exc).__module__.startswith(("hydra", "omegaconf"))


def bad_configuration(name: str, exc: BaseException) -> int:
    """Print Hydra's or the schema's message (with Hydra's hint line, when it has one) as `bad configuration`; 2."""
    lines = [ln for ln in str(exc).splitlines() if ln.strip()][:2]
    print(f"pcr-ray {name}: bad configuration: " + "\n  ".join(lines), file=sys.stderr)
    return 2


def run_job(name: str, config_name: str, cfg: DictConfig, run: Job) -> int:
    """One job of a command: check `cfg` against the schema of `config_name`, run it; its exit status."""
    try:
        checked = configs.check(config_name, cfg)
        rc = run(checked)
    except configs.ConfigError as exc:
        return bad_configuration(name, exc)
    except RUNTIME_ERRORS as exc:
        print(f"pcr-ray {name}: error: {exc}", file=sys.stderr)
        return 1
    return rc if isinstance(rc, int) else 0


def run_hydra(name: str, config_name: str, argv: Sequence[str], run: Job, usage: str) -> int:
    """`pcr-ray NAME ARGV` as a Hydra app over conf/<config_name>.yaml running `run`; the exit status."""
    argv = list(argv)
    if any(a in ("-h", "--help") for a in argv):
        print(help_text(config_name, usage, [a for a in argv if not a.startswith("-")]))
        return 0
    statuses: list[int] = []
    started: list[bool] = []

    def job(cfg: DictConfig) -> None:
        started.append(True)
        statuses.append(run_job(name, config_name, cfg, run))

    job.__module__ = config_name  # Hydra names the job (hydra.job.name, its log file) after the task's module
    app = hydra.main(config_path=str(conf_dir()), config_name=config_name, version_base="1.3")(job)
    saved_argv, saved_full_error = sys.argv, os.environ.get("HYDRA_FULL_ERROR")
    completing = any(a in ("-sc", "--shell-completion") or a.startswith("--shell-completion=") for a in argv)
    sys.argv = ["pcr-ray" if completing else f"pcr-ray {name}", *argv]  # Hydra's script completes `pcr-ray`
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises its errors (rather than printing a traceback): see below
    try:
        app()
    except SystemExit as exc:  # Hydra's own argument parser: an unknown flag, --hydra-help
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 2
        return int(exc.code or 0)
    except Exception as exc:
        if is_config_error(exc) or (isinstance(exc, ValueError) and not started):  # before any job: Hydra's
            return bad_configuration(name, exc)                                    # flags or overrides
        raise
    finally:
        sys.argv = saved_argv
        if saved_full_error is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = saved_full_error
    return max(statuses, default=0)


@dataclass(frozen=True)
class HydraCommand:
    """`pcr-ray NAME [key=value ...]`: a Hydra app over conf/<config_name>.yaml whose jobs run `run`.

    `preset` overrides go before the user's (demo: experiment=demo); `positional` names the list key that the
    leading bare arguments fill (verify: traces; positional_override); `teardown` runs once the app has finished
    (evaluate: stop the Ray that every run of a sweep shared)."""

    name: str
    config_name: str
    run: Job
    usage: str
    preset: tuple[str, ...] = ()
    teardown: Callable[[], Any] | None = None
    positional: str | None = None

    def __call__(self, argv: Sequence[str] | None = None) -> int:
        given = list(sys.argv[1:] if argv is None else argv)
        if self.positional:
            given = flags_first(positional_override(self.positional, given))
        args = [*self.preset, *given]
        try:
            return run_hydra(self.name, self.config_name, args, self.run, self.usage)
        finally:
            if self.teardown is not None:
                self.teardown()


def hydra_command(name: str, config_name: str, run: Job, usage: str, *, preset: Sequence[str] = (),
                  teardown: Callable[[], Any] | None = None, positional: str | None = None) -> HydraCommand:
    """The `main(argv) -> int` of `pcr-ray NAME [ARG ...] [key=value ...]` (HydraCommand)."""
    return HydraCommand(name, config_name, run, usage, tuple(preset), teardown, positional)
