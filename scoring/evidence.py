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

Those three a word-overlap rule passes by construction (deletion takes the overlapping sentences away, the foreign
reference shares under half of the words, an empty one none). Two measures it cannot pass:

* ``edit``: every claim labelled VERIFIED by the humans, against its reference with the sentence that holds most of
  its words changed to contradict it (one number, date or entity the claim repeats swapped, or its verb negated:
  :func:`pipeline.edits.edit_sentence`, VitaminC-style; most words stay). ``edit_flip_rate``: the share then called
  UNVERIFIABLE; ``edit_auc``: P(VERIFIED) own reference against edited.
* the overlap-disagreement strata of the human claims (``strata``): VERIFIED claims whose reference phrases them
  otherwise (under half of their content words in it) and unverifiable claims whose words it does hold; the
  system's stage 2 accuracy on each. The overlap rule is wrong on every one of them.

A served system without label probabilities is ranked by its labels (ties count half in the AUC).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Container, Sequence
from typing import Any

from ..data.schema import UNVERIFIABLE, VERIFIED
from ..pipeline.edits import edit_sentence
from ..pipeline.engine import STAGE2_LABELS, label_result
from ..pipeline.evidence import SUPPORTED, content_words, coverage, foreign_reference, sentences, stage2_calls, support

PROBES = ("deletion", "foreign", "claim_only", "edit")
STRATA = {"verified_low_overlap": "human VERIFIED, reference holds under half of the claim's content words",
          "unverifiable_high_overlap": "human unverifiable, reference holds at least half of them"}


def edited_reference(claim: str, reference: str, rng: random.Random) -> tuple[str, dict[str, str]] | None:
    """``reference`` with the sentence holding most of the claim's content words changed to contradict the claim
    (:func:`pipeline.edits.edit_sentence`), and what changed; None when no sentence holds any of them or none of
    its values or verbs can be changed."""

    words = content_words(claim)
    sents = sentences(reference)
    if not words or not sents:
        return None
    best = max(sents, key=lambda x: len(words & content_words(x)))
    if not words & content_words(best):
        return None
    edited = edit_sentence(best, claim, reference, rng)
    if edited is None:
        return None
    at = reference.find(best)
    return reference[:at] + edited[0] + reference[at + len(best):], {**edited[1], "sentence": best}


def p_verified(stage2: dict[str, Any] | None) -> float | None:
    if not stage2:
        return None
    probs = stage2.get("probs") or {}
    if VERIFIED in probs:
        return float(probs[VERIFIED])
    return None if stage2.get("label") is None else float(stage2["label"] == VERIFIED)


def probe_requests(results: Sequence[Sequence[Any]], seed: int = 0, reference_probes: Container[str] | None = None,
                   ) -> tuple[list[dict[str, Any]], list[Any]]:
    """(one record per probe, its request) for the given-claims TurnResults of one system (with their calls).
    Records hold the claim's key, gold label, the system's own stage 2 answer and what the probe changed.
    ``reference_probes``: the conversations whose claims get the probes that send a whole reference again
    (deletion, foreign, edit: most of the probes' compute); None: all. Every claim gets ``claim_only``."""
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
                "own_p_verified": p_verified(own), "overlap": coverage(call.claim, call.reference)}
        if call.request is None:
            continue
        whole = reference_probes is None or res.conversation_id in reference_probes
        if whole and own.get("label") == VERIFIED:
            sup, why = support(call.claim, call.reference)
            if sup is None:
                skipped[why] = skipped.get(why, 0) + 1
            else:
                records.append({**base, "probe": "deletion", "removed": list(sup.removed),
                                "coverage_left": sup.coverage_left})
                requests.append(call.request_with_reference(sup.remainder))
        if whole and gold_binary == VERIFIED:
            rng = random.Random(f"foreign:{seed}:{res.conversation_id}:{res.turn_index}:{call.claim}")
            other = foreign_reference(call.claim, call.reference, pool, rng, avoid=call.head)
            if other is not None:
                records.append({**base, "probe": "foreign", "foreign_reference": other[:200]})
                requests.append(call.request_with_reference(other))
            rng = random.Random(f"edit:{seed}:{res.conversation_id}:{res.turn_index}:{call.claim}")
            edit = edited_reference(call.claim, call.reference, rng)
            if edit is None:
                why = "edit:no value or verb of the claim to change"
                skipped[why] = skipped.get(why, 0) + 1
            else:
                records.append({**base, "probe": "edit", "edit": edit[1]})
                requests.append(call.request_with_reference(edit[0]))
        if gold_binary is not None:
            records.append({**base, "probe": "claim_only"})
            requests.append(call.request_with_reference(""))
    for why, n in skipped.items():
        probe, _, reason = why.partition(":") if why.startswith("edit:") else ("deletion", "", why)
        records.append({"probe": f"{probe}_skipped", "reason": reason, "claims": n})
    return records, requests


def run_probes(results: Sequence[Sequence[Any]], backend: Any, seed: int = 0,
               on_issue: Callable[[str, int], None] | None = None,
               reference_probes: Container[str] | None = None) -> list[dict[str, Any]]:
    """The probe records of :func:`probe_requests`, answered by ``backend`` (one batch; ``on_issue(stage, n)`` is
    told first, like the engine's)."""
    records, requests = probe_requests(results, seed, reference_probes)
    if requests and on_issue is not None:
        on_issue("evidence probes", len(requests))
    answers = backend.run(requests) if requests else []
    answered = iter(answers)
    for r in records:
        if r["probe"] in PROBES:
            label, info, err = label_result(next(answered), STAGE2_LABELS)
            r.update(label=label, p_verified=p_verified(info), error=err)
    return records


def _auc(pairs: Sequence[tuple[float, float]]) -> float | None:
    """ROC AUC of the first scores (positive) against the second (negative)."""
    from sklearn.metrics import roc_auc_score

    if not pairs:
        return None
    own, other = zip(*pairs)
    return float(roc_auc_score([1] * len(own) + [0] * len(other), [*own, *other]))


def _skipped(records: Sequence[dict[str, Any]], probe: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        if r.get("probe") == f"{probe}_skipped":
            out[r["reason"]] = out.get(r["reason"], 0) + r["claims"]
    return out


def strata_metrics(claim_only: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Stage 2 accuracy (the system's own answer, with its reference) on each overlap-disagreement stratum."""
    out = {}
    for name in STRATA:
        want = VERIFIED if name == "verified_low_overlap" else UNVERIFIABLE
        rs = [r for r in claim_only if r["gold"] == want and r.get("overlap") is not None
              and (r["overlap"] < SUPPORTED) == (want == VERIFIED)]
        out[name] = {
            "claims": len(rs),
            "accuracy": sum(r["own_label"] == r["gold"] for r in rs) / len(rs) if rs else None,
        }
    return out


def evidence_metrics(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``deletion_flip_rate``, ``foreign_reference_auc``, ``claim_only_accuracy``, ``edit_flip_rate``, ``edit_auc``
    and the overlap-disagreement ``strata`` (stage 2), with their counts, from :func:`run_probes` records (several
    rounds' records may be joined)."""
    by = {p: [r for r in records if r.get("probe") == p] for p in PROBES}
    dele, edit = by["deletion"], by["edit"]
    flips = sum(r["label"] == UNVERIFIABLE for r in dele)

    def scored(rs: list[dict[str, Any]]) -> list[tuple[float, float]]:
        return [(r["own_p_verified"], r["p_verified"]) for r in rs
                if r["own_p_verified"] is not None and r["p_verified"] is not None]

    foreign, edited = scored(by["foreign"]), scored(edit)
    co = [r for r in by["claim_only"] if r["gold"] is not None]
    edit_flips = sum(r["label"] == UNVERIFIABLE for r in edit)
    return {
        "stage": "stage2",
        "deletion_flip_rate": flips / len(dele) if dele else None,
        "deletion": {"claims": len(dele), "flipped": flips, "not_placed": _skipped(records, "deletion")},
        "foreign_reference_auc": _auc(foreign),
        "foreign": {"claims": len(foreign),
                    "said_verified_own": sum(r["own_label"] == VERIFIED for r in by["foreign"]),
                    "said_verified_foreign": sum(r["label"] == VERIFIED for r in by["foreign"])},
        "claim_only_accuracy": sum(r["label"] == r["gold"] for r in co) / len(co) if co else None,
        "accuracy": sum(r["own_label"] == r["gold"] for r in co) / len(co) if co else None,
        "claim_only": {"claims": len(co), "said_verified": sum(r["label"] == VERIFIED for r in co)},
        "edit_flip_rate": edit_flips / len(edit) if edit else None,
        "edit_auc": _auc(edited),
        "edit": {"claims": len(edit), "flipped": edit_flips,
                 "both_right": sum(r["own_label"] == VERIFIED and r["label"] == UNVERIFIABLE for r in edit),
                 "not_edited": _skipped(records, "edit")},
        "strata": strata_metrics(co),
    }


__all__ = ["PROBES", "STRATA", "edited_reference", "evidence_metrics", "probe_requests", "run_probes", "strata_metrics"]
