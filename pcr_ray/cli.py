"""The `pcr-ray` command line: a thin dispatcher; each subcommand lives in its own module as main(argv) -> int."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from importlib.metadata import version

from pcr_ray import logs
from pcr_ray.commands import completion

# name -> (module:function, one-line help). Every command is a Hydra app (pcr_ray.commands.hydra_app) taking
# `key=value` overrides after its arguments.
COMMANDS: dict[str, tuple[str, str]] = {
    "verify": ("pcr_ray.commands.core:verify_main", "verify trace JSON files (`-`: standard input), print verdicts"),
    "schema": ("pcr_ray.commands.core:schema_main", "print the JSON Schema of a trace (or, step=true, of one step)"),
    "primitives": ("pcr_ray.commands.core:primitives_main",
                   "list the registered primitives (markdown=true for the docs)"),
    "data": ("pcr_ray.data.build:main", "build problem parquet files: `pcr-ray data build [overrides]`"),
    "make-pairs": ("pcr_ray.pipeline.make_pairs:main", "make PRM training pairs from gold traces with Ray Data"),
    "mine-pairs": ("pcr_ray.pipeline.mine_pairs:main", "mine answer-timing negatives with a PRM"),
    "train-prm": ("pcr_ray.pipeline.train_prm:main", "train the PRM with Ray Train"),
    "sft": ("pcr_ray.sft.command:main", "fine-tune a generator on gold traces with Ray Train"),
    "eval-prm": ("pcr_ray.pipeline.eval_prm:main", "pairwise accuracy and AUROC of a PRM checkpoint"),
    "listwise-rounds": ("pcr_ray.pipeline.listwise_rounds:main",
                        "the listwise PRM recipe end to end: pairs, mined rounds, benchmark"),
    "average-prm": ("pcr_ray.prm.average:main", "average PRM checkpoints' weights into one (a model soup)"),
    "solve": ("pcr_ray.solve:main", "solve one problem text with the configured generator and method"),
    "evaluate": ("pcr_ray.evaluate:main", "the main job: Ray Data evaluation pipeline (-m to sweep)"),
    "plan": ("pcr_ray.pipeline.plan:main", "an evaluation's actors against a cluster shape: what fits"),
    "prefetch": ("pcr_ray.pipeline.prefetch:main", "fetch every model an evaluation will load, once, before it runs"),
    "summarize": ("pcr_ray.pipeline.summarize:main", "merge the metrics of a Hydra multirun folder"),
    "serve": ("pcr_ray.serve.deploy:main", "start the Ray Serve scoring endpoint"),
    "demo": ("pcr_ray.demo:main", "the demo: a small local evaluation of every method"),
    "reproduce": ("pcr_ray.pipeline.reproduce:main", "each claim of the paper measured beside its number"),
}


def usage() -> str:
    lines = ["usage: pcr-ray COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<15} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "`pcr-ray COMMAND --help` shows a command's help; `pcr-ray --version` the version.",
              "Every command is a Hydra app: key=value overrides after its arguments, -m to sweep comma-separated",
              "values, --cfg job to print its config."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if argv[0] in ("-V", "--version"):
        print(f"pcr-ray {version('pcr_ray')}")
        return 0
    if completion.is_completion(argv):
        return completion.shell_completion(argv, list(COMMANDS), load)
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"pcr-ray: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    logs.setup()  # the library's progress and warnings on stderr (a Hydra app switches to its job logging)
    try:
        fn = load(name)
    except ImportError as exc:
        print(f"pcr-ray {name}: cannot import {COMMANDS[name][0]}: {exc}. Is the package installed with its extras "
              f"(`make venv`)?", file=sys.stderr)
        return 2
    rc = fn(rest)
    return int(rc or 0)


def load(name: str) -> Callable[[list[str]], int]:
    """The main(argv) -> int of the command `name` (its module imported)."""
    module, _, func = COMMANDS[name][0].partition(":")
    return getattr(importlib.import_module(module), func)


if __name__ == "__main__":
    sys.exit(main())
