"""Soak of the Serve scoring service on 127.0.0.1: N seconds at concurrency C of valid, rejected, malformed,
oversized and slowly-sent requests; asserts zero 5xx and every request answered once; reports the service's
memory growth (RSS of its Ray actors, read idle between load phases, and sampled under load).

    nice -n 10 .venv/bin/python benchmarks/bench_serve_soak.py [--seconds 300] [--concurrency 32] [--results]

Writes <cache>/bench/bench_serve_soak.json (and benchmarks/results/ with --results). Exit status 1 when a 5xx,
a lost or doubly answered request, or an unexpected status turned up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _machine import add_dry_run, dry_run
from _provenance import save

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MAX_BODY = 256 * 1024
# kind -> (weight, expected statuses)
KINDS: dict[str, tuple[int, tuple[int, ...]]] = {
    "verify_valid": (25, (200,)), "verify_rejected": (20, (200,)), "score_valid": (12, (200,)),
    "score_candidates": (5, (200,)), "malformed_json": (8, (400,)), "schema_invalid": (10, (422,)),
    "wrong_content_type": (5, (415,)), "empty_body": (3, (422,)), "oversized": (4, (413,)),
    "slow_valid": (5, (200,)), "unknown_route": (3, (404,)),
}


def _rejected(trace: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    t = json.loads(json.dumps(trace))
    k = rng.randrange(4)
    if k == 0 and t["steps"]:
        t["steps"][-1]["value"] = 123456.0
    elif k == 1 and t["steps"]:
        t["steps"][0]["op"] = "warp_drive"
    elif k == 2:
        t["answer"] = [{"name": t["answer"][0]["name"], "unit": "mol"}] if t.get("answer") else []
    else:
        t["givens"] = t["givens"][:1]
    return t


class Soak:
    """The request mix, its send paths (httpx, and a raw socket for slowly sent bodies) and the tallies."""

    def __init__(self, url: str, port: int, bodies: list[dict[str, Any]], seed: int) -> None:
        self.url, self.port, self.bodies = url, port, bodies
        self.rng = random.Random(seed)
        self.sent: Counter = Counter()
        self.status: Counter = Counter()
        self.unexpected: list[str] = []
        self.errors: list[str] = []
        self.lat: dict[str, list[float]] = {k: [] for k in KINDS}
        self.answered = 0
        self.seq = 0

    def pick(self) -> str:
        kinds = list(KINDS)
        return self.rng.choices(kinds, weights=[KINDS[k][0] for k in kinds])[0]

    def request(self, kind: str) -> tuple[str, str, bytes, dict[str, str]]:
        """(method, path, body, headers) of one request of `kind`."""
        b = self.bodies[self.rng.randrange(len(self.bodies))]
        self.seq += 1
        js = {"Content-Type": "application/json"}
        if kind == "verify_valid":
            return "POST", "/v1/verify", json.dumps({"trace": b["trace"]}).encode(), js
        if kind == "verify_rejected":
            return "POST", "/v1/verify", json.dumps({"trace": _rejected(b["trace"], self.rng)}).encode(), js
        if kind == "score_valid":
            return "POST", "/v1/score", json.dumps({**b, "id": f"s{self.seq}"}).encode(), js
        if kind == "score_candidates":
            steps = b["trace"]["steps"]
            body = {"problem": b["problem"], "prefix": {"givens": b["trace"]["givens"], "steps": steps[:1]},
                    "candidates": steps[1:2] or steps[:1], "id": f"c{self.seq}"}
            return "POST", "/v1/score", json.dumps(body).encode(), js
        if kind == "malformed_json":
            raw = json.dumps({"trace": b["trace"]})
            return "POST", "/v1/verify", raw[: self.rng.randrange(1, len(raw) - 1)].encode(), js
        if kind == "schema_invalid":
            bad = self.rng.choice([{"trace": 5}, {"traces": b["trace"]}, {"problem": "", "trace": b["trace"]},
                                   {"problem": "p", "candidates": []}, [1, 2]])
            path = "/v1/score" if isinstance(bad, dict) and "problem" in bad else "/v1/verify"
            return "POST", path, json.dumps(bad).encode(), js
        if kind == "wrong_content_type":
            return "POST", "/v1/verify", json.dumps({"trace": b["trace"]}).encode(), {"Content-Type": "text/plain"}
        if kind == "empty_body":
            return "POST", "/v1/verify", b"", js
        if kind == "oversized":
            return "POST", "/v1/verify", b'{"trace": "' + b"x" * (MAX_BODY + 1024) + b'"}', js
        if kind == "slow_valid":
            return "POST", "/v1/verify", json.dumps({"trace": b["trace"]}).encode(), js
        return "GET", "/v1/nothing-here", b"", {}

    async def send_slowly(self, body: bytes) -> int:
        """POST /v1/verify over a raw socket, the body dribbled in 4 pieces over about 2 s; the status code."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            head = (f"POST /v1/verify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
            writer.write(head)
            await writer.drain()
            step = max(1, len(body) // 4)
            for i in range(0, len(body), step):
                await asyncio.sleep(0.5)
                writer.write(body[i:i + step])
                await writer.drain()
            line = await asyncio.wait_for(reader.readline(), 120)
            await reader.read()  # the rest of the response, to the close
            return int(line.split()[1])
        finally:
            writer.close()

    async def worker(self, client: Any, deadline: float) -> None:
        while time.monotonic() < deadline:
            kind = self.pick()
            method, path, body, headers = self.request(kind)
            self.sent[kind] += 1
            t0 = time.perf_counter()
            try:
                if kind == "slow_valid":
                    code = await self.send_slowly(body)
                else:
                    r = await client.request(method, path, content=body, headers=headers)
                    code = r.status_code
                    if code == 200 and path == "/v1/score":
                        rid = r.json().get("id")
                        sent_id = json.loads(body).get("id")
                        if rid != sent_id:
                            self.unexpected.append(f"{kind}: id {rid!r} for request {sent_id!r}")
            except Exception as exc:  # a request not answered: counted as lost
                self.errors.append(f"{kind}: {type(exc).__name__}: {exc}"[:200])
                continue
            self.answered += 1
            self.lat[kind].append(time.perf_counter() - t0)
            self.status[code] += 1
            if code not in KINDS[kind][1]:
                self.unexpected.append(f"{kind}: HTTP {code}")


def _service_pids() -> dict[str, int]:
    """PIDs of this run's Serve actors (controller, proxy, replicas): descendants of this driver's local Ray."""
    import psutil

    out = {}
    for p in psutil.Process().children(recursive=True):
        try:
            title = " ".join(p.cmdline())
        except psutil.Error:
            continue
        if title.startswith(("ray::ServeReplica", "ray::ServeController", "ray::ProxyActor")):
            out[f"{title.split()[0]}:{p.pid}"] = p.pid
    return out


def _rss_mb(pids: dict[str, int]) -> dict[str, float]:
    import psutil

    out = {}
    for name, pid in pids.items():
        try:
            out[name] = round(psutil.Process(pid).memory_info().rss / 2**20, 1)
        except psutil.NoSuchProcess:
            out[name] = float("nan")
    return out


def _idle_rss(pids: dict[str, int], pause_s: float = 5.0) -> dict[str, float]:
    """RSS of the service's actors after `pause_s` without requests (batches done, heaps trimmed)."""
    time.sleep(pause_s)
    return _rss_mb(pids)


async def soak(s: Soak, seconds: float, concurrency: int, pids: dict[str, int]) -> list[dict[str, Any]]:
    import httpx

    samples = [{"t": 0.0, "rss_mb": _rss_mb(pids)}]
    deadline = time.monotonic() + seconds
    t0 = time.monotonic()

    async def sampler() -> None:
        while time.monotonic() < deadline:
            await asyncio.sleep(min(15.0, max(1.0, seconds / 20)))
            samples.append({"t": round(time.monotonic() - t0, 1), "rss_mb": _rss_mb(pids)})

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=s.url, timeout=120, limits=limits) as client:
        await asyncio.gather(sampler(), *(s.worker(client, deadline) for _ in range(concurrency)))
    samples.append({"t": round(time.monotonic() - t0, 1), "rss_mb": _rss_mb(pids)})
    return samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds of load before memory's baseline")
    ap.add_argument("--phases", type=int, default=6, help="load phases, memory read idle after each")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--results", action="store_true", help="also write benchmarks/results/bench_serve_soak.json")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))

    import ray
    from bench_serve import _checkpoint, workload

    from pcr_ray.serve.app import ServeSettings
    from pcr_ray.serve.deploy import start

    ckpt = _checkpoint(args.checkpoint)
    bodies = workload(64, seed=args.seed)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}})
    svc = start(ServeSettings.from_mapping(dict(  # fp32 torch, no score cache: every request runs the model
        checkpoint=str(ckpt), port=port, prm_num_cpus=0.5, ingress_num_cpus=0.25, max_body_bytes=MAX_BODY,
        torch_threads=1, runtime="torch", int8=False, cache_size=0)))
    try:
        pids = _service_pids()
        warm = Soak(svc.url, port, bodies, args.seed + 1)
        asyncio.run(soak(warm, args.warmup, args.concurrency, {}))
        s = Soak(svc.url, port, bodies, args.seed)
        samples, idle = [], [{"t": 0.0, "rss_mb": _idle_rss(pids)}]
        for phase in range(args.phases):  # load, then a pause in which the replicas go idle and RSS is read
            offset = phase * args.seconds / args.phases
            samples += [{"t": round(x["t"] + offset, 1), "rss_mb": x["rss_mb"]}
                        for x in asyncio.run(soak(s, args.seconds / args.phases, args.concurrency, pids))]
            idle.append({"t": round(offset + args.seconds / args.phases, 1), "rss_mb": _idle_rss(pids)})
    finally:
        svc.stop()
        ray.shutdown()
    first, last = idle[0]["rss_mb"], idle[-1]["rss_mb"]
    growth = {k: round(last[k] - first[k], 1) for k in first}
    total = [round(sum(x["rss_mb"].values()), 1) for x in idle]
    half = idle[len(idle) // 2]["rss_mb"]
    n5xx = sum(c for code, c in s.status.items() if code >= 500)
    sent = sum(s.sent.values())
    res = {
        "seconds": args.seconds, "concurrency": args.concurrency, "warmup_s": args.warmup, "sent": sent,
        "answered": s.answered, "lost": len(s.errors), "error_samples": s.errors[:5],
        "sent_by_kind": dict(s.sent), "status_counts": {str(k): v for k, v in sorted(s.status.items())},
        "responses_5xx": n5xx, "unexpected": len(s.unexpected), "unexpected_samples": s.unexpected[:10],
        "requests_per_s": round(s.answered / args.seconds, 1),
        "latency_ms_p50": {k: round(1000 * statistics.median(v), 1) for k, v in s.lat.items() if v},
        # memory is read idle (between load phases, after the replicas trimmed their heaps): under load it also
        # holds the batches in flight; rss_samples are the readings under load
        "phases": args.phases, "rss_idle": idle, "rss_idle_total_mb": total,
        "rss_mb_first": first, "rss_mb_last": last, "rss_growth_mb": growth,
        "rss_total_growth_mb": round(total[-1] - total[0], 1),
        "rss_total_growth_pct": round(100 * (total[-1] - total[0]) / total[0], 2) if total[0] else None,
        "rss_total_growth_second_half_mb": round(total[-1] - sum(half.values()), 1),
        "rss_growth_second_half_mb": {k: round(last[k] - half[k], 1) for k in half},
        "rss_samples": samples, "max_body_bytes": MAX_BODY,
        "ok": n5xx == 0 and not s.errors and not s.unexpected and s.answered == sent,
    }
    print(f"{sent} requests in {args.seconds:.0f}s at concurrency {args.concurrency}: answered {s.answered}, "
          f"lost {len(s.errors)}, 5xx {n5xx}, unexpected {len(s.unexpected)}; statuses {res['status_counts']}; "
          f"service RSS idle {total[0]:.0f} -> {total[-1]:.0f} MiB ({res['rss_total_growth_mb']:+} MiB; "
          f"{res['rss_total_growth_second_half_mb']:+} MiB in the second half)")
    save("bench_serve_soak", res, args.results)
    if not res["ok"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
