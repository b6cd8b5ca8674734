"""vLLM generator configs and engine-actor placement (no vLLM needed: runs in the main environment)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from pcr_ray.generators.vllm import VLLMGenerator
from pcr_ray.paths import conf_dir
from pcr_ray.pipeline.actors import vllm_placement


def _generator(name: str) -> dict:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("evaluate", overrides=[f"generator={name}"])
    return OmegaConf.to_container(cfg.generator, resolve=True)


def test_vllm_tiny_differs_from_qwen_only_in_model_device_dtype_and_sizes() -> None:
    tiny, qwen = _generator("vllm_tiny"), _generator("qwen_math_7b")
    assert tiny["kind"] == qwen["kind"] == "vllm"
    differ = {k for k in tiny.keys() | qwen.keys() if tiny.get(k) != qwen.get(k)}
    cpu_settings = {"device", "enforce_eager", "cpu_kvcache_gb", "omp_threads", "num_cpus"}
    sizes = {"max_num_seqs", "max_tokens", "max_tokens_free", "max_ops", "max_model_len"}
    assert differ <= {"model", "dtype"} | cpu_settings | sizes, differ
    gen = VLLMGenerator.from_config(tiny)
    assert gen.device == "cpu" and gen.engine_kwargs["enable_prefix_caching"] is True
    assert gen.engine_kwargs["structured_outputs_config"] == {"backend": "xgrammar", "disable_any_whitespace": True}
    assert "gpu_memory_utilization" not in gen.engine_kwargs
    # on a CPU every prompt is prefilled whole (a chunked prefill of a seeded request kills vLLM's CPU engine)
    assert gen.engine_kwargs["enable_chunked_prefill"] is False
    assert gen.engine_kwargs["max_num_batched_tokens"] == gen.engine_kwargs["max_model_len"]
    q = VLLMGenerator.from_config(qwen)
    assert q.device == "cuda" and q.engine_kwargs["gpu_memory_utilization"] == 0.85
    assert "enable_chunked_prefill" not in q.engine_kwargs


def test_engine_actor_reserves_gpus_or_cpus() -> None:
    assert vllm_placement({"device": "cuda"}, {}) == {"num_gpus": 1.0, "num_cpus": 1.0, "bundles": None}
    assert vllm_placement({"device": "cpu", "num_cpus": 1}, {"num_cpus": 2}) == {"num_gpus": 0.0, "num_cpus": 2.0,
                                                                                "bundles": None}
    tp4 = vllm_placement({"device": "cuda", "tensor_parallel_size": 4}, {"num_cpus": 2})
    assert tp4["num_gpus"] == 0 and [b["GPU"] for b in tp4["bundles"]] == [1.0] * 4
    assert tp4["bundles"][0]["CPU"] == 2.0
    assert VLLMGenerator(tensor_parallel_size=4).engine_kwargs["distributed_executor_backend"] == "ray"
    with pytest.raises(ValueError, match="tensor_parallel_size must be 1"):
        vllm_placement({"device": "cpu", "tensor_parallel_size": 2}, {})
    with pytest.raises(ValueError, match="device must be one of"):
        VLLMGenerator(device="tpu")


def test_unknown_vllm_generator_option_is_a_clear_error_and_solve_keeps_cap_to_the_enumerator() -> None:
    from pcr_ray.generators.vllm import VLLMGenerator
    from pcr_ray.solve import compose as compose_solve

    with pytest.raises(ValueError, match=r"unknown vllm generator option\(s\) \['cap'\]"):
        VLLMGenerator.from_config({"kind": "vllm", "model": "m", "cap": 64})
    assert "cap" not in compose_solve(["generator=vllm_tiny"])["generator"]
    assert compose_solve()["generator"]["cap"] == 64 and compose_solve(["generator.cap=9"])["generator"]["cap"] == 9
