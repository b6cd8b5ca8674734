"""`pcr-ray evaluate` (`python -m pcr_ray.evaluate`): the main job, a Hydra app over the Ray Data pipeline.

    pcr-ray evaluate experiment=demo
    pcr-ray evaluate -m search.beam_width=1,2,4,8 search.threshold=0.3,0.5     # a sweep; same Ray for every run
    pcr-ray evaluate ray.address=auto experiment=paper_table                    # join a running cluster

`evaluate(cfg)` is the same job as a function (tests call it); it returns the run directory, which holds
results.parquet, shards/, metrics.json, report.html and config.yaml. Rerunning with the same run directory
(`hydra.run.dir=...` or `run_dir=...`) resumes: finished (problem, method) rows are skipped.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from pcr_ray.baselines.confine import SandboxUnavailable, check_mode, require_bwrap
from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.configs import check, compose
from pcr_ray.configs import to_plain as _plain
from pcr_ray.data.selection import load_problems
from pcr_ray.grading import check_grading_mode
from pcr_ray.paths import runs_dir
from pcr_ray.pipeline.metrics import compute_metrics, error_table, givens_line, markdown_table, template_split_table
from pcr_ray.pipeline.node_sandbox import cpu_nodes, probe_nodes
from pcr_ray.pipeline.plan import check_cluster
from pcr_ray.pipeline.ray_runtime import init_ray, shutdown_ray
from pcr_ray.pipeline.report import write_report
from pcr_ray.pipeline.scaling import plot_scaling, scaling_curves, scaling_specs, scaling_table
from pcr_ray.pipeline.search_batch import check_search_configs, parse_methods, worker_spec
from pcr_ray.pipeline.stats import paired_table
from pcr_ray.prm.build import checkpoint_path
from pcr_ray.search.types import check_givens_mode
from pcr_ray.tracking import Tracker, evaluation_metrics, tracked

log = logging.getLogger(__name__)

# how each grading mode is named in metrics.json, the tables and the report
GRADING_NOTES = {"default": "default (SciBench: 5% relative, units converted; GSM8K exact; MATH math-verify)",
                 "scibench": "scibench (SciBench's own: 0.1 absolute from 1 up, 10% relative below, in the stated "
                             "unit; others as default)"}


def compose_config(overrides: Sequence[str] = ()) -> DictConfig:
    """The evaluate config for these overrides, composed and checked (pcr_ray.configs; no run directory)."""
    return compose("evaluate", overrides)


def resolve_run_dir(cfg: DictConfig, run_dir: str | Path | None = None) -> Path:
    """The run directory: the argument, cfg.run_dir, Hydra's output dir, else outputs/evaluate/<time>."""
    if run_dir is None and cfg.get("run_dir"):
        run_dir = cfg.run_dir
    if run_dir is None:
        try:
            run_dir = HydraConfig.get().runtime.output_dir
        except Exception:
            run_dir = runs_dir() / "evaluate" / time.strftime("%Y-%m-%d_%H-%M-%S")
    p = Path(run_dir).expanduser().resolve()
    p.mkdir(parents=True, exist_ok=True)
    return p


def check_sandbox(specs: Sequence[Any], baselines: Mapping[str, Any]) -> None:
    """Before Ray starts: a pyexec method with `baselines.sandbox=bwrap` needs a working bubblewrap here.

    Raises pcr_ray.baselines.confine.SandboxUnavailable (how to install it, or how to opt out) when it is missing,
    so the run stops at once instead of erroring every pyexec row on the workers.
    """
    if any(s.method == "pyexec" for s in specs) and check_mode(str(baselines["sandbox"])) == "bwrap":
        require_bwrap()


def check_sandbox_on_nodes(specs: Sequence[Any], baselines: Mapping[str, Any], timeout_s: float = 120) -> None:
    """check_sandbox on every node of the cluster that can run a search worker (model-written programs run there,
    not on the driver); SandboxUnavailable naming each node that lacks a working bubblewrap, and why."""
    if not any(s.method == "pyexec" for s in specs) or str(baselines["sandbox"]) != "bwrap":
        return
    if len(cpu_nodes()) <= 1:
        return  # the driver's node, checked already
    problems = {node: why for node, why in probe_nodes(timeout_s).items() if why}
    if problems:
        raise SandboxUnavailable(
            "pyexec runs model-written programs on the search workers' nodes, and these lack a working "
            "bubblewrap: " + "; ".join(f"{node}: {why}" for node, why in problems.items())
            + ". Use the cluster image (cluster/Dockerfile installs bubblewrap) with the security settings of "
            "cluster/rayjob.yaml, or, where user namespaces are off, drop pyexec from `methods` or set "
            "baselines.sandbox=unconfined (docs/reliability.md)")


def evaluate(cfg: DictConfig | Mapping[str, Any], run_dir: str | Path | None = None, *,
             progress: bool | None = None) -> Path:
    """Run the evaluation described by `cfg` (a composed evaluate config); returns the run directory.

    With `tracking=mlflow` the run is an MLflow run: the config as params, metrics.json's numbers as metrics, the
    per-problem table, report.html and the run's files as artifacts (pcr_ray.tracking)."""
    cfg = check("evaluate", cfg)
    check_grading_mode(str(cfg.grading.mode))
    check_givens_mode(str(cfg.pipeline.givens))
    out = resolve_run_dir(cfg, run_dir)
    with tracked(_plain(cfg.tracking), "evaluate", _plain(cfg), out) as tracker:
        _evaluate(cfg, out, progress)
        log_evaluation(tracker, out)
    return out


# results.parquet's columns left out of the filterable table (results.parquet, an artifact too, keeps them)
BULKY_COLUMNS = ("raw_output", "step_verdicts", "step_scores")


def log_evaluation(tracker: Tracker, out: Path) -> None:
    """A finished run's metrics, per-problem table and files, to the tracker."""
    from pcr_ray.pipeline.results import read_results  # heavy: pyarrow

    tracker.log_metrics(evaluation_metrics(json.loads((out / "metrics.json").read_text())))
    table = read_results(out / "results.parquet")
    tracker.log_table(table.drop_columns([c for c in table.column_names if c in BULKY_COLUMNS or c.endswith("_json")])
                      .to_pylist(), "results.json")
    for name in ("metrics.json", "report.html", "config.yaml", "results.parquet", "scaling.json"):
        tracker.log_artifact(out / name)


def _evaluate(cfg: DictConfig, out: Path, progress: bool | None) -> None:
    """The evaluation itself: results.parquet, metrics.json, report.html and config.yaml in `out`."""
    from pcr_ray.pipeline import actors as act  # heavy: ray

    # heavy: pandas, pyarrow, ray
    from pcr_ray.pipeline.evaluate_pipeline import pending_items, run_pipeline
    from pcr_ray.pipeline.results import merge, read_results  # heavy: pyarrow

    t_start = time.time()
    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    (out / "config.yaml").write_text(config_yaml)
    pcfg = _plain(cfg.pipeline)
    scaling = _plain(cfg.scaling)
    specs = parse_methods(list(_plain(cfg.methods)) + scaling_specs(scaling),
                          _plain(cfg.get("method_generators")) or {}, _plain(cfg.get("method_overrides")) or {},
                          _plain(cfg.get("method_prms")) or {})
    if not specs:
        raise ValueError("no methods to run: set `methods` (or scaling.budgets, experiment=scaling)")
    search_source_overrides = _plain(cfg.get("search_source_overrides")) or {}
    check_search_configs(specs, _plain(cfg.search), search_source_overrides)
    check_sandbox(specs, _plain(cfg.baselines) or {})
    problems = load_problems(_plain(cfg.dataset))
    items, n_done = pending_items(problems, specs, out, resume=bool(pcfg["resume"]),
                                  retry_errors=bool(pcfg["retry_errors"]))
    log.info("evaluate: %d problems x %d methods -> %s%s", len(problems), len(specs), out,
             f" ({n_done} rows already done, resuming)" if n_done else "")
    stats = None
    actor_info: dict[str, Any] = {}
    if items:
        namespace = init_ray(_plain(cfg.ray))
        check_sandbox_on_nodes(specs, _plain(cfg.baselines) or {})
        faults = dict(_plain(pcfg.get("faults")) or {})
        gen_cfgs: dict[str, Any] = {"default": _plain(cfg.generator)}
        gen_cfgs.update(_plain(cfg.get("generators")) or {})
        used_gens = sorted({s.generator for s in specs})
        missing = [g for g in used_gens if g not in gen_cfgs]
        if missing:
            raise ValueError(f"methods use generator(s) {missing}, not configured in `generators` "
                             f"(have {sorted(gen_cfgs)})")
        acfg = _plain(cfg.actors)
        placement = check_cluster(_plain(cfg), wait_s=float(cfg.ray.wait_for_nodes_s))  # PlanError before any actor
        for role, n in placement.replicas.items():
            if acfg[role]["replicas"] == "auto":
                log.info("evaluate: actors.%s.replicas=auto: %d (as many as fit the cluster)", role, n)
                acfg[role]["replicas"] = n
        gens = {g: act.ensure_generator(gen_cfgs[g], acfg["generator"], namespace, faults) for g in used_gens}
        prm_cfgs: dict[str, Any] = {"default": _plain(cfg.prm)}
        prm_cfgs.update(_plain(cfg.get("prms")) or {})
        used_prms = sorted({s.prm for s in specs if s.uses_prm})
        missing = [k for k in used_prms if k not in prm_cfgs]
        if missing:
            raise ValueError(f"methods use PRM(s) {missing}, not configured in `prms` (have {sorted(prm_cfgs)})")
        prm_refs = {k: act.ensure_prm(prm_cfgs[k], str(checkpoint_path(prm_cfgs[k])), acfg["prm"], namespace, faults)
                    for k in used_prms}
        keep = [n for r in [*gens.values(), *prm_refs.values()] for n in r.names]
        act.release_unused(keep)
        spec = {"generators": gens, "prms": prm_refs, **worker_spec(_plain(cfg), specs)}
        show = bool(pcfg["progress"]) if progress is None else progress
        stats = run_pipeline(items, spec, pcfg, out, progress=show, run_id=uuid.uuid4().hex[:8])
        actor_info = act.actor_stats([*gens.values(), *prm_refs.values()])
    path = merge(out)
    rows = read_results(path).to_pylist()
    extra = {
        "run_dir": str(out), "dataset": str(cfg.dataset.name), "grading": GRADING_NOTES[str(cfg.grading.mode)],
        "givens": str(pcfg["givens"]),  # gold: the oracle ablation (tables say "oracle givens", report a banner)
        "generator": str(cfg.generator.kind),
        "wall_s": round(time.time() - t_start, 2),
        "pipeline_s": round(stats.seconds, 2) if stats else 0.0,
        "rows_this_run": stats.rows if stats else 0,
        "rows_resumed": n_done,
        "problems_per_s": round(stats.rows / len(specs) / stats.seconds, 3) if stats and stats.seconds else None,
        "search_workers": int(pcfg["num_search_workers"]),
        "pipeline_failures": stats.failures if stats else [],
        "actors": actor_info,
        "prm_cache": act.prm_cache_stats(actor_info),
    }
    metrics = compute_metrics(rows, [s.label for s in specs], extra)
    plots: list[tuple[str, str]] = []
    if scaling["budgets"]:
        metrics["scaling"] = scaling_curves(rows, scaling, str(cfg.grading.mode))
        (out / "scaling.json").write_text(json.dumps(metrics["scaling"], indent=2))
        plots = plot_scaling(metrics["scaling"])
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, default=str))
    write_report(out, metrics, rows, title=f"pcr_ray evaluation: {extra['dataset']}", config_yaml=config_yaml,
                 max_problems=int(pcfg["report_max_problems"]), extra_plots=plots)


def run_and_summarize(cfg: DictConfig) -> None:
    """One job of `pcr-ray evaluate`: the evaluation, then its tables."""
    _print_summary(evaluate(cfg))


USAGE = ("usage: pcr-ray evaluate [key=value ...]\n\nThe evaluation of conf/evaluate.yaml (an experiment, a dataset, "
         "methods) through the Ray Data pipeline;\nthe run directory gets results.parquet, metrics.json, report.html "
         "and config.yaml. e.g.\n" + __doc__.split("\n\n")[1])
# a sweep's runs share one Ray, stopped once the last has finished
main = hydra_command("evaluate", "evaluate", run_and_summarize, USAGE, teardown=shutdown_ray)


def _print_summary(out: Path) -> None:
    m = json.loads((out / "metrics.json").read_text())
    print(f"grading: {m.get('grading', 'default')}")
    print(givens_line(m))
    print(markdown_table(m))
    if template_split_table(m):
        print("\nGenerated physics by template split (unseen: held-out templates no learned part trained on):")
        print(template_split_table(m))
    print()
    print(error_table(m))
    if m.get("scaling"):
        print("\nCompute scaling (accuracy, pass@N and cost per problem against the budget N):")
        print(scaling_table(m["scaling"]))
    if m.get("paired"):
        print("\nPaired comparisons (the same problems; exact McNemar test, bootstrap interval of the difference):")
        print(paired_table(m["paired"]))
    print(f"\nresults: {out / 'results.parquet'}\nreport:  {out / 'report.html'}")


if __name__ == "__main__":
    sys.exit(main())
