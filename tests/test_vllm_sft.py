"""A fine-tuned generator (`sft:test`) through the real vLLM engine: the folder loads, the compact prompt is sent,
and the search gets its steps past the verifier and scored by the PRM.

Runs in the vLLM environment only (`make test-vllm`); skipped where vllm is not installed. `sft:test` is the
tests' fine-tune (about 2 minutes on 2 cores, cached per machine; the main suite uses the same folder).
"""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")

from pcr_ray.data.physics import generate_problems  # noqa: E402
from pcr_ray.search import SearchConfig, SearchProblem, run_search  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.ray]


@pytest.fixture(scope="module")
def engine(ray_session):  # noqa: ARG001
    """generator=vllm_sft_tiny with the tests' fine-tune, as an engine actor on one CPU."""
    from pcr_ray.configs import compose, to_plain
    from pcr_ray.pipeline import actors as act

    cfg = to_plain(compose("evaluate", ["generator=vllm_sft_tiny", "generator.model=sft:test",
                                        "actors.generator.replicas=1", "actors.generator.num_gpus=0",
                                        "actors.generator.num_cpus=1"]))
    ref = act.ensure_generator(cfg["generator"], cfg["actors"]["generator"], None, {})
    yield ref, act.connect(ref)
    act.release_all()


@pytest.fixture(scope="module")
def prm():
    from tests.prm_helpers import small_prm_scorer

    return small_prm_scorer(max_batch=64)


def test_fine_tuned_folder_runs_in_vllm_with_the_compact_prompt(engine) -> None:
    import ray

    ref, _ = engine
    info = ray.get(ray.get_actor(ref.names[0], namespace=ref.namespace).info.remote())
    assert info["identity"]["kind"] == "vllm" and info["identity"]["prompt"] == "compact"
    assert "sft-test-" in info["identity"]["model"]


def test_nsprm_with_the_fine_tuned_model_passes_the_verifier_and_is_scored(engine, prm) -> None:
    _, proxy = engine

    class Counting:
        def __init__(self, inner):
            self.inner, self.pairs = inner, 0
            self.uses_feedback = True

        def propose(self, requests):
            return self.inner.propose(requests)

        def score(self, pairs):
            self.pairs += len(pairs)
            return self.inner.score(pairs)

    problems = [SearchProblem.from_problem(p, givens="gold")
                for p in generate_problems(200, seed=11) if p.gold_steps and p.gold_steps <= 2][:4]
    scorer = Counting(prm)
    res = run_search(problems, Counting(proxy), scorer, SearchConfig(method="nsprm", beam_width=1, k=3, max_steps=3,
                                                                    max_retries=1, max_backtracks=0))
    assert not any(r.error for r in res), [r.error for r in res if r.error]
    verified = sum(r.n_verified for r in res)
    # the fine-tuned model's steps pass the verifier, and what passed was scored by the PRM (a step sampled twice
    # is scored once: the search keeps its scores), and nothing else was
    assert verified > 0, [(r.n_proposed, r.reject_codes) for r in res]
    assert 0 < scorer.pairs <= sum(r.n_scored for r in res) <= verified + len(res) * 3
