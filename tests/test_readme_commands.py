"""Every Hydra-app command line the READMEs show composes with its config: a renamed key fails here, not on a
user's cluster. (The commands are composed, not run: most of them take hours.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pcr_ray.pipeline.make_pairs import compose_config

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {"make-pairs": "make_pairs", "train-prm": "train_prm", "mine-pairs": "mine_pairs", "eval-prm": "eval_prm",
           "evaluate": "evaluate", "serve": "serve", "data": "data"}


def readme_commands() -> list[tuple[str, str, list[str]]]:
    """(file, command, overrides) of each `pcr-ray <hydra app> ...` line in a bash block of the READMEs; a sweep
    (`-m`, `key=a,b`) is composed at its first point."""
    found = []
    for name in ("README.md", "cluster/README.md"):
        for block in re.findall(r"```bash\n(.*?)```", (ROOT / name).read_text(), re.S):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                words = shlex.split(line, comments=True)
                if len(words) < 2 or words[0] != "pcr-ray" or words[1] not in CONFIGS:
                    continue
                args = words[3:] if words[1] == "data" and words[2:3] == ["build"] else words[2:]
                if "-m" in args:
                    args = [re.sub(r"^([^=]+=)([^,\[{]+),.*$", r"\1\2", a) for a in args if a != "-m"]
                found.append((name, words[1], args))
    return found


COMMANDS = readme_commands()


def test_the_readmes_show_the_commands_this_test_checks() -> None:
    shown = {c for _, c, _ in COMMANDS}
    assert shown == set(CONFIGS), f"no README line for {set(CONFIGS) - shown}"
    assert len(COMMANDS) >= 40


@pytest.mark.parametrize(("readme", "command", "overrides"), COMMANDS,
                         ids=[f"{c}:{' '.join(o)[:60]}" for _, c, o in COMMANDS])
def test_readme_command_composes(readme, command, overrides) -> None:
    try:
        compose_config(CONFIGS[command], overrides)
    except Exception as exc:  # noqa: BLE001  (hydra's override and composition errors)
        pytest.fail(f"{readme}: `pcr-ray {command} {shlex.join(overrides)}` does not compose: {exc}")
