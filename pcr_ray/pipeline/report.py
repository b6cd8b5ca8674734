"""report.html: one self-contained page (inline CSS, plots as base64 PNG) with the metrics table, plots and traces."""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pcr_ray.pipeline.metrics import (
    ERROR_TYPES,
    GIVENS_NOTES,
    ORACLE_GIVENS,
    TABLE_COLUMNS,
    TEMPLATE_SPLIT_COLUMNS,
    extraction_note,
    method_label,
    oracle_givens,
    table_rows,
    template_split_rows,
)

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.plots img{max-width:560px;margin:6px;border:1px solid #eee}
details{border:1px solid #ddd;border-radius:4px;margin:4px 0;padding:4px 8px}
summary{cursor:pointer;font-size:13px}.ok{color:#187a2f}.bad{color:#b3261e}.warn{color:#a05a00}
.q{white-space:pre-wrap;background:#fafafa;padding:6px;font-size:13px}
.steps td{text-align:left;font-family:ui-monospace,monospace;font-size:12px}
.meta{color:#666;font-size:12px}code{font-size:12px}
.banner{background:#fff4e5;border:2px solid #a05a00;border-radius:4px;padding:8px 12px;margin:8px 0}
"""


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt  # heavy: matplotlib

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _plt() -> Any:
    import matplotlib  # heavy: matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # heavy: matplotlib

    return plt


def plot_accuracy(metrics: Mapping[str, Any]) -> str:
    """Acc@1 per method with 95% intervals; base64 PNG."""
    plt = _plt()
    ms = list(metrics["methods"])
    acc = [100 * (metrics["methods"][m]["acc"] or 0) for m in ms]
    lo = [a - 100 * metrics["methods"][m]["acc_ci95"][0] for a, m in zip(acc, ms, strict=True)]
    hi = [100 * metrics["methods"][m]["acc_ci95"][1] - a for a, m in zip(acc, ms, strict=True)]
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar(ms, acc, yerr=[lo, hi], capsize=3, color="#4c72b0")
    ax.set_ylabel("Acc@1 (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Accuracy by method (95% CI)")
    ax.tick_params(axis="x", rotation=30)
    return _png(fig)


def plot_error_types(metrics: Mapping[str, Any]) -> str:
    """Stacked error-type counts per method; base64 PNG."""
    plt = _plt()
    ms = list(metrics["methods"])
    types = [t for t in ERROR_TYPES if any(metrics["methods"][m]["error_types"].get(t) for m in ms)]
    fig, ax = plt.subplots(figsize=(6, 3))
    bottom = [0.0] * len(ms)
    for t in types:
        vals = [metrics["methods"][m]["error_types"].get(t, 0) for m in ms]
        ax.bar(ms, vals, bottom=bottom, label=t)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_ylabel("wrong answers")
    ax.set_title("Error types")
    ax.tick_params(axis="x", rotation=30)
    if types:
        ax.legend(fontsize=7, ncols=2)
    return _png(fig)


def plot_horizon(metrics: Mapping[str, Any]) -> str:
    """Silent-failure rate per method, short vs long horizon; base64 PNG."""
    plt = _plt()
    ms = list(metrics["methods"])
    x = list(range(len(ms)))
    fig, ax = plt.subplots(figsize=(6, 3))
    for off, h, color in ((-0.2, "short", "#55a868"), (0.2, "long", "#c44e52")):
        vals = [100 * (metrics["methods"][m]["by_horizon"][h]["silent_failure_rate"] or 0) for m in ms]
        ax.bar([i + off for i in x], vals, width=0.4, label=f"{h} (n={metrics['methods'][ms[0]]['by_horizon'][h]['n']})"
               if ms else h, color=color)
    ax.set_xticks(x, ms, rotation=30)
    ax.set_ylabel("silent failures (%)")
    ax.set_title("Silent failures by horizon (gold trace < 5 vs 5+ steps)")
    ax.legend(fontsize=8)
    return _png(fig)


def plot_sweep(points: Sequence[Mapping[str, Any]], x_key: str, title: str = "") -> str:
    """Accuracy vs a swept parameter (one line per method, and per other swept value); base64 PNG.

    `points`: [{x_key: value, 'method': m, 'acc': a, 'series': label}] ('series' optional).
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.4))
    series: dict[str, list[tuple[float, float]]] = {}
    for p in points:
        label = str(p["method"]) + (f" {p['series']}" if p.get("series") else "")
        series.setdefault(label, []).append((float(p[x_key]), 100 * float(p["acc"] or 0)))
    for label, pts in sorted(series.items()):
        pts.sort()
        ax.plot([a for a, _ in pts], [b for _, b in pts], marker="o", label=label)
    ax.set_xlabel(x_key)
    ax.set_ylabel("Acc@1 (%)")
    ax.set_ylim(0, 100)
    if len({p[x_key] for p in points}) > 2 and all(float(p[x_key]) > 0 for p in points):
        ax.set_xscale("log", base=2)
    ax.set_title(title or f"Accuracy vs {x_key}")
    ax.legend(fontsize=7)
    return _png(fig)


def plot_lines(series: Mapping[str, Sequence[tuple[float, float]]], *, xlabel: str, ylabel: str, title: str,
               log2_x: bool = False) -> str:
    """One line per named series of (x, y) points; base64 PNG."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for label, pts in series.items():
        ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=label)
    if log2_x:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    return _png(fig)


def plot_sweep_bars(points: Sequence[Mapping[str, Any]], key: str, title: str = "") -> str:
    """Accuracy per value of a categorical swept parameter (grouped bars, one per method); base64 PNG."""
    plt = _plt()
    values = list(dict.fromkeys(str(p[key]) for p in points))
    methods = list(dict.fromkeys(str(p["method"]) for p in points))
    width = 0.8 / max(1, len(methods))
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for j, m in enumerate(methods):
        acc = {str(p[key]): 100 * float(p["acc"] or 0) for p in points if str(p["method"]) == m}
        ax.bar([i + j * width for i in range(len(values))], [acc.get(v, 0.0) for v in values], width=width, label=m)
    ax.set_xticks([i + width * (len(methods) - 1) / 2 for i in range(len(values))], values, rotation=20)
    ax.set_ylabel("Acc@1 (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title or f"Accuracy by {key}")
    ax.legend(fontsize=7)
    return _png(fig)


def metrics_table_html(metrics: Mapping[str, Any], table_id: str = "metrics") -> str:
    """The metrics table; each cell carries data-col, and numeric cells data-value with the raw number."""
    raw_keys = {"n": "n", "Acc@1 %": "acc", "answered %": "answer_rate", "silent %": "silent_failure_rate",
                "silent long %": "silent_failure_rate_long", "silent short %": "silent_failure_rate_short",
                "cand/problem": "mean_candidates", "PRM calls/problem": "mean_prm_calls", "s/problem": "mean_time_s"}
    head = "".join(f"<th>{html.escape(c)}</th>" for c in TABLE_COLUMNS)
    body = []
    for m, row in zip(metrics["methods"], table_rows(metrics), strict=True):
        cells = []
        for col, text in zip(TABLE_COLUMNS, row, strict=True):
            key = raw_keys.get(col)
            val = metrics["methods"][m].get(key) if key else None
            dv = f' data-value="{val}"' if val is not None else ""
            shown = (f'<a href="#wrong={quote(m)}">{html.escape(text)}</a>' if col == "method" else html.escape(text))
            cells.append(f'<td data-col="{html.escape(col)}"{dv}>{shown}</td>')
        body.append(f'<tr data-method="{html.escape(m)}">' + "".join(cells) + "</tr>")
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def template_split_html(metrics: Mapping[str, Any]) -> str:
    """Generated physics' accuracy on unseen and seen templates (metrics.template_split_rows); '' when none."""
    rows = template_split_rows(metrics)
    if not rows:
        return ""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in TEMPLATE_SPLIT_COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return (f'<h3>Generated physics by template split</h3><table id="template-split"><tr>{head}</tr>{body}</table>'
            '<p class="meta">Unseen templates: held-out template families that no learned part (PRM pairs, '
            "negatives, fine-tune) trained on; seen templates: the training families.</p>")


def _step_text(step: Mapping[str, Any]) -> str:
    args = ", ".join(f"{k}={v}" for k, v in (step.get("args") or {}).items())
    out = step.get("out") or {}
    if isinstance(out, str):
        out = {"name": out, "unit": ""}
    val = f" = {step['value']:.6g}" if isinstance(step.get("value"), (int, float)) else ""
    return f"{out.get('name', '?')} = {step.get('op', '?')}({args}){val} [{out.get('unit', '')}]"


def _loads(s: Any, default: Any) -> Any:
    if not s:
        return default
    try:
        return json.loads(s)
    except (TypeError, ValueError):
        return default


def trace_block(row: Mapping[str, Any]) -> str:
    """One method's result on a problem: answer, stop reason, error type, and its steps with verdict and score."""
    mark = '<span class="ok">correct</span>' if row.get("correct") else (
        '<span class="warn">flagged</span>' if row.get("flagged") else '<span class="bad">wrong</span>')
    answer = html.escape(str(row.get("answer") or "-"))
    stop = html.escape(str(row.get("stop_reason") or "-"))
    head = f"<b>{html.escape(str(row['method']))}</b>: {mark}; answer <code>{answer}</code>; stop <code>{stop}</code>"
    if row.get("grade_reason"):
        head += f'; graded: <span class="meta">{html.escape(str(row["grade_reason"])[:200])}</span>'
    if row.get("error_type"):
        head += f"; error <code>{html.escape(str(row['error_type']))}</code>"
        if row.get("error_detail"):
            head += f' <span class="meta">{html.escape(str(row["error_detail"]))}</span>'
    if row.get("error"):
        head += f'<br><span class="bad">pipeline error: {html.escape(str(row["error"])[:300])}</span>'
    trace = _loads(row.get("trace_json"), {}) or {}
    steps = trace.get("steps") or [] if isinstance(trace, dict) else []
    verdicts = _loads(row.get("step_verdicts"), [])
    scores = _loads(row.get("step_scores"), [])
    lines = []
    for i, st in enumerate(steps):
        v = verdicts[i] if i < len(verdicts) else ""
        s = scores[i] if i < len(scores) else None
        cls = "ok" if v in ("ok", "valid", True) else ("bad" if v else "")
        sc = f"{s:.3f}" if isinstance(s, (int, float)) else "-"
        lines.append(f"<tr><td>{i}</td><td>{html.escape(_step_text(st) if isinstance(st, dict) else str(st))}</td>"
                     f'<td class="{cls}">{html.escape(str(v or "-"))}</td><td>{sc}</td></tr>')
    table = ('<table class="steps"><tr><th>#</th><th>step</th><th>verdict</th><th>PRM</th></tr>'
             + "".join(lines) + "</table>") if lines else ""
    return f'<div class="method" data-method="{html.escape(str(row["method"]))}">{head}{table}</div>'


def traces_html(rows: Sequence[Mapping[str, Any]], methods: Sequence[str], max_problems: int = 300) -> str:
    """<details> per problem (up to max_problems), each holding every method's trace."""
    by_pid: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_pid.setdefault(str(r["problem_id"]), []).append(r)
    order = {m: i for i, m in enumerate(methods)}
    out = []
    for pid in sorted(by_pid)[:max_problems]:
        rs = sorted(by_pid[pid], key=lambda r: order.get(str(r["method"]), 99))
        r0 = rs[0]
        marks = " ".join(f'<span class="{"ok" if r.get("correct") else "bad"}">{html.escape(str(r["method"]))} '
                         f'{"&#10003;" if r.get("correct") else "&#10007;"}</span>' for r in rs)
        gold = html.escape(str(r0.get("gold_answer") or ""))
        errors = sorted({str(r.get("error_type")) for r in rs if not r.get("correct") and r.get("error_type")})
        wrong = [str(r["method"]) for r in rs if not r.get("correct")]
        disagree = len({bool(r.get("correct")) for r in rs}) > 1
        givens = _loads(r0.get("givens_json"), []) or []
        source = str(r0.get("givens_source") or "extracted")
        source = f"gold trace: {ORACLE_GIVENS}" if source == "gold" else source
        given_text = "; ".join(f"{g.get('name')} = {g.get('value')} {g.get('unit', '')}".strip()
                               for g in givens if isinstance(g, dict)) or "(none extracted)"
        out.append(
            f'<details class="problem" data-problem="{html.escape(pid)}" data-errors="{html.escape(" ".join(errors))}" '
            f'data-wrong="{html.escape(" ".join(wrong))}" data-disagree="{int(disagree)}">'
            f'<summary><code>{html.escape(pid)}</code> '
            f'[{html.escape(str(r0.get("horizon")))}] gold <code>{gold}</code> {marks}</summary>'
            f'<div class="q">{html.escape(str(r0.get("question") or ""))}</div>'
            f'<div class="meta">givens ({html.escape(source)}): '
            f"{html.escape(given_text)}</div>"
            + "".join(trace_block(r) for r in rs) + "</details>")
    more = len(by_pid) - max_problems
    if more > 0:
        out.append(f'<p class="meta">{more} more problems are in results.parquet.</p>')
    return "\n".join(out)


FILTER_JS = """
function pcrFilter(){
  var err=document.getElementById('f-error').value, m=document.getElementById('f-wrong').value,
      dis=document.getElementById('f-disagree').checked, shown=0;
  document.querySelectorAll('details.problem').forEach(function(d){
    var ok=(!err||(' '+d.dataset.errors+' ').indexOf(' '+err+' ')>=0)
        &&(!m||(' '+d.dataset.wrong+' ').indexOf(' '+m+' ')>=0)&&(!dis||d.dataset.disagree==='1');
    d.style.display=ok?'':'none'; if(ok){shown++;}
  });
  document.getElementById('f-count').textContent=shown+' problems shown';
}
function pcrShowWrong(m){
  document.getElementById('f-wrong').value=m; document.getElementById('f-error').value='';
  pcrFilter(); document.getElementById('traces').scrollIntoView();
}
function pcrFromHash(){  // report.html#wrong=METHOD: that method's wrong answers (the metrics table links here)
  var h=location.hash.match(/^#wrong=(.+)$/); if(h){pcrShowWrong(decodeURIComponent(h[1]));}
}
window.addEventListener('hashchange', pcrFromHash);
window.addEventListener('DOMContentLoaded', pcrFromHash);
"""


def filter_bar_html(rows: Sequence[Mapping[str, Any]], methods: Sequence[str]) -> str:
    """The trace view's filters: by error type, by a method's wrong answers, and where the methods disagree."""
    errors = sorted({str(r.get("error_type")) for r in rows if not r.get("correct") and r.get("error_type")})
    opt = "".join(f'<option value="{html.escape(e)}">{html.escape(e)}</option>' for e in errors)
    mopt = "".join(f'<option value="{html.escape(m)}">{html.escape(m)}</option>' for m in methods)
    return (f'<div id="filters" class="meta">error type <select id="f-error" onchange="pcrFilter()">'
            f'<option value="">any</option>{opt}</select> wrong under <select id="f-wrong" onchange="pcrFilter()">'
            f'<option value="">any method</option>{mopt}</select> <label><input type="checkbox" id="f-disagree" '
            f'onchange="pcrFilter()"> methods disagree</label> <span id="f-count"></span></div>'
            f"<script>{FILTER_JS}</script>")


def paired_html(metrics: Mapping[str, Any]) -> str:
    """Every pair of methods on the same problems: discordant counts, McNemar p, the difference's interval."""
    paired = metrics.get("paired") or {}
    if not paired:
        return "<p>One method: nothing to compare.</p>"
    head = ("<tr><th>A vs B</th><th>n</th><th>A right, B wrong</th><th>B right, A wrong</th><th>Acc A - B</th>"
            "<th>95% CI</th><th>McNemar p</th><th>at 5%</th></tr>")

    def row(key: str, d: Mapping[str, Any]) -> str:
        diff = "-" if d["diff"] is None else f"{100 * d['diff']:+.1f}"
        lo, hi = d["diff_ci95"]
        return (f"<tr><td>{html.escape(key)}</td><td>{d['n']}</td><td>{d['only_a']}</td><td>{d['only_b']}</td>"
                f"<td>{diff}</td><td>{100 * lo:+.1f} to {100 * hi:+.1f}</td><td>{d['mcnemar_p']:.3g}</td>"
                f"<td>{'significant' if d['significant'] else 'no'}</td></tr>")

    body = "".join(row(k, d) for k, d in paired.items())
    return (f'<table id="paired">{head}{body}</table><p class="meta">On the problems both methods ran: an exact '
            f"McNemar test of the discordant counts and a paired bootstrap interval of the accuracy difference, in "
            f"points; a difference is significant only where p &lt; 0.05.</p>")


def render_report(metrics: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], *, title: str = "pcr_ray evaluation",
                  config_yaml: str = "", extra_plots: Sequence[tuple[str, str]] = (), max_problems: int = 300) -> str:
    """The whole page as a string."""
    methods = list(metrics["methods"])
    plots = []
    if methods:
        plots = [("Accuracy", plot_accuracy(metrics)), ("Error types", plot_error_types(metrics)),
                 ("Silent failures by horizon", plot_horizon(metrics))]
    plots += list(extra_plots)
    imgs = "".join(f'<img alt="{html.escape(t)}" title="{html.escape(t)}" src="data:image/png;base64,{b}">'
                   for t, b in plots)
    info = {k: v for k, v in metrics.items() if k != "methods" and not isinstance(v, (dict, list))}
    if "givens" in info:
        info["givens"] = GIVENS_NOTES.get(str(info["givens"]), info["givens"])
    if note := extraction_note(metrics):
        info["extraction"] = note
    info_html = " &middot; ".join(f"{html.escape(str(k))}: <b>{html.escape(str(v))}</b>" for k, v in info.items())
    err_types = [t for t in ERROR_TYPES if any(metrics["methods"][m]["error_types"].get(t) for m in methods)]
    err_rows = "".join(
        f"<tr><td>{html.escape(method_label(m, metrics))}</td>"
        + "".join(f"<td>{metrics['methods'][m]['error_types'].get(t, 0)}</td>" for t in err_types) + "</tr>"
        for m in methods)
    err_html = (f'<table id="error-types"><tr><th>method</th>{"".join(f"<th>{t}</th>" for t in err_types)}</tr>'
                f"{err_rows}</table>") if err_types else "<p>No wrong answers.</p>"
    banner = (f'<div id="oracle-givens" class="banner"><b>{ORACLE_GIVENS.capitalize()}.</b> Every method of this '
              f"run started from the gold trace's givens and its answer unit (<code>pipeline.givens=gold</code>), "
              f"which the trace's author picked with the answer key in hand: distractors removed, the asked unit "
              f"given. These numbers are an oracle ablation, not what a run on a problem's text alone (your own "
              f"data; <code>pipeline.givens=extract</code>, the default) measures.</div>"
              if oracle_givens(metrics) else "")
    cfg = (f"<h2>Config</h2><details><summary>composed config</summary><pre>{html.escape(config_yaml)}</pre></details>"
           if config_yaml else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{CSS}</style></head>
<body><h1>{html.escape(title)}</h1>{banner}<p class="meta">{info_html}</p>
<h2>Metrics</h2>{metrics_table_html(metrics)}
<p class="meta">Acc@1 with a 95% Wilson interval. Silent failure: a wrong answer returned with no error signal
(long horizon: gold trace of {metrics.get("horizon_threshold", 5)}+ steps). Counts are per problem.</p>
{template_split_html(metrics)}
<h2>Paired comparisons</h2>{paired_html(metrics)}
<h2>Error types (wrong answers)</h2>{err_html}
<h2>Plots</h2><div class="plots">{imgs}</div>
<h2 id="traces">Traces</h2><p class="meta">Each problem: its givens, then every method's steps with the
verifier's verdict and the PRM score, its answer and why it was graded so. A method's name in the metrics table
shows the problems it got wrong.</p>
{filter_bar_html(rows, methods)}
{traces_html(rows, methods, max_problems)}
{cfg}
</body></html>
"""


def write_report(run_dir: str | Path, metrics: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
                 **kw: Any) -> Path:
    """Write run_dir/report.html; returns its path."""
    path = Path(run_dir) / "report.html"
    path.write_text(render_report(metrics, rows, **kw), encoding="utf-8")
    return path
