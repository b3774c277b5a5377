"""The time budget of an evaluation (``eval.max_minutes``): the seeded order, the rounds' sizes and where the
whole-reference probes go."""

from __future__ import annotations

import random
from typing import Any

from ..data.schema import Conversation
from .errors import EvalError


def budget_order(conversations: list[Conversation], e: Any) -> list[Conversation]:
    """The evaluation order: as given, or (``eval.max_minutes``) shuffled with ``eval.seed``, so that a budget cut
    leaves a sample of the material, not its first sources."""
    if not e.max_minutes:
        return conversations
    if e.max_minutes <= 0 or e.round_size < 1:
        raise EvalError(f"eval.max_minutes must be > 0 and eval.round_size >= 1, got {e.max_minutes}, {e.round_size}")
    shuffled = list(conversations)
    random.Random(e.seed).shuffle(shuffled)
    return shuffled


def probed_conversations(ordered: list[Conversation], n: int | None) -> set[str] | None:
    """The ids of the ``n`` conversations whose claims get the whole-reference probes (``eval.evidence_conversations``;
    None: all), spread evenly over the evaluation order: every round then carries its share of the probes, so the first
    round's pace stands for the rounds after it (with the first ``n`` probed, the demo's first round measured the claim
    level slower a dialogue than its later rounds ran), and a budget cut leaves probed dialogues across the sample."""
    if n is None or n >= len(ordered):
        return None if n is None else {c.id for c in ordered}
    return {ordered[k * len(ordered) // n].id for k in range(n)}


def next_round(total: int, done: int, given_done: int, spent_s: float, given_s: float, e: Any,
               spent_before_s: float = 0.0) -> tuple[int, int]:
    """How many conversations the next round takes, (whole pipeline, claim level): all of them without a budget;
    else a first round of ``eval.round_size`` measures the pace, and the next takes as many of the rest as that
    pace fits in what is left of ``eval.max_minutes`` (all of them when they fit: one round batches best). Where the
    budget binds, a round takes at most as many conversations as the pace was measured on (``round_size``, or all
    run so far): the pace of a few dialogues is noisy (one long stage-1 list), and a round twice too slow for its
    estimate would overrun the budget by its whole length.

    With ``eval.given_claims`` the claim level (stages 2-3 on the human claims and the evidence probes, a few
    forward passes a claim) comes first: it extends to every conversation that its own pace fits, and the whole
    pipeline (stage 1 generates) gets what is left, so a slow CPU still tests the claim level on all the material.
    ``spent_before_s``: budget spent before the rounds (``eval.tune_on``'s dev split), not part of their pace."""
    if not e.max_minutes:
        return total, total
    if done == 0:
        first = min(e.round_size, total)
        return first, first
    left = e.max_minutes * 60 - spent_s - spent_before_s
    claims_first = e.given_claims and given_s > 0
    per_given = given_s / given_done if claims_first else 0.0
    per_pipe = (spent_s - given_s) / done if claims_first else spent_s / done
    n_given = total - given_done
    if claims_first:
        n_given = max(0, min(n_given, int(left / per_given)))
        left -= n_given * per_given
    n_pipe = max(0, min(total - done, int(left / per_pipe))) if per_pipe > 0 else total - done
    if n_pipe < total - done:   # the budget binds: at most as many as the pace was measured on, then measure again
        n_pipe = min(n_pipe, max(e.round_size, done))
    if not claims_first:
        return n_pipe, n_pipe
    return min(n_pipe, given_done + n_given - done), n_given


__all__ = ["budget_order", "next_round", "probed_conversations"]
