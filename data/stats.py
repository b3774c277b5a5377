"""Summary statistics of a conversation file (``vista-distill data stats``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from .schema import FAITHFUL, HALLUCINATED, Conversation

PERCENTILES = (50, 90, 99)


def _percentile(sorted_values: Sequence[int], q: float) -> int:
    """Nearest-rank percentile (no interpolation: lengths stay integers)."""
    if not sorted_values:
        return 0
    k = max(0, min(len(sorted_values) - 1, -(-q * len(sorted_values) // 100) - 1))
    return sorted_values[int(k)]


def conversation_stats(conversations: Sequence[Conversation]) -> dict[str, Any]:
    per_source: dict[str, Counter] = {}
    labels: Counter = Counter()
    claim_labels: Counter = Counter()
    ref_words, ref_chars = [], []
    turns = scored = claims = turns_with_claims = 0
    for conv in conversations:
        src = per_source.setdefault(conv.source, Counter())
        src["conversations"] += 1
        turns += len(conv.turns)
        for idx in conv.scored_turns:
            t = conv.turns[idx]
            scored += 1
            src["scored_turns"] += 1
            label = t.gold_label or "unlabelled"
            labels[label] += 1
            src[label] += 1
            ref_words.append(len((t.reference or "").split()))
            ref_chars.append(len(t.reference or ""))
            if t.gold_claims is not None:
                turns_with_claims += 1
                claims += len(t.gold_claims)
                src["claims"] += len(t.gold_claims)
                claim_labels.update(c.label or "unlabelled" for c in t.gold_claims)
    ref_words.sort()
    ref_chars.sort()
    labelled = labels[FAITHFUL] + labels[HALLUCINATED]
    return {
        "conversations": len(conversations),
        "turns": turns,
        "scored_turns": scored,
        "labels": dict(labels.most_common()),
        "hallucinated_share": round(labels[HALLUCINATED] / labelled, 4) if labelled else None,
        "per_source": {s: dict(c) for s, c in sorted(per_source.items())},
        "claims": claims,
        "turns_with_claims": turns_with_claims,
        "claim_labels": dict(claim_labels.most_common()),
        "reference_words": {f"p{q}": _percentile(ref_words, q) for q in PERCENTILES}
        | {"max": ref_words[-1] if ref_words else 0},
        "reference_chars": {f"p{q}": _percentile(ref_chars, q) for q in PERCENTILES}
        | {"max": ref_chars[-1] if ref_chars else 0},
    }


def format_stats(stats: dict[str, Any], title: str | None = None) -> str:
    lines = [title] if title else []
    lines.append(f"conversations   {stats['conversations']}")
    lines.append(f"turns           {stats['turns']}")
    lines.append(f"scored turns    {stats['scored_turns']}")
    lab = stats["labels"]
    share = stats["hallucinated_share"]
    lines.append("label balance   " + (", ".join(f"{k} {v}" for k, v in lab.items()) or "-")
                 + (f"  (hallucinated {share:.1%} of labelled)" if share is not None else ""))
    lines.append("per source")
    cols = ["conversations", "scored_turns", FAITHFUL, HALLUCINATED, "unlabelled", "claims"]
    width = max([len(s) for s in stats["per_source"]] + [6])
    lines.append(f"  {'source':<{width}}  " + "  ".join(f"{c:>13}" for c in cols))
    for src, c in stats["per_source"].items():
        lines.append(f"  {src:<{width}}  " + "  ".join(f"{c.get(k, 0):>13}" for k in cols))
    if stats["claims"]:
        lines.append(f"claims          {stats['claims']} on {stats['turns_with_claims']} turns")
        lines.append("claim labels    " + ", ".join(f"{k} {v}" for k, v in stats["claim_labels"].items()))
    else:
        lines.append("claims          none")
    for unit in ("words", "chars"):
        d = stats[f"reference_{unit}"]
        lines.append(f"reference {unit:<6}" + "  ".join(f"{k} {v}" for k, v in d.items()))
    return "\n".join(lines)
