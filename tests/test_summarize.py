"""`pcr-ray summarize` over a sweep's run folders (written here, no Ray): the givens axis and the oracle label."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pcr_ray.pipeline.metrics import compute_metrics
from pcr_ray.pipeline.summarize import summarize


def _run(root: Path, name: str, givens: str, correct: dict[str, list[bool]]) -> None:
    """A run folder as `pcr-ray evaluate -m ... pipeline.givens=<givens>` leaves it (the parts summarize reads)."""
    run = root / name
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(f"- experiment=smoke\n- pipeline.givens={givens}\n")
    rows = [{"problem_id": f"p{i}", "method": m, "correct": c, "answered": True, "horizon": "short",
             "source": "physics", "silent_failure": not c, "error_type": "" if c else "unit"}
            for m, cs in correct.items() for i, c in enumerate(cs)]
    (run / "metrics.json").write_text(json.dumps(compute_metrics(rows, list(correct), {"givens": givens})))
    pq.write_table(pa.Table.from_pylist([{k: r[k] for k in ("problem_id", "method", "correct")} for r in rows]),
                   run / "results.parquet")


def test_a_sweep_over_givens_puts_extract_beside_oracle_and_pairs_them(tmp_path):
    _run(tmp_path, "0_pipeline.givens=extract", "extract", {"nsprm": [True, False, False, False] * 3})
    _run(tmp_path, "1_pipeline.givens=gold", "gold", {"nsprm": [True, True, True, False] * 3})
    paths = summarize(tmp_path)
    with open(paths["csv"]) as fh:
        table = {r["pipeline.givens"]: r for r in csv.DictReader(fh)}
    assert {g: r["givens"] for g, r in table.items()} == {"extract": "extract", "gold": "gold"}  # raw, per run
    assert float(table["gold"]["acc"]) == 0.75 and float(table["extract"]["acc"]) == 0.25
    md = paths["md"].read_text()
    lines = [line for line in md.splitlines() if "| nsprm" in line]
    assert len(lines) == 2
    oracle = [line for line in lines if "oracle givens" in line]
    assert len(oracle) == 1 and "nsprm (oracle givens)" in oracle[0] and "| 0.750 |" in oracle[0]
    assert "extracted" in next(line for line in lines if line not in oracle)
    # the paired comparison of the same method on the same problems, the oracle run named as such
    pair = next(line for line in md.split("## Paired comparisons")[1].splitlines() if ":nsprm vs " in line)
    assert "(oracle givens):nsprm" in pair and "0_pipeline.givens=extract:nsprm" in pair
    assert "oracle givens" in paths["html"].read_text() and paths["png"].stat().st_size > 1000
