"""`pcr-ray demo` (`make demo`): the main job on the embedded default, every method side by side.

Local Ray; 30 generated physics problems and 20 GSM8K test problems; the symbolic enumerator for the search
methods and SmolLM2-135M (llama.cpp) for the LLM baselines; a MiniLM PRM trained on CSP pairs when no
checkpoint is cached (then reused). Ends by printing the metrics table and the path of report.html.
Extra `key=value` arguments are Hydra overrides on top of experiment=demo.
"""

from __future__ import annotations

import json
import os
import sys
import time

from omegaconf import DictConfig

from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.evaluate import evaluate, shutdown_ray
from pcr_ray.pipeline.metrics import error_table, givens_line, markdown_table, template_split_table
from pcr_ray.pipeline.stats import paired_table


def run_demo(cfg: DictConfig) -> None:
    """The demo's job: the evaluation, then its tables."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    t0 = time.time()
    out = evaluate(cfg)
    m = json.loads((out / "metrics.json").read_text())
    print()
    print(f"pcr_ray demo: {m['n_problems']} problems, {len(m['methods'])} methods, {time.time() - t0:.0f} s")
    print(f"grading: {m.get('grading', 'default')}")
    print(givens_line(m))
    print(markdown_table(m))
    if template_split_table(m):
        print("\nGenerated physics by template split (unseen: held-out templates no learned part trained on):")
        print(template_split_table(m))
    print()
    print("Wrong answers by error type:")
    print(error_table(m))
    print()
    print("Paired comparisons (the same problems; exact McNemar test, bootstrap interval of the difference):")
    print(paired_table(m["paired"]))
    print()
    print(f"results: {out / 'results.parquet'}")
    print(f"report:  {out / 'report.html'}")


main = hydra_command("demo", "evaluate", run_demo, __doc__, preset=("experiment=demo",), teardown=shutdown_ray)


if __name__ == "__main__":
    sys.exit(main())
