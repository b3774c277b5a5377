"""The cheap baselines a scorer must beat, as backends: decision rules a user could write in ten lines (not the turn
rules safe / strict / authors of pipeline/engine.py), run through the same engine, records, metrics and
significance tests as the student and the base:

* ``overlap``: stage 2 says VERIFIED when the reference holds at least half of the claim's content words
  (:func:`pipeline.evidence.overlap_says_verified`, the one place the rule is written), with that share as
  P(VERIFIED); stage 3 says LACKING EVIDENCE;
* ``majority``: stage 2 and stage 3 always give the most common label of the silver *training* rows
  (:func:`majority_labels`);
* ``pmi``: stage 2 by the base model's claim PMI with its reference (PMI-Faith), thresholded by a logistic fit on the
  silver validation split (``train/evidence_fit.py: fit_pmi_head``); the model itself is not trained. Built with
  :class:`BaselineBackend` ``(rule="pmi", model=...)``: stage 2 goes to the model, the other stages to the rules.

Stage 1 (where the human claims are not given) is the same for all three: each sentence of the target turn is a
claim (:func:`pipeline.evidence.sentences`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..data.schema import ABSTENTION, LACKING_EVIDENCE, OUT_OF_SCOPE, UNVERIFIABLE, VERIFIED
from ..pipeline.evidence import coverage, overlap_says_verified, split_claims
from ..pipeline.labels import certain_answer
from ..pipeline.protocol import Fields, Request, Response

BASELINES = ("overlap", "majority", "pmi")


def majority_labels(silver_dir: str | Path) -> dict[str, str]:
    """The most common label of each of stages 2 and 3 in the silver data's train split (ties: the label that sorts
    first, so the choice is reproducible); data.silver.SilverDataError names the folder when there is none."""
    from ..data.silver import load_silver

    out = {}
    for stage in ("stage2", "stage3"):
        dd = load_silver(Path(silver_dir), stage)
        counts = Counter(dd["train"]["label"])
        if not counts:
            raise ValueError(f"{silver_dir}/{stage}: no training rows to take a majority label from")
        out[stage] = min(counts, key=lambda lab: (-counts[lab], lab))
    return out


# the stage 3 wording rule, written from the paper's category definitions (its stage 3 prompt) and not tuned on any
# data: uncertainty or refusal -> ABSTENTION; the speaker's own opinion, preference, experience, a question or a
# conversational remark -> OUT-OF-SCOPE; anything else -> LACKING EVIDENCE
_ABSTAIN = re.compile(
    r"\b(not (sure|certain)|unsure|no idea|(do not|don't|doesn't|does not|did not|didn't) (know|remember|recall)|"
    r"(can't|cannot|could not|couldn't) (say|tell|recall|remember)|uncertain)\b", re.IGNORECASE)
_SUBJECTIVE = re.compile(
    r"(\?\s*$)|\b(i|i'm|i've|i'd|me|my|mine|we|our|us|you|your|the (speaker|wizard|apprentice|user|assistant))\b|"
    r"\b(love[sd]?|like[sd]?|enjoy(s|ed)?|prefer(s|red)?|favou?rite|think[s]?|believe[sd]?|feel[s]?|hope[sd]?|"
    r"wish(es)?|recommend(s|ed)?|should|interesting|great|cool|fun|amazing|awesome|beautiful|wonderful|nice)\b",
    re.IGNORECASE)


def wording_category(claim: str) -> str:
    """The stage 3 wording rule: ABSTENTION, OUT-OF-SCOPE or LACKING EVIDENCE by the claim's wording alone."""
    if _ABSTAIN.search(claim):
        return ABSTENTION
    if _SUBJECTIVE.search(claim):
        return OUT_OF_SCOPE
    return LACKING_EVIDENCE


decompose = split_claims   # stage 1 of the baselines: the target turn's sentences

# each stage's cheap rule, by the name records and calibrations give it
RULE_NAMES = {"stage1": "sentence splitter", "stage2": "overlap rule", "stage3": "wording rule"}


def _sentences_answer(fields: Fields) -> str:
    """Stage 1's answer by the sentence splitter: the target turn's sentences as a numbered list."""
    return "\n".join(f"{i}. {c}" for i, c in enumerate(decompose((fields.target or "").strip()), 1))


def _overlap_answer(claim: str, reference: str, threshold: float | None = None) -> Response:
    """Stage 2's answer by the overlap rule, the share of the claim's content words in the reference as
    P(VERIFIED): VERIFIED at half of them or more, or (``threshold``) above that share."""
    share = coverage(claim, reference)
    verified = (overlap_says_verified(claim, reference) if threshold is None
                else share is not None and share > threshold)
    label, p = (VERIFIED if verified else UNVERIFIABLE), 0.0 if share is None else share
    return Response(text=label, label=label, probs={VERIFIED: p, UNVERIFIABLE: 1.0 - p})


class StageRules:
    """A :class:`~vista_distill.pipeline.protocol.Backend` answering each stage by its rule: stage 1 the sentence
    splitter, stage 2 the overlap rule (VERIFIED when the reference holds at least half of the claim's content
    words, or, with ``threshold``, more than that share), stage 3 the wording rule. Put in one stage's place by a
    :class:`~.stage_routing.StageRouter`; each answer names its rule (``meta["answered_by"]``)."""

    name = "stage rules"
    served = False
    hardware = None

    def __init__(self, threshold: float | None = None) -> None:
        self.threshold = threshold
        self.stats: dict[str, Any] = {"requests": 0}
        self.progress: Callable[[int], None] | None = None

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "rules": RULE_NAMES, "overlap_threshold": self.threshold}

    def _answer(self, req: Request) -> Response:
        fields = req.fields
        claim = (fields.claim or "").strip()
        if req.stage == "stage1":
            return Response(text=_sentences_answer(fields), meta={"answered_by": RULE_NAMES["stage1"]})
        if req.stage == "stage2":
            resp = _overlap_answer(claim, (fields.reference or "").strip(), self.threshold)
            resp.meta["answered_by"] = RULE_NAMES["stage2"]
            return resp
        if req.stage == "stage3":
            resp = certain_answer(wording_category(claim), req.labels)
            resp.meta["answered_by"] = RULE_NAMES["stage3"]
            return resp
        return Response(text="", meta={"error": f"no rule answers {req.stage}"})

    def run(self, requests: Sequence[Request]) -> list[Response]:
        out = [self._answer(r) for r in requests]
        self.stats["requests"] += len(out)
        if self.progress is not None and out:
            self.progress(len(out))
        return out


class BaselineBackend:
    """A :class:`~vista_distill.pipeline.protocol.Backend` that answers by one baseline's rule (see the module's
    docstring)."""

    def __init__(self, rule: str, *, majority: dict[str, str] | None = None, model: Any = None,
                 head: Any = None) -> None:
        if rule not in BASELINES:
            raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(BASELINES)}")
        if rule == "majority" and not majority:
            raise ValueError("the majority rule needs its labels (majority_labels(silver_dir))")
        if rule == "pmi" and (model is None or head is None):
            raise ValueError("the pmi rule needs the base model's backend and its fitted PMI head")
        self.rule, self.majority, self.model, self.head = rule, majority or {}, model, head
        self.name = f"rule:{rule}"
        self.served = False
        self.hardware = model.hardware if model is not None else None
        self.stats: dict[str, Any] = {"requests": 0, "model_requests": 0}
        self.progress: Callable[[int], None] | None = None

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"backend": self.name, "rule": self.rule}
        if self.rule == "majority":
            d["labels"] = dict(self.majority)
        if self.rule == "pmi":
            d.update(model_path=self.model.describe().get("model_path", ""),
                     head={"w_pmi": self.head.w_pmi, "bias": self.head.bias, "fitted": self.head.fitted})
        return d

    def _answer(self, req: Request) -> Response:
        fields = req.fields
        if not req.labels:   # stage 1: one claim per sentence
            return Response(text=_sentences_answer(fields))
        if req.stage == "stage2" and self.rule == "overlap":
            return _overlap_answer((fields.claim or "").strip(), (fields.reference or "").strip())
        if req.stage == "stage3":
            label = self.majority.get("stage3") if self.rule == "majority" else LACKING_EVIDENCE
        else:
            label = self.majority.get(req.stage)
        if label not in req.labels:
            return Response(text="", meta={"error": f"rule {self.rule} has no answer for stage {req.stage}"})
        return certain_answer(label, req.labels)

    def _no_evidence(self) -> Response:
        """The pmi rule on a claim against an empty reference (the claim-only probe): the claim's PMI is 0 by
        definition (its empty-reference twin is the prompt itself), so the head answers without a forward pass, as
        the model would have."""
        p = self.head.p_verified(0.0, 0.0)
        label = VERIFIED if self.head.says_verified(p) else UNVERIFIABLE
        return Response(text=label, label=label, probs={VERIFIED: p, UNVERIFIABLE: 1.0 - p},
                        meta={"evidence": {"pmi": 0.0, "overlap": 0.0, "head": True, "empty_reference": True}})

    def run(self, requests: Sequence[Request]) -> list[Response]:
        requests = list(requests)
        self.stats["requests"] += len(requests)
        out: list[Response | None] = [None] * len(requests)
        to_model = []
        for i, r in enumerate(requests):
            if self.rule == "pmi" and r.stage == "stage2" and r.labels:
                if _empty_reference(r):
                    out[i] = self._no_evidence()
                else:
                    to_model.append(i)
        if to_model:
            saved = dict(self.model.heads)
            self.model.heads = {"stage2": self.head}
            try:
                for i, resp in zip(to_model, self.model.run([requests[i] for i in to_model])):
                    out[i] = resp
            finally:
                self.model.heads = saved
            self.stats["model_requests"] += len(to_model)
        for i, r in enumerate(requests):
            if out[i] is None:
                out[i] = self._answer(r)
        if self.progress is not None and requests:
            self.progress(len(requests))
        return out  # type: ignore[return-value]


def _empty_reference(req: Request) -> bool:
    return bool((req.fields.claim or "").strip()) and req.fields.reference == ""


__all__ = ["BASELINES", "RULE_NAMES", "BaselineBackend", "StageRules", "decompose", "majority_labels"]
