"""Data throughput on one core: GSM8K train annotation -> trace conversion, physics problem generation,
and rule-based givens extraction. Writes <cache>/bench/bench_data.json
(benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

Run: .venv/bin/python benchmarks/bench_data.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

from _machine import add_dry_run, dry_run, write_result

from pcr_ray.core.verifier import verify
from pcr_ray.data.givens import RuleBasedExtractor
from pcr_ray.data.gsm8k_traces import conversion_stats, convert_gsm8k
from pcr_ray.data.physics import TEMPLATES, generate_problems
from pcr_ray.paths import data_dir


def _machine() -> dict:
    try:
        import torch

        torch_v = torch.__version__
    except Exception:  # noqa: BLE001 - torch is optional for this benchmark
        torch_v = None
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "python": sys.version.split()[0], "torch": torch_v, "cores_used": 1}


def _timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1,000 GSM8K rows and 2,000 physics problems")
    add_dry_run(ap)
    args = ap.parse_args(argv)
    quick = args.quick
    path = data_dir() / "gsm8k" / "train.jsonl"
    if args.dry_run:
        return dry_run(__file__, {**vars(args), "gsm8k_train": str(path), "found": path.exists()})
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    if not path.exists():
        print(f"GSM8K train not found at {path} (set PCR_RAY_DATA)", file=sys.stderr)
        return 1
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    if quick:
        rows = rows[:1000]
    convert_gsm8k(rows[0]["question"], rows[0]["answer"])  # warm caches (unit parsing)
    results, t_conv = _timed(lambda: [convert_gsm8k(r["question"], r["answer"]) for r in rows])
    _, t_plain = _timed(lambda: [convert_gsm8k(r["question"], r["answer"], implicit=False) for r in rows])
    stats = conversion_stats(results)
    n_phys = 2000 if quick else 10000
    generate_problems(len(TEMPLATES), seed=123)  # warm
    probs, t_gen = _timed(generate_problems, n_phys, 0)
    _, t_ver = _timed(lambda: [verify(p.gold_trace) for p in probs])
    ex = RuleBasedExtractor()
    texts = [r["question"] for r in rows] + [p.text for p in probs]
    _, t_ext = _timed(lambda: [ex.extract(t) for t in texts])
    res = {
        "benchmark": "bench_data",
        "machine": _machine(),
        "gsm8k_train": {"problems": len(rows), "seconds": t_conv, "problems_per_s": len(rows) / t_conv,
                        "conversion_rate": stats.rate, "converted": stats.converted,
                        "annotations_only_problems_per_s": len(rows) / t_plain,
                        "implicit_equations_cost_ratio": t_conv / t_plain},
        "physics_generation": {"problems": n_phys, "templates": len(TEMPLATES), "seconds": t_gen,
                               "problems_per_s": n_phys / t_gen, "verify_problems_per_s": n_phys / t_ver,
                               "generate_vs_verify_time_ratio": t_gen / t_ver},
        "givens_extraction": {"texts": len(texts), "texts_per_s": len(texts) / t_ext},
    }
    write_result("bench_data", res)
    g = res["gsm8k_train"]
    print(f"GSM8K train conversion: {g['problems_per_s']:.0f} problems/s on one core "
          f"({stats.rate:.1%} converted; annotations only: {g['annotations_only_problems_per_s']:.0f}/s)")
    print(f"physics generation:     {res['physics_generation']['problems_per_s']:.0f} problems/s "
          f"(verifying them: {res['physics_generation']['verify_problems_per_s']:.0f}/s)")
    print(f"givens extraction:      {res['givens_extraction']['texts_per_s']:.0f} texts/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
