"""`pcr-ray summarize dir=MULTIRUN_DIR`: merge the metrics of every run of a Hydra sweep into one table and plot.

Each run folder holds metrics.json and .hydra/overrides.yaml; the overrides that differ between runs are the
sweep axes. Writes summary.csv, summary.md, summary.json and summary.html (with the accuracy-vs-axis plot,
beam width preferred) into the multirun folder. Every row carries its run's givens mode (metrics.json `givens`);
the tables and plots name a run on the gold trace's givens "oracle givens".
"""

from __future__ import annotations

import base64
import csv
import html
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig

from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.pipeline.metrics import ORACLE_GIVENS
from pcr_ray.pipeline.report import plot_sweep, plot_sweep_bars
from pcr_ray.pipeline.stats import paired_comparisons, paired_table

GIVENS_AXIS = "pipeline.givens"  # a sweep over it: the givens parser's cost, extract against oracle givens
PREFERRED_X = ("search.beam_width", "search.verifier_coverage", "search.threshold", "search.k")


def _overrides(run_dir: Path) -> dict[str, str]:
    p = run_dir / ".hydra" / "overrides.yaml"
    if not p.exists():
        return {}

    items = yaml.safe_load(p.read_text()) or []
    out = {}
    for it in items:
        k, _, v = str(it).partition("=")
        out[k.lstrip("+~")] = v
    return out


def _num(v: Any) -> Any:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return v
    return int(f) if f.is_integer() and "." not in str(v) else f


def collect(multirun_dir: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per (run, method) and the sweep axes (override keys whose values differ between runs)."""
    root = Path(multirun_dir)
    runs = sorted({p.parent for p in root.rglob("metrics.json")})
    if not runs:
        raise FileNotFoundError(f"no metrics.json under {root}: is it a `pcr-ray evaluate -m` output folder?")
    ovs = {r: _overrides(r) for r in runs}
    keys = sorted({k for o in ovs.values() for k in o})
    axes = [k for k in keys if len({o.get(k) for o in ovs.values()}) > 1]
    rows = []
    for r in runs:
        m = json.loads((r / "metrics.json").read_text())
        for method, d in m.get("methods", {}).items():
            row: dict[str, Any] = {"run": str(r.relative_to(root)) if r != root else ".", "method": method,
                                   "givens": m.get("givens")}  # extract | gold (oracle) | None: not recorded
            for k in axes:
                row[k] = _num(ovs[r].get(k))
            row.update({
                "n": d["n"], "acc": d["acc"], "acc_lo": d["acc_ci95"][0], "acc_hi": d["acc_ci95"][1],
                "silent_failure_rate": d["silent_failure_rate"],
                "silent_failure_rate_long": d.get("silent_failure_rate_long"),
                "silent_failure_rate_short": d.get("silent_failure_rate_short"),
                "mean_candidates": d.get("mean_candidates"), "mean_prm_calls": d.get("mean_prm_calls"),
                "mean_time_s": d.get("mean_time_s"),
            })
            rows.append(row)
    return rows, axes


def _givens_shown(mode: Any) -> str:
    """A run's givens mode as the tables show it: "oracle givens" for gold, "extracted" for extract."""
    return {"gold": ORACLE_GIVENS, "extract": "extracted"}.get(str(mode), "-" if mode is None else str(mode))


def _labelled(r: dict[str, Any], key: str) -> str:
    """A row's value of `key` as the tables and plots show it (the method of an oracle-givens run says so)."""
    if key in ("givens", GIVENS_AXIS):
        return _givens_shown(r.get(key))
    if key == "method" and r.get("givens") == "gold":
        return f"{r['method']} ({ORACLE_GIVENS})"
    return _fmt(r.get(key))


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def to_markdown(rows: Sequence[dict[str, Any]], axes: Sequence[str]) -> str:
    """The merged table in markdown."""
    cols = list(axes) + ["method", "givens", "n", "acc", "acc_lo", "acc_hi", "silent_failure_rate",
                         "silent_failure_rate_long", "silent_failure_rate_short", "mean_candidates", "mean_prm_calls"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in sorted(rows, key=lambda r: tuple(str(r.get(a)) for a in axes) + (r["method"],)):
        lines.append("| " + " | ".join(_labelled(r, c) for c in cols) + " |")
    return "\n".join(lines)


def paired_across_runs(root: Path) -> dict[str, Any]:
    """Paired comparisons of the (run, method) cells of a sweep that share a run or a method, from each run's
    results.parquet (per-problem correctness); {} when no run has one."""
    import pyarrow.parquet as pq  # heavy: pyarrow

    rows: list[dict[str, Any]] = []
    for r in sorted({p.parent for p in root.rglob("results.parquet")}):
        run = str(r.relative_to(root)) if r != root else "."
        metrics = r / "metrics.json"
        if metrics.exists() and json.loads(metrics.read_text()).get("givens") == "gold":
            run += f" ({ORACLE_GIVENS})"
        for row in pq.read_table(r / "results.parquet", columns=["problem_id", "method", "correct"]).to_pylist():
            rows.append({**row, "method": f"{run}:{row['method']}"})
    cells = list(dict.fromkeys(r["method"] for r in rows))
    out = {}
    for key, d in paired_comparisons(rows, cells).items():
        (run_a, meth_a), (run_b, meth_b) = d["a"].split(":", 1), d["b"].split(":", 1)
        if run_a == run_b or meth_a == meth_b:
            out[key] = d
    return out


def summarize(multirun_dir: str | Path, x_key: str | None = None) -> dict[str, Path]:
    """Write summary.{csv,md,json,html} (and summary.png when an axis is numeric); returns the paths."""
    root = Path(multirun_dir)
    rows, axes = collect(root)
    out: dict[str, Path] = {}
    cols = list(dict.fromkeys(k for r in rows for k in r))
    with open(root / "summary.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    out["csv"] = root / "summary.csv"
    md = to_markdown(rows, axes)
    paired = paired_across_runs(root)
    if paired:
        md += ("\n\n## Paired comparisons\n\nEvery two (run, method) cells that share a run or a method, on the "
               "problems both ran: discordant counts, exact McNemar p-value, bootstrap interval of the difference "
               "(pcr_ray/pipeline/stats.py).\n\n" + paired_table(paired))
    (root / "summary.md").write_text(md + "\n")
    out["md"] = root / "summary.md"
    (root / "summary.json").write_text(json.dumps({"axes": axes, "rows": rows, "paired": paired}, indent=2))
    out["json"] = root / "summary.json"
    numeric = [a for a in axes if all(isinstance(r.get(a), (int, float)) for r in rows)]
    x = x_key or next((k for k in PREFERRED_X if k in numeric), numeric[0] if numeric else None)
    img = ""
    if x is not None:
        others = [a for a in axes if a != x]
        pts = [{x: r[x], "method": _labelled(r, "method"), "acc": r["acc"],
                "series": ",".join(f"{a.split('.')[-1]}={r.get(a)}" for a in others)} for r in rows]
        b64 = plot_sweep(pts, x, f"Accuracy vs {x}")
        (root / "summary.png").write_bytes(base64.b64decode(b64))
        out["png"] = root / "summary.png"
        img = f'<img alt="accuracy vs {html.escape(x)}" src="data:image/png;base64,{b64}">'
    elif axes:  # only categorical axes (e.g. prm=minilm_csp,minilm_random): grouped bars over the first
        key = axes[0]
        by_givens = key == GIVENS_AXIS  # the bars' labels say which is the oracle
        pts = [{key: _labelled(r, key) if by_givens else r[key],
                "method": r["method"] if by_givens else _labelled(r, "method"), "acc": r["acc"]} for r in rows]
        b64 = plot_sweep_bars(pts, key, f"Accuracy by {key}")
        (root / "summary.png").write_bytes(base64.b64decode(b64))
        out["png"] = root / "summary.png"
        img = f'<img alt="accuracy by {html.escape(key)}" src="data:image/png;base64,{b64}">'
    table = "".join("<tr>" + "".join(f"<td>{html.escape(_labelled(r, c))}</td>" for c in cols) + "</tr>"
                    for r in rows)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    (root / "summary.html").write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>sweep summary</title><style>'
        f"body{{font-family:sans-serif;margin:20px}}td,th{{border:1px solid #ccc;padding:3px 6px;font-size:12px}}"
        f"table{{border-collapse:collapse}}</style></head><body><h1>Sweep summary: {html.escape(str(root))}</h1>"
        f'{img}<table id="summary"><tr>{head}</tr>{table}</table></body></html>')
    out["html"] = root / "summary.html"
    return out


USAGE = """usage: pcr-ray summarize dir=MULTIRUN_DIR [x=KEY]

""" + __doc__.split("\n\n")[1] + """

e.g.  pcr-ray summarize dir=multirun/evaluate/2026-11-29_12-00-00
      pcr-ray summarize dir=multirun/evaluate/2026-11-29_12-00-00 x=search.threshold"""


def run(cfg: DictConfig) -> int:
    """`pcr-ray summarize`: write the summary files and print the table and their paths."""
    paths = summarize(cfg.dir, cfg.x)
    print(paths["md"].read_text())
    for k, p in paths.items():
        print(f"{k}: {p}")
    return 0


main = hydra_command("summarize", "summarize", run, USAGE)


if __name__ == "__main__":
    sys.exit(main())
