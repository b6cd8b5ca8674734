"""vLLM on CPU: an engine whose model runs in the EngineCore process (UniProcExecutor, what generator=vllm_tiny
builds) against one whose model runs in a worker process of its own (vLLM's CPU default, the `mp` executor).

Run in the vLLM environment (`make venv-vllm`):

    OMP_NUM_THREADS=1 .venv-vllm/bin/python benchmarks/bench_vllm_start.py [--rounds 3] [--results]

Each round builds one engine of each kind (the order alternates over rounds), from generator=vllm_tiny's own
engine settings (SmolLM2-135M, bf16, eager), times its start (AsyncLLM built and ready), then generates 16 requests
of 64 tokens each at once (seeded, `ignore_eos`) and times them; the engine is shut down before the next. Reports
each kind's median start and tokens/s and their ratios. Writes <cache>/bench/bench_vllm_start.json; --results also
writes benchmarks/results/bench_vllm_start.json.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from _machine import add_dry_run, dry_run, git_revision, machine_info, write_result

KINDS = ("engine_core", "worker_process")


def _engine_kwargs() -> dict:
    """generator=vllm_tiny's AsyncEngineArgs, as the engine actor builds them (its model folder not yet made)."""
    from hydra import compose, initialize_config_dir

    from pcr_ray.configs import to_plain
    from pcr_ray.generators.vllm import VLLMGenerator
    from pcr_ray.paths import conf_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = to_plain(compose("evaluate", overrides=["generator=vllm_tiny"]))["generator"]
    gen = VLLMGenerator.from_config(cfg)
    return dict(gen.engine_kwargs)


async def _round(kind: str, kwargs: dict, requests: int, tokens: int) -> dict:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.sampling_params import SamplingParams
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.executor.uniproc_executor import UniProcExecutor

    backend = UniProcExecutor if kind == "engine_core" else "mp"
    t0 = time.perf_counter()
    llm = AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs, distributed_executor_backend=backend))
    start_s = time.perf_counter() - t0

    async def one(i: int) -> int:
        params = SamplingParams(max_tokens=tokens, temperature=0.8, seed=i, ignore_eos=True)
        final = None
        async for out in llm.generate(f"Write a short story about the number {i}.", params, request_id=f"{kind}{i}"):
            final = out
        return len(final.outputs[0].token_ids)

    t1 = time.perf_counter()
    n = sum(await asyncio.gather(*[one(i) for i in range(requests)]))
    gen_s = time.perf_counter() - t1
    llm.shutdown()
    return {"kind": kind, "start_s": round(start_s, 2), "tokens": n, "tokens_per_s": round(n / gen_s, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="engines of each kind, started alternately")
    ap.add_argument("--requests", type=int, default=16, help="requests generated at once per engine")
    ap.add_argument("--tokens", type=int, default=64, help="tokens per request")
    ap.add_argument("--results", action="store_true", help="also write benchmarks/results/bench_vllm_start.json")
    add_dry_run(ap)
    args = ap.parse_args()
    kwargs = _engine_kwargs()
    if args.dry_run:
        return dry_run(__file__, {**vars(args), "engine_kwargs": kwargs})

    import vllm

    from pcr_ray.generators.model_folder import resolve_model

    kwargs["model"] = resolve_model(kwargs["model"])  # the SmolLM2 folder, converted from the GGUF on first use
    rounds = []
    for r in range(args.rounds):
        for kind in (KINDS if r % 2 == 0 else KINDS[::-1]):
            rounds.append(asyncio.run(_round(kind, kwargs, args.requests, args.tokens)))
            print(rounds[-1], flush=True)
    agg = {k: {"median_start_s": statistics.median(x["start_s"] for x in rounds if x["kind"] == k),
               "median_tokens_per_s": statistics.median(x["tokens_per_s"] for x in rounds if x["kind"] == k)}
           for k in KINDS}
    result = {"benchmark": "bench_vllm_start", "command": " ".join(["python", *sys.argv]),
              "git_revision": git_revision(), "machine": {**machine_info(), "vllm": vllm.__version__},
              "model": "SmolLM2-135M-Instruct (generator=vllm_tiny: bf16, eager, 1 OpenMP thread)",
              "workload": {"rounds": args.rounds, "requests": args.requests, "tokens": args.tokens},
              "rounds": rounds, **agg,
              "start_ratio_worker_process_to_engine_core": round(
                  agg["worker_process"]["median_start_s"] / agg["engine_core"]["median_start_s"], 3),
              "tokens_per_s_ratio_engine_core_to_worker_process": round(
                  agg["engine_core"]["median_tokens_per_s"] / agg["worker_process"]["median_tokens_per_s"], 3)}
    print({k: result[k] for k in (*KINDS, "start_ratio_worker_process_to_engine_core",
                                  "tokens_per_s_ratio_engine_core_to_worker_process")})
    write_result("bench_vllm_start", result, commit=args.results or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
