"""The first-error benchmark (pcr_ray.bench.first_error; docs/first_error_bench.md) run from the checkout, where
`--results` also writes benchmarks/results/<name>.json.

    .venv/bin/python benchmarks/bench_first_error.py [--physics 400] [--gsm8k 400] [--seed 0] [--results]
"""

from __future__ import annotations

import sys

from _machine import RESULTS

from pcr_ray.bench.first_error import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], results_dir=RESULTS))
