"""How an off-the-shelf PRM reads one of our (context, step) pairs: the question with its givens, the steps as
sentences, and the qwen_prm convention's chat turns (pcr_ray.prm.causal_lm in-process, pcr_ray.prm.served over
HTTP)."""

from __future__ import annotations

SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


def split_context(context: str) -> tuple[str, list[str]]:
    """(question with its givens, the prefix's steps) of a rendered context (pcr_ray.core.render.render_context)."""
    parts = [p.strip() for p in context.split(" | ")]
    question = [p for p in parts if not p.startswith("steps: ")]
    steps = next((p[len("steps: "):] for p in parts if p.startswith("steps: ")), "")
    return " Givens: ".join(question).replace("Givens: givens: ", "Givens: "), [s for s in steps.split("; ") if s]


def natural_step(step: str) -> str:
    """A DSL step as a sentence: `d = kin_displacement(v0=v0, a=a, t=t) = 25 [m]` -> `Compute d = ... = 25 m.`"""
    text = step.strip().replace(" [", " ").replace("]", "")
    return f"Compute {text}." if not text.startswith("answer") else f"The {text}."


def chat_messages(context: str, step: str, separator: str) -> list[dict[str, str]]:
    """A pair as the qwen_prm convention's chat: the system prompt, the question as the user turn, the prefix's
    steps and the candidate as the assistant's, each followed by `separator`."""
    question, prefix = split_context(context)
    body = "".join(f"{natural_step(s)}{separator}" for s in [*prefix, step])
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question},
            {"role": "assistant", "content": body}]
