"""Load test of the Serve scoring endpoint on 127.0.0.1: POST /v1/score with dynamic batching vs the same PRM
deployment with max_batch_size=1 (one request per forward pass), same requests, same concurrency, same run.

Bounded in requests and time. Every response is matched to its request by the id it echoes; the script
checks that none is lost, answered twice or answered with another request's id, and that both deployments give
the same scores. Workload: the hand-written gold traces (real problem texts) plus seeded random verified traces
of 2-6 steps. Writes <cache>/bench/bench_serve.json
(benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_serve.py [--requests 240] [--concurrency 16] [--time-cap 120]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _machine import add_dry_run, dry_run, machine_info, write_result

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests/ (gold traces, trace factory)


def workload(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """n /v1/score bodies with unique ids: gold problems (text + trace) and random verified traces."""
    from pcr_ray.core.verifier import verify
    from tests.gold_traces import GOLD
    from tests.trace_factory import random_trace

    gold = [(text, tr) for _, text, tr, _ in GOLD if verify(tr).ok]
    out = []
    for i in range(n):
        if i % 2 == 0:
            text, tr = gold[(i // 2) % len(gold)]
        else:
            t = random_trace(seed * 100_000 + i)
            tr = t.to_dict()
            names = ", ".join(f"{g.name} = {g.value:g} {g.unit}" for g in t.givens)
            text = f"Given {names}, find {t.answer[0].name}."
        out.append({"id": f"req-{i:05d}", "problem": text, "trace": tr})
    return out


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))] if xs else float("nan")


async def load(url: str, bodies: list[dict[str, Any]], concurrency: int, time_cap: float) -> dict[str, Any]:
    """Send `bodies` with at most `concurrency` in flight; stop starting new ones after `time_cap` seconds."""
    import httpx

    sem = asyncio.Semaphore(concurrency)
    lat: list[float] = []
    seen: dict[str, int] = {}
    scores: dict[str, list[float | None]] = {}
    errors: list[str] = []
    mismatched = 0
    pairs = 0
    sent = 0
    t0 = time.perf_counter()
    deadline = t0 + time_cap
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(base_url=url, timeout=max(60.0, time_cap), limits=limits) as client:
        async def one(body: dict[str, Any]) -> None:
            nonlocal mismatched, pairs, sent
            async with sem:
                if time.perf_counter() > deadline:
                    return
                sent += 1
                t = time.perf_counter()
                try:
                    r = await client.post("/v1/score", json=body)
                except Exception as exc:  # a lost request: counted, not fatal
                    errors.append(f"{body['id']}: {type(exc).__name__}: {exc}"[:200])
                    return
                dt = time.perf_counter() - t
                if r.status_code != 200:
                    errors.append(f"{body['id']}: HTTP {r.status_code}: {r.text[:150]}")
                    return
                data = r.json()
                rid = data.get("id")
                if rid != body["id"]:
                    mismatched += 1
                seen[rid] = seen.get(rid, 0) + 1
                scores[rid] = [s["score"] for s in data["steps"]]
                pairs += int(data["n_scored"])
                lat.append(dt)

        await asyncio.gather(*(one(b) for b in bodies))
    wall = time.perf_counter() - t0
    done = len(lat)
    return {
        "sent": sent, "completed": done, "errors": len(errors), "error_samples": errors[:5],
        "lost": sent - done, "answered_twice": sum(1 for c in seen.values() if c > 1), "mismatched_ids": mismatched,
        "wall_s": round(wall, 3), "throughput_rps": round(done / wall, 2) if wall else 0.0,
        "pairs_per_s": round(pairs / wall, 1) if wall else 0.0, "pairs_scored": pairs,
        "latency_ms": {"p50": round(1000 * _pct(lat, 0.50), 1), "p99": round(1000 * _pct(lat, 0.99), 1),
                       "mean": round(1000 * statistics.fmean(lat), 1) if lat else None,
                       "max": round(1000 * max(lat), 1) if lat else None},
        "_scores": scores,
    }


def _checkpoint(arg: str | None) -> Path:
    """--checkpoint, else the trained csp checkpoint, else a MiniLM + seeded-head checkpoint (same cost)."""
    if arg:
        return Path(arg)
    from pcr_ray.paths import cache_dir
    from pcr_ray.prm.checkpoints import find_checkpoint

    found = find_checkpoint("csp")
    if found is not None:
        return found
    p = cache_dir() / "bench" / "prm-untrained"
    if not (p / "prm.json").exists():
        from pcr_ray.prm.model import PRMMeta, build_model, save_checkpoint

        model, tok = build_model("minilm", seed=0)
        save_checkpoint(model, tok, p, PRMMeta(backbone="minilm", kind="untrained"))
    return p


def _stats(url: str) -> dict[str, int]:
    import httpx

    return dict(httpx.get(f"{url}/v1/info", timeout=60).json()["prm"]["stats"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=240)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--time-cap", type=float, default=120.0, help="seconds per phase; no new requests after it")
    ap.add_argument("--max-batch-size", type=int, default=32)
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--torch-threads", type=int, default=os.cpu_count() or 1)
    add_dry_run(ap)
    args = ap.parse_args(argv)
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))

    import ray
    import torch  # noqa: F401  (version for the machine description)

    from pcr_ray.serve.app import ServeSettings
    from pcr_ray.serve.deploy import start

    ckpt = _checkpoint(args.checkpoint)
    bodies = workload(args.requests)
    load_before = os.getloadavg()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}})
    # fp32 torch (batched forward passes; int8 on ONNX Runtime scores one pair per pass), no score cache
    common = dict(checkpoint=str(ckpt), port=port, prm_num_cpus=0.5, ingress_num_cpus=0.25,
                  torch_threads=args.torch_threads, runtime="torch", int8=False, cache_size=0)
    results: dict[str, Any] = {}
    svcs = []
    try:
        svcs.append(start(ServeSettings.from_mapping(dict(**common, app_name="batched", route_prefix="/batched",
                                                          max_batch_size=args.max_batch_size))))
        svcs.append(start(ServeSettings.from_mapping(dict(**common, app_name="one_by_one",
                                                          route_prefix="/one_by_one", max_batch_size=1))))
        for svc in svcs:  # warm up both (model load, first forward passes)
            asyncio.run(load(svc.url, bodies[:8], 4, 60))
        for name, svc in (("one_by_one", svcs[1]), ("batched", svcs[0])):
            before = _stats(svc.url)
            res = asyncio.run(load(svc.url, bodies, args.concurrency, args.time_cap))
            after = _stats(svc.url)
            b, r = after["batches"] - before["batches"], after["requests"] - before["requests"]
            res["prm_batches"] = b
            res["requests_per_batch_mean"] = round(r / b, 2) if b else None
            res["requests_per_batch_max"] = after["max_requests_per_batch"]
            results[name] = res
            print(f"{name:>10}: {res['completed']}/{res['sent']} ok in {res['wall_s']} s, "
                  f"{res['throughput_rps']} req/s, {res['pairs_per_s']} pairs/s, p50 {res['latency_ms']['p50']} ms, "
                  f"p99 {res['latency_ms']['p99']} ms, {res['requests_per_batch_mean']} req/batch, "
                  f"lost {res['lost']}, twice {res['answered_twice']}, mismatched {res['mismatched_ids']}")
    finally:
        for svc in reversed(svcs):
            svc.stop()
        ray.shutdown()
    sa, sb = results["batched"].pop("_scores"), results["one_by_one"].pop("_scores")
    common_ids = sorted(set(sa) & set(sb))
    max_diff = max((abs(x - y) for i in common_ids for x, y in zip(sa[i], sb[i], strict=True)
                    if x is not None and y is not None), default=0.0)
    speedup = results["batched"]["throughput_rps"] / max(results["one_by_one"]["throughput_rps"], 1e-9)
    integrity = all(r["lost"] == 0 and r["answered_twice"] == 0 and r["mismatched_ids"] == 0
                    for r in results.values())
    out = {
        "benchmark": "serve_score_load",
        "command": " ".join(["python benchmarks/bench_serve.py", *(argv if argv is not None else sys.argv[1:])]),
        "machine": {**machine_info(), "loadavg_1m_before": round(load_before[0], 2),
                    "loadavg_1m_after": round(os.getloadavg()[0], 2)},
        "config": {"requests": args.requests, "concurrency": args.concurrency, "time_cap_s": args.time_cap,
                   "max_batch_size": args.max_batch_size,
                   "torch_threads": args.torch_threads, "checkpoint": str(ckpt),
                   "pairs_per_request_mean": round(results["batched"]["pairs_scored"]
                                                   / max(results["batched"]["completed"], 1), 2)},
        "results": results,
        "throughput_ratio_batched_over_one_by_one": round(speedup, 2),
        "p99_ratio_batched_over_one_by_one": round(results["batched"]["latency_ms"]["p99"]
                                                   / max(results["one_by_one"]["latency_ms"]["p99"], 1e-9), 2),
        "scores_max_abs_diff_batched_vs_one_by_one": max_diff,
        "all_requests_answered_once_and_matched": integrity,
    }
    print(f"batched / one-by-one throughput: {speedup:.2f}x; max score diff {max_diff:.2e}; "
          f"every request answered exactly once and matched: {integrity}")
    write_result("bench_serve", out)
    return 0 if integrity and max_diff < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
