"""`pcr-ray solve "TEXT" [overrides]`: one problem, the configured generator and method, the trace printed.

    pcr-ray solve "A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go?"
    pcr-ray solve "..." generator=enumerate method=prm_only search.beam_width=8
    pcr-ray solve "..." generator=llamacpp method=pyexec
    pcr-ray solve --verbose "..."      # also the PRM's checkpoint and scoring kernel, with the rates measured

Prints the givens, every step of the chosen trace with its verifier verdict and PRM score, and a last line
`answer: VALUE UNIT`. Exit status 0 when an answer was found, 1 when not, 2 on bad input.
Callable as a function: `solve(text, cfg)` returns (SearchResult, printed text).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from pcr_ray.baselines import BASELINES, run_baseline
from pcr_ray.commands.hydra_app import run_hydra
from pcr_ray.configs import compose as compose_checked
from pcr_ray.configs import to_plain
from pcr_ray.generators.base import GENERATORS, build_generator, generator_kind
from pcr_ray.generators.givens_llm import build_extractor
from pcr_ray.prm.build import build_scorer
from pcr_ray.prm.checkpoints import trained_on
from pcr_ray.search import STRATEGIES, SearchConfig, SearchProblem, SearchResult, run_search, target_unit_of


def compose(overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The solve config (conf/solve.yaml + overrides), composed and checked, as a plain dict."""
    return sized_for_one_problem(compose_checked("solve", overrides), overrides)


def sized_for_one_problem(cfg: Any, overrides: Sequence[str]) -> dict[str, Any]:
    """A checked solve config as a plain dict, the enumerator's cap set to `enumerator_cap` unless an override
    sets generator.cap: sized for one problem (a benchmark's enumerator cap is larger)."""
    cfg = to_plain(cfg)
    gen = cfg["generator"]
    sets_cap = any(o.startswith(("generator.cap=", "+generator.cap=")) for o in overrides)
    if GENERATORS.canonical(generator_kind(gen)) == "enumerate" and not sets_cap:
        gen["cap"] = int(cfg["enumerator_cap"])  # sized for one problem; a benchmark's enumerator cap is larger
    return cfg


def load_scorer(prm_cfg: Mapping[str, Any]) -> Any:
    """The PRMScorer prm_cfg names (pcr_ray.prm.build: a checkpoint folder, or `quick`)."""
    return build_scorer(prm_cfg)


def make_problem(text: str, cfg: Mapping[str, Any], generator: Any = None) -> SearchProblem:
    """Givens and target of a free text via the configured extractor (rule-based or the LLM one)."""
    ex_cfg = cfg["givens"]
    extractor = build_extractor(ex_cfg, generator if ex_cfg["kind"] == "llm" and ex_cfg["reuse_generator"] else None)
    ex = extractor.extract(text)
    target = cfg["target_unit"] or target_unit_of(ex.target)
    return SearchProblem("solve", text, ex.givens, target or "", givens_source=str(ex_cfg["kind"]))


def _fmt(x: float | None) -> str:
    return "?" if x is None else f"{x:.6g}"


def format_result(problem: SearchProblem, res: SearchResult, *, show_candidates: bool = False) -> str:
    """The printed report: givens, target, steps with verdicts and scores, stats, and the answer line."""
    lines = [f"problem: {problem.text.strip()}",
             "givens: " + ("; ".join(f"{g.name} = {_fmt(g.value)} {g.unit}" + (f" ({g.desc})" if g.desc else "")
                                     for g in problem.givens) or "(none found)"),
             f"asked unit: {problem.target_unit or '(unknown)'}",
             f"method: {res.method}"]
    if show_candidates and res.candidates:
        lines.append("candidates:")
        for c in res.candidates:
            score = "" if c.get("score") is None else f"  PRM {c['score']:.3f}"
            lines.append(f"  it{c.get('iter', 0)} b{c.get('beam', 0)} {c.get('kind', '')}: {c.get('verdict', '')}"
                         f"{score}  {c.get('candidate', '')[:160]}")
    for i, s in enumerate(res.steps, 1):
        score = "-" if s.get("score") is None else f"{s['score']:.3f}"
        lines.append(f"[{i}] {s['step']}   verdict: {s['verdict']}   PRM: {score}")
    if res.trace and res.trace.get("answer"):
        a = res.trace["answer"][0]
        lines.append(f"declared answer: {a['name']} [{a['unit']}]   final check: "
                     f"{'ok' if res.trace_ok else '; '.join(res.final_diagnostics) or 'failed'}")
    lines.append(f"stats: {res.n_proposed} proposed, {res.n_parsed} parsed, {res.n_verified} verified, "
                 f"{res.n_scored} scored ({res.n_prm_calls} PRM calls); {res.retries} retries, {res.backtracks} "
                 f"backtracks; {res.wall_s:.2f} s; stop: {res.stop_reason}" + (f"; error: {res.error}" if res.error
                                                                              else ""))
    if res.answer_value is None:
        lines.append("answer: none")
    else:
        lines.append(f"answer: {_fmt(res.answer_value)} {res.answer_unit}".rstrip())
    return "\n".join(lines)


def describe_scorer(scorer: Any) -> str:
    """One line on a PRM scorer: its checkpoint, the kernel it scores with, and the rates that chose it."""
    ident = dict(getattr(scorer, "identity", {}) or {})
    k = dict(ident.get("kernel") or {})
    rates = ", ".join(f"{name} {v:,.0f}" for name, v in (k.get("rates") or {}).items())
    line = (f"prm: {ident.get('checkpoint', '?')} ({ident.get('attention', 'pair')}, {ident.get('runtime', '?')}); "
            f"kernel {k.get('kernel', '?')}" + (f" [{rates} {k.get('unit', '')}]" if rates else "")
            + (f": {k['reason']}" if k.get("reason") else ""))
    on = trained_on(ident["checkpoint"]) if ident.get("checkpoint") else None
    if on:  # a quick checkpoint: the data it was trained on (an optional data set may have been absent)
        sources = ", ".join(f"{name} {n if isinstance(n, int) else 'absent'}" for name, n in on["problems"].items())
        line += f"\nprm trained on: {sources} problems; {on['train_pairs']} train pairs"
    return line


def solve(text: str, cfg: Mapping[str, Any], *, generator: Any = None, scorer: Any = None, verbose: bool = False,
          ) -> tuple[SearchResult, str]:
    """Solve one problem text with the config (compose() output); returns the result and the printed text.

    verbose adds a line on the PRM (describe_scorer) before the report."""
    if not text or not text.strip():
        raise ValueError("the problem text is empty")
    method = cfg["method"]
    name = str(method["name"])
    gen = generator if generator is not None else build_generator(dict(cfg["generator"]))
    problem = make_problem(text, cfg, gen)
    sc = None
    if name in BASELINES:
        res = run_baseline(name, [problem], gen, dict(method["baseline"]))[0]
    elif name in STRATEGIES:
        scfg = SearchConfig.from_dict({**cfg["search"], **method["search"],
                                       "method": name, "log_candidates": bool(cfg["show_candidates"])})
        sc = scorer if scorer is not None or not scfg.uses_prm else load_scorer(dict(cfg["prm"]))
        res = run_search([problem], gen, sc, scfg)[0]
    else:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(STRATEGIES.names() + BASELINES.names())}")
    report = format_result(problem, res, show_candidates=bool(cfg["show_candidates"]))
    if verbose and sc is not None:
        report = f"{describe_scorer(sc)}\n{report}"
    return res, report


def main(argv: list[str]) -> int:
    """`pcr-ray solve "TEXT" [key=value ...]` (a Hydra app over conf/solve.yaml after the text)."""
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    verbose = any(a in ("-v", "--verbose") for a in argv)
    argv = [a for a in argv if a not in ("-v", "--verbose")]
    if not argv:
        print(__doc__.strip())
        return 2
    text, overrides = argv[0], list(argv[1:])
    if "=" in text.split(" ")[0] and len(text.split()) == 1:
        print("pcr-ray solve: the first argument is the problem text (quote it), then key=value overrides",
              file=sys.stderr)
        return 2

    def job(cfg: Any) -> int:
        try:
            res, report = solve(text, sized_for_one_problem(cfg, overrides), verbose=verbose)
        except (ValueError, FileNotFoundError, RuntimeError) as exc:  # bad input: exit 2, as documented
            print(f"pcr-ray solve: {exc}", file=sys.stderr)
            return 2
        print(report)
        return 0 if res.answer_value is not None else 1

    return run_hydra("solve", "solve", overrides, job, __doc__.strip())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
