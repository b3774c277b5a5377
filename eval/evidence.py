"""Does a system read its evidence? Three probes of stage 2 on the human claims, each the system's own stage 2
request with only its REFERENCE TEXT changed (background, prompt and claim as the engine rendered them):

* ``deletion``: every claim the system calls VERIFIED against its reference, against the reference minus the
  sentences that support it (:func:`pipeline.evidence.support`; claims whose support cannot be placed in a few
  sentences are left out and counted). ``deletion_flip_rate``: the share then called UNVERIFIABLE.
* ``foreign``: every claim labelled VERIFIED by the humans, against another evaluated turn's reference sharing
  under half of its content words (seeded). ``foreign_reference_auc``: ROC AUC of P(VERIFIED) with the own
  reference (positive) against the foreign one (negative): 0.5 when the reference makes no difference, 1.0 when
  every own reference scores above every foreign one.
* ``claim_only``: every claim against an empty reference. ``claim_only_accuracy``: stage 2 accuracy against the
  human labels so; beside it ``accuracy``, the same claims with their references. A system that reads its
  evidence loses accuracy without it.

A served system without label probabilities is ranked by its labels (ties count half in the AUC).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import Any

from ..data.schema import UNVERIFIABLE, VERIFIED
from ..pipeline.engine import STAGE2_LABELS, label_result
from ..pipeline.evidence import foreign_reference, stage2_calls, support

PROBES = ("deletion", "foreign", "claim_only")


def _with_input(req: Any, text: str) -> Any:
    last = {**req.messages[-1], "content": text}
    return dataclasses.replace(req, messages=(*req.messages[:-1], last))


def p_verified(stage2: dict[str, Any] | None) -> float | None:
    if not stage2:
        return None
    probs = stage2.get("probs") or {}
    if VERIFIED in probs:
        return float(probs[VERIFIED])
    return None if stage2.get("label") is None else float(stage2["label"] == VERIFIED)


def probe_requests(results: Sequence[Sequence[Any]], seed: int = 0) -> tuple[list[dict[str, Any]], list[Any]]:
    """(one record per probe, its request) for the given-claims TurnResults of one system (with their calls).
    Records hold the claim's key, gold label, the system's own stage 2 answer and what the probe changed."""
    turns = [res for conv in results for res in conv if res.scored and res.reference]
    calls = [(res, call) for res in turns for call in stage2_calls(res)]
    pool = list(dict.fromkeys(call.reference for _, call in calls))
    records, requests = [], []
    skipped: dict[str, int] = {}
    for res, call in calls:
        claim = res.claims[call.claim_index]
        gold_label = {g.get("text"): g.get("label") for g in res.gold_claims or []}.get(call.claim)
        gold_binary = None if gold_label is None else (VERIFIED if gold_label == VERIFIED else UNVERIFIABLE)
        own = claim.stage2 or {}
        base = {"conversation_id": res.conversation_id, "turn_index": res.turn_index, "claim_index": call.claim_index,
                "claim": call.claim, "gold": gold_binary, "own_label": own.get("label"),
                "own_p_verified": p_verified(own)}
        if call.request is None:
            continue
        if own.get("label") == VERIFIED:
            sup, why = support(call.claim, call.reference)
            if sup is None:
                skipped[why] = skipped.get(why, 0) + 1
            else:
                records.append({**base, "probe": "deletion", "removed": list(sup.removed),
                                "coverage_left": sup.coverage_left})
                requests.append(_with_input(call.request, call.with_reference(sup.remainder)))
        if gold_binary == VERIFIED:
            rng = random.Random(f"foreign:{seed}:{res.conversation_id}:{res.turn_index}:{call.claim}")
            other = foreign_reference(call.claim, call.reference, pool, rng, avoid=call.head)
            if other is not None:
                records.append({**base, "probe": "foreign", "foreign_reference": other[:200]})
                requests.append(_with_input(call.request, call.with_reference(other)))
        if gold_binary is not None:
            records.append({**base, "probe": "claim_only"})
            requests.append(_with_input(call.request, call.with_reference("")))
    for why, n in skipped.items():
        records.append({"probe": "deletion_skipped", "reason": why, "claims": n})
    return records, requests


def run_probes(results: Sequence[Sequence[Any]], backend: Any, seed: int = 0,
               on_issue: Callable[[str, int], None] | None = None) -> list[dict[str, Any]]:
    """The probe records of :func:`probe_requests`, answered by ``backend`` (one batch; ``on_issue(stage, n)`` is
    told first, like the engine's)."""
    records, requests = probe_requests(results, seed)
    if requests and on_issue is not None:
        on_issue("evidence probes", len(requests))
    answers = backend.run(requests) if requests else []
    answered = iter(answers)
    for r in records:
        if r["probe"] in PROBES:
            label, info, err = label_result(next(answered), STAGE2_LABELS)
            r.update(label=label, p_verified=p_verified(info), error=err)
    return records


def evidence_metrics(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``deletion_flip_rate``, ``foreign_reference_auc`` and ``claim_only_accuracy`` (stage 2), with their counts,
    from :func:`run_probes` records (several rounds' records may be joined)."""
    from sklearn.metrics import roc_auc_score

    by = {p: [r for r in records if r.get("probe") == p] for p in PROBES}
    dele = by["deletion"]
    flips = sum(r["label"] == UNVERIFIABLE for r in dele)
    pairs = [(r["own_p_verified"], r["p_verified"]) for r in by["foreign"]
             if r["own_p_verified"] is not None and r["p_verified"] is not None]
    auc = None
    if pairs:
        own, foreign = zip(*pairs)
        auc = float(roc_auc_score([1] * len(own) + [0] * len(foreign), [*own, *foreign]))
    co = [r for r in by["claim_only"] if r["gold"] is not None]
    skipped: dict[str, int] = {}
    for r in records:
        if r.get("probe") == "deletion_skipped":
            skipped[r["reason"]] = skipped.get(r["reason"], 0) + r["claims"]
    return {
        "stage": "stage2",
        "deletion_flip_rate": flips / len(dele) if dele else None,
        "deletion": {"claims": len(dele), "flipped": flips, "not_placed": skipped},
        "foreign_reference_auc": auc,
        "foreign": {"claims": len(pairs),
                    "said_verified_own": sum(r["own_label"] == VERIFIED for r in by["foreign"]),
                    "said_verified_foreign": sum(r["label"] == VERIFIED for r in by["foreign"])},
        "claim_only_accuracy": sum(r["label"] == r["gold"] for r in co) / len(co) if co else None,
        "accuracy": sum(r["own_label"] == r["gold"] for r in co) / len(co) if co else None,
        "claim_only": {"claims": len(co), "said_verified": sum(r["label"] == VERIFIED for r in co)},
    }


__all__ = ["PROBES", "evidence_metrics", "probe_requests", "run_probes"]
