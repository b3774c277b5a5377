"""Corpus summaries of scored turns: coverage, verdict counts, category proportions, accuracy vs gold."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from ..data.schema import CLAIM_CATEGORIES, FAITHFUL, HALLUCINATED, UNKNOWN
from ..pipeline.engine import RULES
from .metrics import turn_summary


def _proportions(counts: Counter) -> dict[str, float]:
    total = sum(counts.values())
    return {c: (counts.get(c, 0) / total if total else 0.0) for c in (*CLAIM_CATEGORIES, None) if c or counts.get(c)}


def _categories(records: Sequence[dict[str, Any]]) -> Counter:
    return Counter(c["category"] for r in records for c in r["claims"])


def summarize(records: Sequence[dict[str, Any]], rule: str = "safe") -> dict[str, Any]:
    """Summary of :class:`TurnResult` dicts; ``rule`` picks the headline verdicts, both are reported."""
    scored = [r for r in records if r["scored"]]
    summary: dict[str, Any] = {
        "rule": rule,
        "conversations": len({r["conversation_id"] for r in records}),
        "assistant_turns": len(records),
        "scored_turns": len(scored),
        "context_turns": len(records) - len(scored),
        "claims": sum(len(r["claims"]) for r in scored),
        # nothing dropped uncounted: claims each turn lost (duplicates, beyond max_claims, a line cut at
        # the token budget, lines that were not claims) and decompositions still cut after the retry
        "claims_dropped": dict(sum((Counter(r.get("claims_dropped") or {}) for r in records), Counter())),
        "stage1_truncated_turns": sum(bool(r.get("stage1_truncated")) for r in records),
    }
    by_rule: dict[str, Any] = {}
    for rr in RULES:
        verdicts = Counter(r["verdicts"][rr] for r in scored)
        known = [r for r in scored if r["vista_scores"].get(rr) is not None]
        safe_claims = sum(r["vista_scores"][rr] * sum(c["category"] is not None for c in r["claims"]) for r in known)
        known_claims = sum(sum(c["category"] is not None for c in r["claims"]) for r in known)
        by_rule[rr] = {
            "verdicts": {k: verdicts.get(k, 0) for k in (FAITHFUL, HALLUCINATED, UNKNOWN)},
            "coverage": (1 - verdicts.get(UNKNOWN, 0) / len(scored)) if scored else None,
            "vista_score": safe_claims / known_claims if known_claims else None,
            "gold": turn_summary(records, rr),
        }
    summary["by_rule"] = by_rule
    if any("world_verdict" in r for r in scored):   # the world-knowledge stage ran: its three-way verdicts
        from ..pipeline.engine import WORLD_VERDICTS

        world = Counter(r.get("world_verdict") for r in scored)
        labels = Counter((c.get("world") or {}).get("label") for r in scored for c in r["claims"] if c.get("world"))
        summary["world"] = {"verdicts": {k: world.get(k, 0) for k in WORLD_VERDICTS},
                            "claims_asked": sum(labels.values()),
                            "claim_labels": {str(k): v for k, v in labels.items()}}
    # what answered each stage over the scored turns (a calibration's rule, the stage 1 fallback), and the turns
    # the splitter decomposed because stage 1 gave nothing usable, with the accuracy with and without them
    answered: dict[str, Counter] = defaultdict(Counter)
    for r in scored:
        for stage, who in (r.get("answered_by") or {}).items():
            answered[stage][who] += 1
    summary["answered_by"] = {stage: dict(c) for stage, c in sorted(answered.items())}
    from .attribution import fallback_summary

    summary["stage1_fallback"] = fallback_summary(records, RULES)
    summary["coverage"] = by_rule[rule]["coverage"]
    summary["accuracy"] = (by_rule[rule]["gold"] or {}).get("accuracy")
    cats = _categories(scored)
    summary["categories"] = {"counts": {str(k): v for k, v in cats.items()}, "proportions": _proportions(cats)}
    per_source: dict[str, list] = defaultdict(list)
    per_conv: dict[str, list] = defaultdict(list)
    for r in scored:
        per_source[r["source"]].append(r)
        per_conv[r["conversation_id"]].append(r)
    summary["per_source"] = {
        s: {"scored_turns": len(rs), "accuracy": (turn_summary(rs, rule) or {}).get("accuracy"),
            "coverage": sum(r["verdicts"][rule] != UNKNOWN for r in rs) / len(rs),
            "category_proportions": _proportions(_categories(rs))}
        for s, rs in sorted(per_source.items())
    }
    summary["per_conversation"] = {c: _proportions(_categories(rs)) for c, rs in per_conv.items()}
    summary["unknown"] = [
        {"conversation_id": r["conversation_id"], "turn_index": r["turn_index"], "reason": r["unknown_reason"]}
        for r in scored if r["verdicts"][rule] == UNKNOWN
    ]
    return summary
