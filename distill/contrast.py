"""Evidence-contrast rows (``distill.evidence_contrast``): the same claim twice, with opposite labels, its two
references differing only where the claim is stated, so that the claim's wording carries no label and only the
reference can decide (MiniCheck's D2C and C2D, Tang et al. 2024; VitaminC's contrastive evidence, Schuster et al.
2021; LLM-OASIS's falsification, Scirè et al. 2025, applied to the reference instead of the claim).

From the teacher's own stage 2 answers on the train split (any teacher, any recipe; never the validation or test
split):

* ``deletion``: a VERIFIED claim against its reference minus the sentences that support it
  (:func:`pipeline.evidence.support`: token-overlap alignment, checked so that what is left holds at most a
  quarter of the claim's content words) -> stage 2 UNVERIFIABLE, stage 3 LACKING EVIDENCE;
* ``edit``: the same, but the best-supporting sentence stays with one value the claim repeats swapped for
  another (a number, date or entity of the reference, or a nearby one: distill/augment.py's rules) or its verb
  negated -> stage 2 UNVERIFIABLE, stage 3 CONTRADICTED; a VERIFIED claim with no such value gets a deletion;
* ``foreign``: a VERIFIED claim whose support cannot be placed in a few sentences of its reference (a one-sentence
  snippet, most often) against another training reference of its source sharing under half of its content words
  (FEVER's NOT ENOUGH INFO construction; an easier cue than a deletion, so only where no deletion can be made)
  -> stage 2 UNVERIFIABLE, stage 3 LACKING EVIDENCE;
* ``insertion``: an UNVERIFIABLE claim of category LACKING EVIDENCE against its reference with the claim put in
  as a sentence at a random sentence boundary -> stage 2 VERIFIED.

Pairing: the teacher's own row is each treated claim's other half (same input but the reference). Prior: stage 2
gets as many added VERIFIED rows (insertions) as added UNVERIFIABLE ones (deletions and edits); the larger side is
cut to the smaller by a seeded draw, so the recipe's class balance is where it was. Deterministic: choices depend
only on the seed and the texts. The teacher's filters do not apply (the labels come from the rule); dedup and
class balance do. Rows carry ``teacher`` ``rule:delete-support`` / ``rule:edit-support`` / ``rule:insert-claim`` /
``rule:foreign-reference``
and a source ending in ``+contrast`` (``train.sources`` keeps them with their source).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from ..data.schema import CONTRADICTED, LACKING_EVIDENCE, UNVERIFIABLE, VERIFIED, Conversation
from ..data.splits import dialogue_key
from ..pipeline.edits import edit_sentence
from ..pipeline.engine import TurnResult
from ..pipeline.evidence import Stage2Call, Support, foreign_reference, insert, stage2_calls, support
from .silver import RULE_TEACHERS, Candidate

KINDS = ("deletion", "edit", "insertion", "foreign")
SUFFIX = "+contrast"
# a claim as _claims yields it: its conversation, dialogue, turn and stage 2 call
_Item = tuple[Conversation, str, TurnResult, Stage2Call]


def _claims(conversations: Sequence[Conversation], results: Sequence[Sequence[TurnResult]],
            dialogues: Collection[str] | None) -> Iterator[_Item]:
    for conv, turns in zip(conversations, results):
        dialogue = dialogue_key(conv)
        if dialogues is not None and dialogue not in dialogues:
            continue
        for res in turns:
            if res.scored and res.reference:
                for call in stage2_calls(res):
                    yield conv, dialogue, res, call


def _row(stage: str, item: _Item, reference: str, label: str, completion: str, kind: str,
         meta: dict[str, Any]) -> Candidate:
    conv, dialogue, res, call = item
    parsed: dict[str, Any] = {"label": label}
    if completion != label:
        parsed["explanation"] = completion.split(". ", 1)[-1]
    return Candidate(
        stage,
        conversation_id=conv.id,
        dialogue_id=dialogue,
        source=conv.source + SUFFIX,
        turn_index=res.turn_index,
        claim_index=-1,
        claim=call.claim,
        target_input=call.with_reference(reference),
        completion=completion,
        label=label,
        parsed=parsed,
        gold_label=res.gold_label,
        extra={"teacher": RULE_TEACHERS[kind], "augment": {"kind": kind, **meta}},
    )


def contrast_candidates(conversations: Sequence[Conversation], results: Sequence[Sequence[TurnResult]], share: float,
                        seed: int, dialogues: Collection[str] | None = None,
                        kinds: Sequence[str] = KINDS) -> tuple[list[Candidate], dict[str, Any]]:
    """The contrast rows for ``share`` of the teacher's stage 2 claims of the dialogues in ``dialogues`` (all when
    None: give the train split's), and what was made and skipped, by kind and reason."""
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ValueError(f"distill.evidence_contrast_kinds: unknown {bad}; valid: {', '.join(KINDS)}")
    skipped: Counter[str] = Counter()
    negative: list[list[Candidate]] = []    # stage 2 UNVERIFIABLE (+ stage 3) per treated VERIFIED claim
    positive: list[list[Candidate]] = []    # stage 2 VERIFIED per treated UNVERIFIABLE claim
    if share <= 0 or not kinds:
        return [], {"share": share, "kinds": list(kinds), "made": {}, "skipped": {}}
    claims = list(_claims(conversations, results, dialogues))
    pool = _reference_pool(claims)
    for item in claims:
        conv, _, res, call = item
        claim = res.claims[call.claim_index]
        rng = random.Random(f"contrast:{seed}:{conv.id}:{res.turn_index}:{call.claim}")
        if rng.random() >= share:
            continue
        label = (claim.stage2 or {}).get("label")
        if label == VERIFIED and ("deletion" in kinds or "edit" in kinds or "foreign" in kinds):
            rows = _verified(item, kinds, pool[conv.source], rng, skipped)
            if rows is not None:
                negative.append(rows)
        elif label == UNVERIFIABLE and "insertion" in kinds:
            if claim.category != LACKING_EVIDENCE:
                skipped[f"insertion: category {claim.category}"] += 1
                continue
            positive.append(_insertion(item, rng))
    positive, negative = _balance(positive, negative, seed, skipped)
    out = [c for group in (*negative, *positive) for c in group]
    made = Counter(c.extra["augment"]["kind"] for c in out if c.stage == "stage2")
    return out, {"share": share, "kinds": list(kinds), "made": dict(sorted(made.items())),
                 "skipped": dict(sorted(skipped.items()))}


def _reference_pool(claims: Sequence[_Item]) -> dict[str, list[str]]:
    """Source -> the references of its training dialogues, first seen first (where ``foreign`` draws from)."""
    pool: dict[str, list[str]] = {}
    for conv, _, _, call in claims:
        if call.reference not in pool.setdefault(conv.source, []):
            pool[conv.source].append(call.reference)
    return pool


def _verified(item: _Item, kinds: Sequence[str], pool: list[str], rng: random.Random,
              skipped: Counter[str]) -> list[Candidate] | None:
    """A VERIFIED claim's rows: an edit or a deletion where its support can be placed, else a foreign reference;
    None when none can be made (the reason counted in ``skipped``)."""
    call = item[3]
    sup, why = support(call.claim, call.reference)
    if sup is None or not ("deletion" in kinds or "edit" in kinds):
        rows = _foreign(item, why, pool, rng) if "foreign" in kinds else None
        if rows is None:
            skipped[f"deletion: {why}"] += 1
        return rows
    meta = {"removed": list(sup.removed), "coverage": sup.coverage, "coverage_left": sup.coverage_left}
    edit = edit_sentence(sup.removed[0], call.claim, call.reference, rng) if "edit" in kinds else None
    if edit is not None and ("deletion" not in kinds or rng.random() < 0.5):
        return _edit(item, sup, edit, meta)
    if "deletion" in kinds:
        return _deletion(item, sup, meta)
    skipped["edit: no value or verb of the claim to change"] += 1
    return None


def _negative_pair(item: _Item, reference: str, stage3_label: str, stage3_completion: str, kind: str,
                   meta: dict[str, Any]) -> list[Candidate]:
    """A treated VERIFIED claim's rows against ``reference``: stage 2 UNVERIFIABLE, stage 3 ``stage3_label``."""
    return [_row("stage2", item, reference, UNVERIFIABLE, UNVERIFIABLE, kind, meta),
            _row("stage3", item, reference, stage3_label, stage3_completion, kind, meta)]


def _deletion(item: _Item, sup: Support, meta: dict[str, Any]) -> list[Candidate]:
    """``deletion``: the reference minus the sentences that support the claim."""
    return _negative_pair(item, sup.remainder, LACKING_EVIDENCE, LACKING_EVIDENCE, "deletion", meta)


def _edit(item: _Item, sup: Support, edit: tuple[str, dict[str, str]], meta: dict[str, Any]) -> list[Candidate]:
    """``edit``: the reference minus the supporting sentences but the best one, which stays as ``edit`` changed it
    (:func:`edit_sentence`: the edited sentence and how)."""
    edited, how = edit
    ref = item[3].reference
    for s in sup.removed[1:]:
        ref = ref.replace(s, "", 1)
    ref = re.sub(r"[ \t]{2,}", " ", ref.replace(sup.removed[0], edited, 1)).strip()
    expl = f"The reference text says {how['new']}, not {how['old']}."
    return _negative_pair(item, ref, CONTRADICTED, f"{CONTRADICTED}. {expl}", "edit", {**meta, "edited": edited, **how})


def _foreign(item: _Item, why: str, pool: list[str], rng: random.Random) -> list[Candidate] | None:
    """``foreign``: the claim against another training reference of its source (``pool``); None: there is none."""
    call = item[3]
    other = foreign_reference(call.claim, call.reference, pool, rng, avoid=call.head)
    if other is None:
        return None
    meta = {"why_not_deletion": why, "reference_chars": len(other)}
    return _negative_pair(item, other, LACKING_EVIDENCE, LACKING_EVIDENCE, "foreign", meta)


def _insertion(item: _Item, rng: random.Random) -> list[Candidate]:
    """``insertion``: the claim put in its reference as a sentence at a random sentence boundary."""
    call = item[3]
    ref = insert(call.reference, call.claim, rng)
    return [_row("stage2", item, ref, VERIFIED, VERIFIED, "insertion", {"inserted": call.claim})]


def _balance(positive: list[list[Candidate]], negative: list[list[Candidate]], seed: int,
             skipped: Counter[str]) -> tuple[list[list[Candidate]], list[list[Candidate]]]:
    """The prior stays where it was: as many added VERIFIED rows as UNVERIFIABLE ones (when both kinds run), the
    larger side cut by a seeded draw (what was cut counted in ``skipped``)."""
    if not (positive and negative):
        return positive, negative
    rng = random.Random(f"contrast-balance:{seed}")
    n = min(len(positive), len(negative))
    dropped = {"insertion": len(positive) - n, "deletion, edit or foreign": len(negative) - n}
    positive = [positive[i] for i in sorted(rng.sample(range(len(positive)), n))]
    negative = [negative[i] for i in sorted(rng.sample(range(len(negative)), n))]
    for k, v in dropped.items():
        if v:
            skipped[f"{k}: cut to keep the class prior"] += v
    return positive, negative


def summary(candidates: Sequence[Candidate], made: dict[str, Any]) -> dict[str, Any]:
    """The manifest's ``evidence_contrast`` entry: settings, rows made and kept by kind and stage."""
    teachers = {RULE_TEACHERS[k]: k for k in KINDS}
    kept: Counter[str] = Counter()
    for c in candidates:
        kind = teachers.get(c.extra.get("teacher"))
        if kind and c.drop is None:
            kept[f"{kind} {c.stage}"] += 1
    return {**made, "kept": dict(sorted(kept.items())), "split": "train only",
            "alignment": "token overlap: sentences holding the claim's content words, best first, removed until what "
                         "is left holds at most a quarter of them",
            "teachers": {k: RULE_TEACHERS[k] for k in KINDS}}
