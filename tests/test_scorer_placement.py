"""Where eval-prm's and mine-pairs' PRM runs: prm.device, gpus_per_actor, and the errors when they cannot work."""

from __future__ import annotations

import pytest
import torch

from pcr_ray.configs import compose
from pcr_ray.pipeline.eval_prm import ScorerPlacement, check_cluster_gpus, eval_prm, scorer_placement
from pcr_ray.pipeline.mine_pairs import mine_pairs


def test_gpus_per_actor_follows_the_device_unless_set() -> None:
    assert scorer_placement({"device": "cpu"}, {}) == ScorerPlacement("cpu", 0.0)
    assert scorer_placement({}, {}) == ScorerPlacement("cpu", 0.0)
    assert scorer_placement({"device": "cuda"}, {}) == ScorerPlacement("cuda", 1.0)
    assert scorer_placement({"device": "cuda:1"}, {"gpus_per_actor": 0.5}) == ScorerPlacement("cuda:1", 0.5)
    # in-process scoring (no Ray actor) needs no GPU reservation
    assert scorer_placement({"device": "cuda"}, {"gpus_per_actor": 0, "use_ray": False}) == ScorerPlacement("cuda", 0.0)


def test_placements_that_cannot_work_are_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"prm\.runtime=torch prm\.int8=false"):
        scorer_placement({"device": "cuda", "int8": True}, {})
    with pytest.raises(ValueError, match=r"prm\.runtime=torch prm\.int8=false"):
        scorer_placement({"device": "cuda", "runtime": "onnx", "int8": False}, {})
    with pytest.raises(ValueError, match="set gpus_per_actor"):
        scorer_placement({"device": "cuda"}, {"gpus_per_actor": 0})
    with pytest.raises(ValueError, match=">= 0"):
        scorer_placement({"device": "cpu"}, {"gpus_per_actor": -1})


@pytest.mark.skipif(torch.cuda.is_available(), reason="asserts the error on a machine without CUDA")
def test_a_cuda_scorer_without_a_gpu_says_so_before_loading(tmp_path) -> None:
    from pcr_ray.prm.scorer import PRMScorer

    with pytest.raises(RuntimeError, match="sees no CUDA GPU.*prm.device=cpu"):
        PRMScorer.from_checkpoint(tmp_path, device="cuda")


@pytest.mark.ray
def test_a_local_ray_without_gpus_refuses_gpu_actors_instead_of_waiting(ray_session, monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    have = ray_session.cluster_resources().get("GPU", 0.0)
    too_many = ScorerPlacement("cuda", have + 1.0)
    with pytest.raises(ValueError, match=f"has {have:g}"):
        check_cluster_gpus(too_many, 1, {"address": None})
    check_cluster_gpus(too_many, 1, {"address": "auto"})  # a cluster may still be adding GPU nodes
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")  # inside `ray job submit`: a cluster too
    check_cluster_gpus(too_many, 1, {"address": None})
    check_cluster_gpus(ScorerPlacement("cpu", 0.0), 4, {})


@pytest.mark.ray
@pytest.mark.parametrize("command", [eval_prm, mine_pairs])
def test_scoring_commands_stop_before_any_work_when_the_gpu_is_missing(ray_session, tmp_path, command,
                                                                      monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    need = ray_session.cluster_resources().get("GPU", 0.0) + 1.0
    values = {"prm": {"checkpoint": str(tmp_path), "device": "cuda", "runtime": "torch", "int8": False},
              "gpus_per_actor": need,
              "pairs_dir": str(tmp_path)}
    if command is mine_pairs:
        values["sources"] = [{"name": "physics", "kwargs": {"n": 2}}]
    (tmp_path / "train").mkdir()
    (tmp_path / "prm.json").write_text("{}")  # a checkpoint folder by its marker file: nothing is loaded
    cfg = compose(command.__name__, values=values)
    with pytest.raises(ValueError, match=r"need [\d.]+ GPU\(s\)"):
        command(cfg)
