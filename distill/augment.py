"""Stage 2-3 rows made by rule from the references: VERIFIED / CONTRADICTED pairs (after LLM-OASIS, Scirè et al.
2025) and claims against a swapped reference (below).

LLM-OASIS extracts claims from a passage, falsifies one and keeps both. Here the passage is a scored
turn's reference, the claims are its *factual sentences* and the falsification is a rule, within the
same reference:

* ``number``: a number for another number of the reference, else for a nearby value (e.g. 330 -> 340);
* ``date``: a year, decade or month name for another one of the reference, else for a nearby one;
* ``entity``: a capitalised span for another capitalised span of the reference (no nearby value: a
  reference with a single entity gives no entity swap).

A factual sentence: ends with a period, 5 to 40 words, starts with a capital (not a pronoun: claims
must stand alone), has a number, a date or a capitalised entity, no question mark, no first or second
person (opinions, remarks), no broken wiki markup. The replacement never already occurs in the
sentence (``between 1990 and 2001`` does not become ``between 2001 and 2001``); entities only swap
with entities of the same shape (a demonym like ``Italian`` with a demonym) and sharing no word.

Unlike LLM-OASIS, whose LLM falsifier was told *not* to change numbers, dates and names (subtler
errors), these swaps are exactly those: easy, but certain contradictions, which is what the rare
CONTRADICTED class of stage 3 lacks. Each pair gives three candidates (``falsified_candidates``):
stage 2 original -> VERIFIED, stage 2 falsified -> UNVERIFIABLE, stage 3 falsified -> CONTRADICTED
with a one-line explanation naming the swapped value.

Background: the augmented prompts reuse the exact BACKGROUND KNOWLEDGE and REFERENCE TEXT of the
turn's first stage 2 call (``TurnResult.calls``), with only the CLAIM changed, so they match what
the teacher's prompts for that turn look like; a turn without a stage 2 call gives no pairs.
The teacher's filters (parse, gold agreement, self-consistency) do not apply to these rows, whose
labels come from the rule; dedup (the teacher's candidates come first and win) and class balance do.
Deterministic: the choices depend only on the seed and the reference text.

Swapped references (``swapped_candidates``, ``distill.augment_swapped``): a share of the claims the teacher
labelled VERIFIED get a second stage 2 example whose REFERENCE TEXT is another training dialogue's (same
source, a different text, sharing under half of the claim's content words with that reference and the turn's
background), labelled UNVERIFIABLE. The negative-evidence construction of FEVER's NOT ENOUGH INFO class: a
student trained on response-level labels alone learns what a hallucinated response *looks* like (first person,
chit-chat) and labels a claim VERIFIED against an unrelated reference almost as often as against its own
(bench/results/demo_protocol); the pair (same claim, own vs foreign reference, opposite labels)
leaves it only the reference to go by. Measured there on the main job's 135M student at 96 stage-2 steps: the
rows moved its prior far more than its reading of the reference, and lost on validation; off by default.
"""

from __future__ import annotations

import random
import re
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass

from ..data.schema import CONTRADICTED, UNVERIFIABLE, VERIFIED, Conversation
from ..data.splits import dialogue_key
from ..pipeline.edits import Span, nearby, spans, swap_options
from ..pipeline.engine import TurnResult
from ..pipeline.evidence import before_claim, content_words, sentences, stage2_calls
from .silver import RULE_TEACHERS, Candidate

TEACHER = RULE_TEACHERS["falsified"]
SOURCE_SUFFIX = "+falsified"
SWAP_TEACHER = RULE_TEACHERS["swapped"]
SWAP_SUFFIX = "+swapped"
RULES = ("number", "date", "entity")

PRONOUN_START = frozenset(("It", "He", "She", "They", "This", "That", "These", "Those", "Its", "His", "Her", "Their",
                           "Them", "Him"))

_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|[Mm]e|[Mm]y|[Mm]ine|[Mm]yself|[Ww]e|[Ww]e're|[Oo]ur|[Oo]urs|us"
                           r"|[Yy]ou|[Yy]our|[Yy]ours|[Yy]ou're)\b")
_BROKEN_MARKUP = re.compile(r"\(\s*[$£€]?\s*(?:today)?\s*\)|\s[,;]|\{\{|\[\[")




@dataclass(frozen=True)
class Pair:
    original: str           # a factual sentence of the reference (the VERIFIED claim)
    falsified: str          # the same sentence with one span swapped (the CONTRADICTED claim)
    rule: str
    kind: str
    old: str
    new: str
    origin: str             # "document" (another value of the same reference) or "nearby"
    start: int              # where ``old`` sits in ``original`` (``new`` sits at the same place in ``falsified``)


# --------------------------------------------------------------------------------------------- sentences


def rejection(sentence: str) -> str | None:
    """Why ``sentence`` is not a factual sentence to use as a claim, or None when it is."""
    words = sentence.split()
    if not sentence.endswith(".") or "?" in sentence:
        return "not a statement"
    if not 5 <= len(words) <= 40:
        return "length"
    first = sentence.lstrip("\"'“‘(")
    if not first[:1].isupper() or first.split()[0] in PRONOUN_START:
        return "not standalone"
    if _FIRST_PERSON.search(sentence):
        return "first or second person"
    if _BROKEN_MARKUP.search(sentence) or sentence.count("(") != sentence.count(")"):
        return "broken markup"
    if not spans(sentence):
        return "nothing factual to check"
    return None


# ------------------------------------------------------------------------------------------------- spans






# ---------------------------------------------------------------------------------------------- swapping












def falsify(reference: str, n: int, seed: int) -> list[Pair]:
    """Up to ``n`` pairs from ``reference``, one per factual sentence, picked with a generator seeded by
    ``seed`` and the reference itself (the same reference always gives the same pairs)."""
    if n <= 0:
        return []
    rng = random.Random(f"falsify:{seed}:{reference}")
    chosen = [s for s in sentences(reference) if rejection(s) is None]
    document = [sp for s in sentences(reference) for sp in spans(s)]
    rng.shuffle(chosen)
    pairs: list[Pair] = []
    for sentence in chosen:
        if len(pairs) == n:
            break
        pair = _falsify_sentence(sentence, document, rng)
        if pair is not None:
            pairs.append(pair)
    return pairs


def _falsify_sentence(sentence: str, document: Sequence[Span], rng: random.Random) -> Pair | None:
    options = swap_options(sentence, document)
    for rule in rng.sample(sorted(options), len(options)):
        for span, values in rng.sample(options[rule], len(options[rule])):
            new, origin = (rng.choice(values), "document") if values else (None, "nearby")
            if new is None and rule != "entity":
                new = nearby(span, rng)
            if new is None or new in sentence:
                continue
            falsified = sentence[:span.start] + new + sentence[span.end:]
            return Pair(sentence, falsified, rule, span.kind, span.text, new, origin, span.start)
    return None


def explanation(pair: Pair) -> str:
    """The stage 3 explanation: one line naming the swapped value."""
    return f"The claim says {pair.new}, but the reference text says {pair.old}."


# ------------------------------------------------------------------------------------------- candidates


def _claim_prefix(res: TurnResult) -> str | None:
    """The turn's first stage 2 input up to its CLAIM."""
    for call in res.calls:
        if call.stage == "stage2":
            return before_claim(res, call)
    return None


def falsified_candidates(conversations: Sequence[Conversation], results: Sequence[Sequence[TurnResult]], n: int,
                         seed: int, dialogues: Collection[str] | None = None) -> list[Candidate]:
    """Three candidates per pair (stage 2 VERIFIED, stage 2 UNVERIFIABLE, stage 3 CONTRADICTED) for up
    to ``n`` pairs per scored turn's reference, for the dialogues in ``dialogues`` (all when None: give
    the train split's, never the validation split's, or the references would leak)."""
    out: list[Candidate] = []
    for conv, turns in zip(conversations, results):
        dialogue = dialogue_key(conv)
        if dialogues is not None and dialogue not in dialogues:
            continue
        for res in turns:
            prefix = _claim_prefix(res) if res.scored and res.reference else None
            if prefix is None:
                continue
            for k, pair in enumerate(falsify(res.reference, n, seed)):
                meta = {**asdict(pair), "pair": k}
                base = {"conversation_id": conv.id, "dialogue_id": dialogue, "source": conv.source + SOURCE_SUFFIX,
                        "turn_index": res.turn_index, "claim_index": -1, "gold_label": res.gold_label}
                expl = explanation(pair)
                for stage, claim, label, completion in (
                        ("stage2", pair.original, VERIFIED, VERIFIED),
                        ("stage2", pair.falsified, UNVERIFIABLE, UNVERIFIABLE),
                        ("stage3", pair.falsified, CONTRADICTED, f"{CONTRADICTED}. {expl}")):
                    parsed = {"label": label, **({"explanation": expl} if stage == "stage3" else {})}
                    out.append(Candidate(stage, **base, claim=claim, target_input=prefix + claim,
                                         completion=completion, label=label, parsed=parsed,
                                         extra={"teacher": TEACHER, "augment": meta}))
    return out


def swapped_candidates(conversations: Sequence[Conversation], results: Sequence[Sequence[TurnResult]], share: float,
                       seed: int, dialogues: Collection[str] | None = None) -> list[Candidate]:
    """Stage 2 UNVERIFIABLE copies of ``share`` of the VERIFIED claims of the dialogues in ``dialogues`` (all when
    None: give the train split's), each against the reference of another of those dialogues of its source (see the
    module docstring). Which claims, and which reference, depend on the seed and the texts alone."""
    if share <= 0:
        return []
    pool: dict[str, dict[tuple[str, str], None]] = {}   # source -> (dialogue, reference), in first-seen order
    claims: list[tuple[Conversation, str, TurnResult, str, str, str, str]] = []
    for conv, turns in zip(conversations, results):
        dialogue = dialogue_key(conv)
        if dialogues is not None and dialogue not in dialogues:
            continue
        for res in turns:
            if not (res.scored and res.reference):
                continue
            for call in stage2_calls(res):
                claim, head, reference, tail = res.claims[call.claim_index], call.head, call.reference, call.tail
                pool.setdefault(conv.source, {})[(dialogue, reference)] = None
                if (claim.stage2 or {}).get("label") == VERIFIED:
                    claims.append((conv, dialogue, res, claim.text, head, reference, tail))
    out: list[Candidate] = []
    for conv, dialogue, res, claim, head, reference, tail in claims:
        rng = random.Random(f"swap:{seed}:{conv.id}:{res.turn_index}:{claim}")
        if rng.random() >= share:
            continue
        words = content_words(claim)
        others = [(d, r) for d, r in pool[conv.source] if d != dialogue and r != reference]
        rng.shuffle(others)
        for other_dialogue, other in others:
            if words and len(words & (content_words(other) | content_words(head))) / len(words) >= 0.5:
                continue
            out.append(Candidate(
                "stage2", conversation_id=conv.id, dialogue_id=dialogue, source=conv.source + SWAP_SUFFIX,
                turn_index=res.turn_index, claim_index=-1, claim=claim, target_input=head + other + tail + claim,
                completion=UNVERIFIABLE, label=UNVERIFIABLE, parsed={"label": UNVERIFIABLE},
                gold_label=res.gold_label,
                extra={"teacher": SWAP_TEACHER, "augment": {"reference_of": other_dialogue}}))
            break
    return out


def swap_summary(candidates: Sequence[Candidate], share: float) -> dict[str, object]:
    """The manifest's ``augment_swapped`` entry."""
    made = [c for c in candidates if c.extra.get("teacher") == SWAP_TEACHER]
    return {
        "share_of_verified": share,
        "teacher": SWAP_TEACHER,
        "made": len(made),
        "kept": sum(c.drop is None for c in made),
        "split": "train only",
        "reference": "another training dialogue's of the same source, sharing under half of the claim's content words",
    }


def summary(candidates: Sequence[Candidate], n: int) -> dict[str, object]:
    """The manifest's ``augment`` entry: settings, pairs made per rule and how many rows were kept."""
    made = [c for c in candidates if c.extra.get("teacher") == TEACHER and c.stage == "stage3"]
    by_rule = {r: sum(c.extra["augment"]["rule"] == r for c in made) for r in RULES}
    kept = {s: sum(c.drop is None and c.stage == s and c.extra.get("teacher") == TEACHER for c in candidates)
            for s in ("stage2", "stage3")}
    return {"falsified_per_reference": n, "teacher": TEACHER, "pairs": len(made), "by_rule": by_rule,
            "kept": kept, "split": "train only",
            "background": "the turn's first stage 2 input (its background and reference), claim replaced"}
