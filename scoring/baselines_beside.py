"""A scorer beside the cheap baselines on the same human claims (``score`` on input with human claims, the summary's
``baselines``): each one's claim accuracy and turn accuracy under each turn rule, and McNemar of the scorer against
each baseline. The baselines themselves are backends (:mod:`..backends.cheap_baselines`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .metrics import claim_correctness, turn_summary
from .significance import paired_mcnemar


def baselines_beside(conversations: Sequence[Any], config: Any, own: Sequence[dict[str, Any]], rules: Sequence[str],
                     majority: dict[str, str] | None = None) -> dict[str, Any]:
    """The cheap baselines on the same human claims as a scorer's own given-claims records ``own``
    (:mod:`..backends.cheap_baselines`: ``overlap`` always, ``majority`` with the silver training labels when given):
    each one's stage 2 accuracy on the claims and turn accuracy from them under each turn rule of ``rules``, and
    McNemar of the scorer against each (``score`` on input with human claims)."""
    import dataclasses

    from ..backends.cheap_baselines import BaselineBackend
    from .run import run_given_claims

    cfg = dataclasses.replace(config, stage2="score", stage3="score", world=False)
    systems = {"scorer": list(own),
               "overlap": run_given_claims(conversations, cfg, BaselineBackend("overlap"), evidence_seed=None)[0]}
    if majority:
        systems["majority"] = run_given_claims(conversations, cfg, BaselineBackend("majority", majority=majority),
                                               evidence_seed=None)[0]
    correct = {n: claim_correctness(rs) for n, rs in systems.items()}
    out: dict[str, Any] = {"claims": {}, "turns": {}, "mcnemar": []}
    for n, rs in systems.items():
        c = correct[n]
        out["claims"][n] = {"n": len(c), "accuracy": sum(c.values()) / len(c) if c else None}
        out["turns"][n] = {rule: turn_summary(rs, rule) for rule in rules}
    for n in systems:
        if n != "scorer":
            keys = sorted(set(correct["scorer"]) & set(correct[n]))
            test = paired_mcnemar([correct["scorer"][k] for k in keys], [correct[n][k] for k in keys])
            out["mcnemar"].append({"system_1": "scorer", "system_2": n, "level": "claims (stage 2)", **test})
    return out
