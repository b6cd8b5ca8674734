"""A model actor's replicas fail over: a replica that died for good, or whose call never returns (its node lost),
leaves the batch to the next replica, and the proxy stays on the one that answered (pcr_ray.pipeline.actors)."""

from __future__ import annotations

import time

import pytest

from pcr_ray.configs import compose, to_plain
from pcr_ray.data.physics import generate_problems
from pcr_ray.generators.base import ProposalRequest, build_generator
from pcr_ray.pipeline import actors as act
from pcr_ray.search.types import SearchProblem

pytestmark = pytest.mark.ray


def _replicas(replicas: int, faults: dict[str, str], call_timeout_s: float = 0) -> tuple[act.ActorRef, dict]:
    """`replicas` GeneratorActors of the enumerator (model-free, so fast) that Ray never restarts; its config."""
    cfg = to_plain(compose("evaluate", ["experiment=smoke"]))
    acfg = {**cfg["actors"]["generator"], "placement": "actor", "replicas": replicas, "max_restarts": 0,
            "max_task_retries": 0, "call_timeout_s": call_timeout_s}
    return act.ensure_generator(cfg["generator"], acfg, None, faults), cfg["generator"]


def _requests() -> list[ProposalRequest]:
    p = SearchProblem.from_problem(generate_problems(1, seed=3)[0], givens="gold")
    return [ProposalRequest(p.id, p.text, p.givens, k=3, target_unit=p.target_unit)]


def test_a_replica_that_died_for_good_leaves_the_batch_to_the_next(ray_session, tmp_path):
    marker = tmp_path / "died"
    ref, gen_cfg = _replicas(2, {"generator_actor": str(marker)})
    try:
        proxy = act.connect(ref)
        first = proxy.slot
        out = proxy.propose(_requests())
        assert marker.exists()  # the replica that took the call exited (Ray restarts it no more)
        assert out == build_generator(dict(gen_cfg)).propose(_requests())  # the same answer, from the other one
        assert proxy.failovers == 1 and proxy.slot != first
        assert proxy.propose(_requests()) == out and proxy.failovers == 1  # it stays on the live replica
    finally:
        act.release_all()


def test_a_call_that_never_returns_moves_on_after_the_call_timeout(ray_session, tmp_path):
    marker = tmp_path / "stalled"
    ref, _ = _replicas(2, {"generator_actor": f"{act.STALL}{marker}"}, call_timeout_s=3)
    try:
        proxy = act.connect(ref)
        t0 = time.monotonic()
        out = proxy.propose(_requests())
        assert marker.exists() and proxy.failovers == 1 and out and out[0]
        assert 3 <= time.monotonic() - t0 < 60
    finally:
        act.release_all()


def test_when_every_replica_is_gone_the_batch_fails_naming_each(ray_session, tmp_path):
    ref, _ = _replicas(1, {"generator_actor": str(tmp_path / "died")})
    try:
        proxy = act.connect(ref)
        with pytest.raises(act.ReplicasUnavailable, match=r"every generator replica failed \(1\): replica 0: "):
            proxy.propose(_requests())
    finally:
        act.release_all()
