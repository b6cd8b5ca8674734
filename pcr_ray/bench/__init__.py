"""Benchmarks that installed commands run (`python -m pcr_ray.bench.NAME`); benchmarks/ holds the others.

- `first_error`: the first-error benchmark (`pcr-ray reproduce`'s first_error step);
- `search_methods`: Acc@1 of the search methods side by side (`pcr-ray listwise-rounds`' last step);
- `records`: the machine, the git revision and where a benchmark's summary and records are written;
- `dry_run`: what every benchmark's `--dry-run` does (its imports resolve, its plan printed, nothing run).
"""
