"""Tab completion of `pcr-ray COMMAND key=...`: Hydra's shell completion, routed to the command COMP_LINE names.

`eval "$(pcr-ray -sc install=bash)"` installs Hydra's completion script for the `pcr-ray` executable; on <Tab>
the script runs `pcr-ray -sc query=bash` with the line typed so far in COMP_LINE. The first word completes to
a command name; after it, a command built by `hydra_command` completes its config's keys and values (the command
word taken out of COMP_LINE, as Hydra expects one program word before the overrides).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import Any

from pcr_ray.commands.hydra_app import HydraCommand, hydra_command

FLAGS = ("-sc", "--shell-completion")


def is_completion(argv: Sequence[str]) -> bool:
    """Whether `pcr-ray ARGV` asks for shell completion (`-sc install=bash`, `-sc query=bash`, ...)."""
    return bool(argv) and (argv[0] in FLAGS or argv[0].startswith("--shell-completion="))


def shell_completion(argv: Sequence[str], names: Sequence[str], load: Callable[[str], Any]) -> int:
    """Answer `pcr-ray -sc ACTION`: install/uninstall print Hydra's script for `pcr-ray`; a query completes the
    command name, then the named command's overrides (`load(name)` is its main)."""
    action = argv[0].partition("=")[2] if "=" in argv[0] else (argv[1] if len(argv) > 1 else "")
    if not action.startswith("query"):
        return hydra_command("", "data", lambda cfg: 0, "")(["-sc", action])  # any config: the script is the same
    line = os.environ.get("COMP_LINE", "")
    m = re.match(r"\s*(\S+)\s+(\S+)(\s.*)?$", line, re.S)
    if m is None or m.group(3) is None:  # still typing the command's name
        print(" ".join(names))
        return 0
    command = load(m.group(2)) if m.group(2) in names else None
    if not isinstance(command, HydraCommand):
        return 0
    os.environ["COMP_LINE"] = m.group(1) + m.group(3)
    return command(["-sc", action])
