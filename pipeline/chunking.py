"""Long references and long backgrounds, after SCALE (Lattimer et al., "Fast and Accurate Factual
Inconsistency Detection Over Long Documents"; ``../shared/papers/002_*``): when the reference plus the
numbered background would exceed a token budget, they are split into large chunks, the claim is judged
against each, and the answers are combined:

* stage 2: VERIFIED when any chunk supports the claim; the most supporting chunk (highest P(VERIFIED),
  or the first VERIFIED one when labels are generated) decides and is recorded;
* stage 3: a contradiction anywhere is a contradiction (the most confident CONTRADICTED chunk decides);
  otherwise the most confident category over all chunks.

Chunks are packed greedily in order: background facts first (their numbering continues across chunks),
then the reference split at sentence ends (a sentence longer than a chunk is split between words).
Nothing is dropped: every fact and every word of the reference is in exactly one chunk.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data.schema import CONTRADICTED, STAGE2_LABELS, STAGE3_LABELS, VERIFIED

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate: about four characters per token for English BPE vocabularies."""
    return len(text) // 4 + 1


@dataclass
class Chunk:
    background: list[str] = field(default_factory=list)
    reference: str = ""
    first_fact: int = 1          # the number of its first background fact in the whole background


def _pieces(reference: str, budget: int, count: Callable[[str], int]) -> list[str]:
    out = []
    for sent in (s.strip() for s in _SENTENCE_END.split(reference or "")):
        if not sent:
            continue
        if count(sent) <= budget:
            out.append(sent)
            continue
        words, cur = sent.split(" "), []
        for w in words:
            if cur and count(" ".join([*cur, w])) > budget:
                out.append(" ".join(cur))
                cur = []
            cur.append(w)
        if cur:
            out.append(" ".join(cur))
    return out


def chunk_context(background: Sequence[str], reference: str, budget: int,
                  count: Callable[[str], int] = approx_tokens) -> list[Chunk]:
    """``[Chunk(background, reference)]`` when both fit in ``budget`` tokens, else chunks that each fit."""
    whole = count("\n".join(background)) + count(reference or "")
    if whole <= budget:
        return [Chunk(list(background), reference)]
    chunks: list[Chunk] = []
    cur, used = Chunk(), 0
    for n, fact in enumerate(background, start=1):
        cost = count(fact)
        if cur.background and used + cost > budget:
            chunks.append(cur)
            cur, used = Chunk(first_fact=n), 0
        if not cur.background:
            cur.first_fact = n
        cur.background.append(fact)
        used += cost
    ref_parts: list[str] = []
    for piece in _pieces(reference, budget, count):
        cost = count(piece)
        if (cur.background or ref_parts) and used + cost > budget:
            cur.reference = " ".join(ref_parts)
            chunks.append(cur)
            cur, used, ref_parts = Chunk(first_fact=len(background) + 1), 0, []
        ref_parts.append(piece)
        used += cost
    cur.reference = " ".join(ref_parts)
    if cur.background or cur.reference:
        chunks.append(cur)
    return chunks


def _p(info: dict[str, Any], label: str) -> float:
    probs = info.get("probs") or {}
    return float(probs.get(label, 1.0 if info.get("label") == label else 0.0))


def combine(stage: str, answers: list[tuple[str | None, dict[str, Any], str | None]]
            ) -> tuple[str | None, dict[str, Any], str | None]:
    """One (label, info, error) from each chunk's, as the module docstring says; ``info`` records the
    deciding chunk and every chunk's label and probabilities."""
    per_chunk = [{"label": label, "probs": info.get("probs"), "error": err} for label, info, err in answers]
    labelled = [i for i, (label, _, _) in enumerate(answers) if label is not None]
    if not labelled:
        best = 0
    elif stage == "stage2":
        support = [i for i in labelled if answers[i][0] == VERIFIED]
        pool = support or labelled
        best = max(pool, key=lambda i: _p(answers[i][1], VERIFIED))
    else:
        contra = [i for i in labelled if answers[i][0] == CONTRADICTED]
        pool = contra or labelled
        best = max(pool, key=lambda i: _p(answers[i][1], answers[i][0]))
    label, info, err = answers[best]
    assert label is None or label in (STAGE2_LABELS if stage == "stage2" else STAGE3_LABELS)
    return label, {**info, "chunk": best, "chunks": len(answers), "per_chunk": per_chunk}, err
