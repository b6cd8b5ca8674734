"""Seeded random walks over the primitive registry: verified traces of any family, for CSP property tests."""

from __future__ import annotations

import random

from pcr_ray.core.primitives import REGISTRY
from pcr_ray.core.trace import Answer, Given, Out, Step, Trace
from pcr_ray.core.units import canonical_unit
from pcr_ray.core.verifier import VerifierState, check_step, verify

GIVEN_TABLE: tuple[tuple[str, str, float, float], ...] = (
    ("v0", "m/s", 0.0, 20.0), ("v", "m/s", 5.0, 40.0), ("u", "m/s", 1.0, 30.0), ("a", "m/s^2", 0.5, 9.0),
    ("t", "s", 1.0, 20.0), ("t2", "s", 0.5, 10.0), ("d", "m", 5.0, 500.0), ("h", "m", 1.0, 80.0),
    ("r", "m", 0.5, 10.0), ("m", "kg", 0.5, 50.0), ("m2", "kg", 1.0, 20.0), ("F", "N", 1.0, 200.0),
    ("k", "dimensionless", 0.1, 0.9), ("n", "item", 2.0, 40.0), ("price", "USD", 1.0, 80.0),
    ("cost", "USD", 2.0, 50.0), ("x", "dimensionless", 2.0, 30.0), ("y", "dimensionless", 1.0, 12.0),
    ("T", "K", 250.0, 400.0), ("V", "V", 1.0, 24.0), ("I", "A", 0.1, 5.0), ("R", "ohm", 1.0, 100.0),
)
_OPS = sorted(n for n, p in REGISTRY.items() if all(q.kind == "var" for q in p.params) and not p.variadic)


def random_trace(seed: int, n_givens: tuple[int, int] = (3, 6), n_steps: tuple[int, int] = (2, 6)) -> Trace:
    """A verified trace: random givens, then steps whose op and arguments are drawn until the verifier accepts."""
    rng = random.Random(seed)
    picks = rng.sample(GIVEN_TABLE, rng.randint(*n_givens))
    givens = tuple(Given(n, round(rng.uniform(lo, hi), 2), u) for n, u, lo, hi in picks)
    state, _ = VerifierState.from_givens(givens)
    steps: list[Step] = []
    want = rng.randint(*n_steps)
    attempts = 0
    while len(steps) < want and attempts < 400:
        attempts += 1
        prim = REGISTRY[rng.choice(_OPS)]
        names = list(state.env)
        if steps and rng.random() < 0.7:  # lean on recent results so that traces chain
            names = names[-3:] + names
        args = {p.name: rng.choice(names) for p in prim.params}
        try:
            dims = {k: state.env[a].dims for k, a in args.items()}
            prim.check_args(dims)
            out = prim.out_dims_for(dims, {k: state.env[a].base for k, a in args.items()})
        except Exception:  # noqa: BLE001
            continue
        step = Step(prim.name, args, Out(f"s{len(steps)}", canonical_unit(out)))
        chk = check_step(state, step)
        if not chk.ok or chk.result is None or abs(chk.result.base) > 1e12:
            continue
        steps.append(Step(step.op, step.args, step.out, chk.result.value))
        assert chk.state is not None
        state = chk.state
    if not steps:
        return random_trace(seed + 10_000, n_givens, n_steps)
    tr = Trace(givens, tuple(steps), (Answer(steps[-1].out.name, steps[-1].out.unit),))
    assert verify(tr).ok
    return tr
