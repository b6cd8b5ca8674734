"""The ToRA-style baseline: the model writes a Python program, the sandbox runs it, stdout holds the answer.

Attempts: a program that fails (error, timeout, blocked action, no number printed) is a failed attempt;
the next request carries what went wrong, up to `max_attempts` programs per problem. Programs never run
in this interpreter: pcr_ray.baselines.sandbox runs each in a separate, limited process, inside bubblewrap
(config `sandbox: bwrap`, the default; `unconfined` runs without it, with a warning).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pcr_ray.baselines.base import BASELINES, BaselineConfig
from pcr_ray.baselines.confine import require_bwrap
from pcr_ray.baselines.sandbox import SandboxLimits, run_program
from pcr_ray.core.answers import last_quantity
from pcr_ray.generators.base import ProposalRequest
from pcr_ray.generators.schema import extract_code
from pcr_ray.search import SearchProblem, SearchResult
from pcr_ray.search.usage import propose_counted


def limits_from(options: BaselineConfig) -> SandboxLimits:
    """The sandbox limits of each program: wall and CPU seconds, memory, output, bwrap or unconfined."""
    return SandboxLimits(wall_s=options.timeout_s, cpu_s=options.cpu_s, memory_mb=options.memory_mb,
                         output_bytes=options.output_bytes, sandbox=options.sandbox)


@BASELINES.register("pyexec")
def run_pyexec(problems: Sequence[SearchProblem], generator: Any, cfg: Mapping[str, Any] | None = None,
               ) -> list[SearchResult]:
    """Per round, one batched propose() in mode 'python' for the problems still unanswered; run each program."""
    options = BaselineConfig.from_mapping(cfg)
    limits = limits_from(options)
    if limits.sandbox == "bwrap":
        require_bwrap()  # refuse before any generation when programs could not be confined
    attempts, seed = max(1, options.max_attempts), options.seed
    t0 = time.perf_counter()
    results = [SearchResult.for_problem(p, "pyexec") for p in problems]
    for r in results:
        r.stop_reason = "no_answer"
    failures: list[Counter] = [Counter() for _ in problems]
    feedback: list[tuple[str, ...]] = [() for _ in problems]
    todo = list(range(len(problems)))
    for attempt in range(attempts):
        if not todo:
            break
        reqs = [ProposalRequest(problems[i].id, problems[i].text, problems[i].givens, k=1, mode="python",
                                feedback=feedback[i], target_unit=problems[i].target_unit, seed=seed + attempt)
                for i in todo]
        tg = time.perf_counter()
        try:
            outs, usage = propose_counted(generator, reqs)
        except Exception as exc:
            for i in todo:
                results[i].error = f"generator failed: {type(exc).__name__}: {exc}"[:500]
                results[i].stop_reason = "error"
            break
        share = (time.perf_counter() - tg) / max(1, len(todo))
        left = []
        for i, cands, (n_in, n_out) in zip(todo, outs, usage, strict=True):
            res = results[i]
            res.gen_s += share
            res.prompt_tokens += n_in
            res.output_tokens += n_out
            res.iterations += 1
            res.retries += attempt > 0
            code = extract_code(cands[0]) if cands else ""
            res.n_proposed += 1
            tv = time.perf_counter()
            run = run_program(code, limits)
            res.verify_s += time.perf_counter() - tv
            hit = last_quantity(run.stdout) if run.ok else None
            res.candidates.append({"kind": "python", "candidate": code[:1500], "failure": run.failure,
                                   "stdout": run.stdout[-300:], "stderr": run.stderr[-300:]})
            if run.ok and hit is not None:
                res.n_parsed += 1
                res.answer_value, res.answer_unit, res.stop_reason = hit.value, hit.unit, "answered"
                continue
            why = run.failure or "no number printed"
            failures[i][why] += 1
            err = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else why
            feedback[i] = (f"attempt {attempt + 1} failed ({why}): {err[:200]}",)
            left.append(i)
        todo = left
    wall = time.perf_counter() - t0
    for res, fails in zip(results, failures, strict=True):
        res.reject_codes = dict(fails)
        res.wall_s = round(wall / max(1, len(problems)), 4)
        res.gen_s, res.verify_s = round(res.gen_s, 4), round(res.verify_s, 4)
    return results
