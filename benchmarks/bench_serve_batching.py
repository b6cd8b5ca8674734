"""The PRM deployment's batching layer on real Ray Serve, with a stand-in model shaped like a GPU's: a model call
costs a fixed time plus a little per pair, so merging requests pays. Same deployment class as `pcr-ray serve`
(PRMScorerDeployment, `@serve.batch`), its scorer swapped for the stand-in; max_batch_size 32 against 1, the same
requests from the same clients, same run. Clients wait 0-20 ms between their requests, so requests arrive one
by one while a call runs. Writes <cache>/bench/bench_serve_batching.json
(benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_serve_batching.py [--clients 16] [--per-client 15] [--call-ms 40]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from _machine import add_dry_run, dry_run, machine_info, write_result

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PAIRS_PER_REQUEST = 3


async def load(handle: Any, clients: int, per_client: int, seed: int) -> float:
    """Wall seconds for `clients` clients sending `per_client` requests each; every answer checked."""
    rng = random.Random(seed)

    async def client(i: int) -> None:
        for j in range(per_client):
            await asyncio.sleep(rng.random() * 0.02)
            pairs = [(f"c{i}-{j}-{k}", "s") for k in range(PAIRS_PER_REQUEST)]
            got = await handle.score.remote(pairs)
            if got != [float(len(c)) for c, _ in pairs]:
                raise AssertionError(f"request {i}/{j} got another request's scores")

    t = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--per-client", type=int, default=15)
    ap.add_argument("--call-ms", type=float, default=40.0, help="the stand-in model's fixed cost per call")
    ap.add_argument("--pair-ms", type=float, default=0.5, help="its cost per pair")
    ap.add_argument("--max-batch-size", type=int, default=32)
    add_dry_run(ap)
    args = ap.parse_args(argv)
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))

    import ray
    from ray import serve

    from pcr_ray.serve.deploy import PRMScorerDeployment

    call_s, pair_s = args.call_ms / 1000, args.pair_ms / 1000

    class StandIn:
        identity: dict[str, Any] = {}

        def score(self, pairs: list[tuple[str, str]]) -> list[float]:
            time.sleep(call_s + pair_s * len(pairs))
            return [float(len(c)) for c, _ in pairs]

    @serve.deployment(max_ongoing_requests=4 * args.max_batch_size, ray_actor_options={"num_cpus": 0})
    class StandInPRM(PRMScorerDeployment.func_or_class):
        def __init__(self, max_batch_size: int) -> None:
            self.scorer = StandIn()
            self._init_batching(max_batch_size)

    n = args.clients * args.per_client
    load_before = os.getloadavg()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    serve.start(proxy_location="Disabled")
    results: dict[str, Any] = {}
    try:
        for name, size in (("batched", args.max_batch_size), ("one_by_one", 1)):
            handle = serve.run(StandInPRM.bind(size), name=name, route_prefix=None)
            asyncio.run(load(handle, 4, 2, seed=99))  # warm-up
            before = handle.stats.remote().result()
            wall = asyncio.run(load(handle, args.clients, args.per_client, seed=0))
            after = handle.stats.remote().result()
            calls = after["batches"] - before["batches"]
            results[name] = {"requests": n, "wall_s": round(wall, 3), "throughput_rps": round(n / wall, 1),
                             "model_calls": calls, "requests_per_call_mean": round(n / calls, 2),
                             "requests_per_call_max": after["max_requests_per_batch"]}
            serve.delete(name)
            print(f"{name:>10}: {n} requests in {wall:.2f} s, {n / wall:.1f} req/s, {calls} model calls "
                  f"({n / calls:.2f} requests per call)")
    finally:
        serve.shutdown()
        ray.shutdown()
    ratio = results["batched"]["throughput_rps"] / results["one_by_one"]["throughput_rps"]
    out = {
        "benchmark": "serve_batching_layer",
        "command": " ".join(["python benchmarks/bench_serve_batching.py", *(argv if argv is not None
                                                                          else sys.argv[1:])]),
        "machine": {**machine_info(), "loadavg_1m_before": round(load_before[0], 2),
                    "loadavg_1m_after": round(os.getloadavg()[0], 2)},
        "config": {"clients": args.clients, "per_client": args.per_client, "think_ms": [0, 20],
                   "pairs_per_request": PAIRS_PER_REQUEST, "call_ms": args.call_ms, "pair_ms": args.pair_ms,
                   "max_batch_size": args.max_batch_size},
        "results": results,
        "throughput_ratio_batched_over_one_by_one": round(ratio, 2),
    }
    print(f"batched / one-by-one throughput: {ratio:.2f}x")
    write_result("bench_serve_batching", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
