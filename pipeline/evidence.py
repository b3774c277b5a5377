"""A claim's evidence in its reference: sentence splitting, lexical support, and the three edits of a reference
that change what it says about one claim while leaving the claim alone.

* :func:`support` finds the sentences of a reference that support a claim (token overlap: the share of the claim's
  content words a sentence holds, best first) and the reference without them, checked to no longer support it;
* :func:`insert` puts a sentence into a reference at a sentence boundary;
* :func:`foreign_reference` picks another reference that shares under half of the claim's content words.

distill/contrast.py makes training rows from them (MiniCheck's D2C / C2D, VitaminC's contrastive evidence) and
scoring/evidence.py measures with them whether a system reads its evidence; both read a stage 2 call's rendered
input with :func:`stage2_calls`, so the rows and the probes keep the engine's background and prompt layout.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

ABBREVIATIONS = frozenset((
    "Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr", "Prof", "Inc", "Ltd", "Co", "Corp", "vs", "etc", "Mt", "Ft", "Gen",
    "Col", "Lt", "Sgt", "Rev", "No", "Nos", "Jan", "Feb", "Mar", "Apr", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec",
    "approx", "ca", "al", "e.g", "i.e", "U.S", "U.K"))
_BOUNDARY = re.compile(r"(?<=[.!?])[\"'’”)\]]*\s+(?=[\"'“‘(\[]*[A-Z0-9])")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(("that", "this", "with", "from", "have", "were", "they", "their", "there", "about", "which", "would",
                   "been", "also", "than", "then", "them", "what", "when", "your", "will", "just", "like", "some"))
SUPPORTED = 0.5     # a reference supports a claim (by overlap) when it holds at least this share of its content words
LEFT = 0.25         # ... and no longer does once what is left holds at most this share


def sentences(text: str) -> list[str]:
    """The text cut at line breaks (titles, table rows) and sentence ends, not after abbreviations or
    initials (``J. R. R.``, ``Dr.``)."""
    out = []
    for line in text.splitlines():
        start = 0
        for m in _BOUNDARY.finditer(line):
            before = line[start:m.start()].rstrip("\"'’”)]")
            last = before.rsplit(None, 1)[-1] if before.split() else ""
            word = last.rstrip(".!?")
            if last.endswith(".") and (word in ABBREVIATIONS or (len(word) == 1 and word.isupper())):
                continue
            out.append(line[start:m.start()].strip())
            start = m.end()
        out.append(line[start:].strip())
    return [s for s in out if s]


def split_claims(turn: str) -> list[str]:
    """The sentence splitter, stage 1's cheap rule: each sentence of the turn is a claim (the whole turn when it has
    no sentence end)."""
    return sentences(turn) or ([turn.strip()] if turn.strip() else [])


def content_words(text: str) -> set[str]:
    """Lower-cased words of four letters or more, a few function words left out."""
    return {w for w in _WORD.findall(text.casefold()) if len(w) > 3 and w not in _STOP}


def coverage(claim: str, text: str) -> float | None:
    """The share of the claim's content words found in ``text`` (None: the claim has none)."""
    words = content_words(claim)
    return len(words & content_words(text)) / len(words) if words else None


def overlap_says_verified(claim: str, reference: str) -> bool:
    """The overlap rule, the cheapest baseline a scorer must beat: VERIFIED when ``reference`` holds at least
    ``SUPPORTED`` (half) of the claim's content words; a claim without content words is not verified."""
    share = coverage(claim, reference)
    return share is not None and share >= SUPPORTED


@dataclass(frozen=True)
class Support:
    """The sentences of a reference that support a claim, and the reference without them."""
    removed: tuple[str, ...]      # best-supporting first
    remainder: str
    coverage: float               # of the claim's content words, in the whole reference
    coverage_left: float          # ... in the remainder (at most LEFT)


def _drop(text: str, sentence: str) -> str:
    i = text.find(sentence)
    if i < 0:
        return text
    return re.sub(r"[ \t]{2,}", " ", (text[:i] + text[i + len(sentence):])).strip()


def support(claim: str, reference: str) -> tuple[Support | None, str]:
    """(the supporting sentences and what is left, or None; why). Sentences are removed best-supporting first
    (ties: reference order) until what is left holds at most ``LEFT`` of the claim's content words; None when
    the reference does not hold ``SUPPORTED`` of them, is one sentence, or would lose more than half its
    sentences (the claim is spread over it, not stated in a place)."""
    cov = coverage(claim, reference)
    if cov is None:
        return None, "claim has no content words"
    if cov < SUPPORTED:
        return None, "reference does not state the claim (overlap)"
    sents = list(dict.fromkeys(sentences(reference)))
    if len(sents) < 2:
        return None, "single-sentence reference"
    words = content_words(claim)
    ranked = sorted(range(len(sents)), key=lambda i: (-len(words & content_words(sents[i])), i))
    removed, left = [], reference
    for i in ranked:
        if len(words & content_words(sents[i])) == 0:
            break
        removed.append(sents[i])
        left = _drop(left, sents[i])
        left_cov = coverage(claim, left) or 0.0
        if left_cov <= LEFT:
            if len(removed) > len(sents) / 2 or not left:
                return None, "claim spread over the reference"
            return Support(tuple(removed), left, round(cov, 4), round(left_cov, 4)), "ok"
    return None, "claim spread over the reference"


def as_sentence(text: str) -> str:
    """``text`` as a sentence: first letter capitalised, a final period where it has no end mark."""
    t = " ".join(text.split())
    if not t:
        return t
    t = t[0].upper() + t[1:]
    return t if t[-1] in ".!?\"'" else t + "."


def insert(reference: str, sentence: str, rng: random.Random) -> str:
    """``reference`` with ``sentence`` put at a random sentence boundary (its start, between two sentences, or
    its end); the reference's own text is kept as it was."""
    sents = sentences(reference)
    k = rng.randint(0, len(sents))
    s = as_sentence(sentence)
    if k == len(sents) or not sents:
        # after a text with no end mark a space would run the two together: a line break keeps them apart
        sep = " " if reference.rstrip()[-1:] in ".!?\"')" else "\n"
        return f"{reference.rstrip()}{sep}{s}".strip()
    at = reference.find(sents[k]) if k else 0
    return f"{reference[:at]}{s} {reference[at:]}"


def foreign_reference(claim: str, own: str, pool: Sequence[str], rng: random.Random,
                      avoid: str = "") -> str | None:
    """A reference of ``pool`` other than ``own`` sharing under half of the claim's content words (with ``avoid``
    too: the turn's background), picked with ``rng``; None when none qualifies."""
    words = content_words(claim)
    extra = content_words(avoid)
    others = [r for r in pool if r != own and (not words or len(words & (content_words(r) | extra)) / len(words) < 0.5)]
    return rng.choice(others) if others else None


# ------------------------------------------------------------------------------------------- stage 2 calls


@dataclass(frozen=True)
class Stage2Call:
    """One claim's stage 2 request, its fields and its input in parts: ``head + reference + tail + claim``."""
    claim_index: int
    request: Any   # the engine's Request

    @property
    def fields(self) -> Any:
        return self.request.fields

    @property
    def claim(self) -> str:
        return self.fields.claim

    @property
    def reference(self) -> str:
        return self.fields.reference

    @property
    def head(self) -> str:
        """The input up to its reference: the numbered background and the reference's heading."""
        return self.parts()[0]

    @property
    def tail(self) -> str:
        return self.parts()[2]

    def parts(self, reference: str | None = None) -> tuple[str, str, str, str]:
        from .templates import stage2_parts

        f = self.fields
        return stage2_parts(f.background, f.reference if reference is None else reference, f.claim, f.first_fact)

    def with_reference(self, reference: str) -> str:
        return "".join(self.parts(reference))

    def request_with_reference(self, reference: str) -> Any:
        """The same request against ``reference``: its fields and its last message (the twin stays: it has none)."""
        last = {**self.request.messages[-1], "content": self.with_reference(reference)}
        return replace(self.request, messages=(*self.request.messages[:-1], last),
                       fields=replace(self.fields, reference=reference))


def before_claim(res, call) -> str | None:
    """A stage 2 call's input up to its CLAIM (background and reference as the engine numbered them)."""
    f = call.request.fields
    if f.claim is None or f.reference is None:
        return None
    return "".join(Stage2Call(call.claim_index, call.request).parts()[:3])


def stage2_calls(res) -> Iterator[Stage2Call]:
    """The stage 2 requests of a TurnResult's claims judged in one call (a reference cut into chunks gives
    several; those are left out)."""
    per_claim: dict[int, list] = {}
    for call in res.calls:
        if call.stage == "stage2":
            per_claim.setdefault(call.claim_index, []).append(call)
    for i, cs in per_claim.items():
        f = cs[0].request.fields
        if len(cs) == 1 and f.claim is not None and f.reference is not None:
            yield Stage2Call(i, cs[0].request)
