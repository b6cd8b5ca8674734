"""Acc@1 of the search methods side by side (pcr_ray.bench.search_methods, whose --help lists the options), run
from the checkout: with PCR_RAY_BENCH_RESULTS=1 the summary also goes to benchmarks/results/NAME.json.

    .venv/bin/python benchmarks/bench_search_methods.py [--physics 30] [--gsm8k 20] [--beam 2] [--oracle] ...
"""

from __future__ import annotations

import os
import sys

from _machine import RESULTS

from pcr_ray.bench.search_methods import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], results_dir=RESULTS if os.environ.get("PCR_RAY_BENCH_RESULTS") == "1" else None))
