"""Human labels as the teacher: answers pipeline requests from the gold claims of the data.

For data with human claim labels (the VISTA human set, FineDialFact, DialFact) stage 1 is answered
with the annotated claims of the target turn and stages 2 and 3 with each claim's gold category; the
world-knowledge stage with the annotators' claim factuality where the data has it (Factcheck-GPT: true ->
TRUE, false -> FALSE, unknown / not enough evidence -> NOT ENOUGH KNOWLEDGE).
Requests the labels do not cover go to ``fallback`` (a model backend) when one is given; without a
fallback they get an empty answer, which the engine records as a parse failure with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..data.schema import UNVERIFIABLE, VERIFIED, Conversation
from ..data.vocabulary import WORLD_FALSE, WORLD_TRUE, WORLD_UNKNOWN
from ..pipeline.labels import certain_answer
from ..pipeline.protocol import Backend, Request, Response

HUMAN_LABELS = "human labels"   # what records name as having answered a stage from the labels


# Factcheck-GPT's claim factuality (annotators, judged against world evidence) as world-stage labels
WORLD_FROM_FACTUALITY = {"true": WORLD_TRUE, "false": WORLD_FALSE, "unknown": WORLD_UNKNOWN,
                         "not_enough_evidence": WORLD_UNKNOWN}


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


class LabelsBackend:
    """A :class:`~vista_distill.pipeline.protocol.Backend` that answers from gold claims."""

    name = "labels"
    served = False
    hardware = None

    def __init__(self, conversations: Iterable[Conversation], fallback: Backend | None = None) -> None:
        self.fallback = fallback
        self.claims: dict[str, list[str]] = {}
        self.categories: dict[tuple[str, str], str] = {}
        self.world: dict[str, str] = {}   # claim -> world-knowledge label, where annotators judged it (Factcheck-GPT)
        for conv in conversations:
            for turn in conv.turns:
                if turn.gold_claims is None:
                    continue
                about = turn.meta.get("claims")   # the annotators' claim records, where the data has them
                for c, m in zip(turn.gold_claims, about if isinstance(about, list) else []):
                    label = WORLD_FROM_FACTUALITY.get(str((m if isinstance(m, dict) else {}).get("factuality")).lower())
                    if label is not None:
                        self.world[_norm(c.text)] = label
                # Data annotating a few facts per record (FineDialFact) repeats a turn: answer with all of them.
                known = self.claims.setdefault(_norm(turn.text), [])
                known += [c.text for c in turn.gold_claims if c.text not in known]
                for c in turn.gold_claims:
                    if c.label is not None and turn.reference is not None:
                        self.categories[(_norm(turn.reference), _norm(c.text))] = c.label
        self.stats = {"answered": 0, "fallback": 0, "unanswered": 0}
        self.progress: Callable[[int], None] | None = None

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "fallback": self.fallback.describe() if self.fallback is not None else None}

    def _answer(self, req: Request) -> Response | None:
        f = req.fields
        if req.stage == "stage1" and f.target is not None:
            claims = self.claims.get(_norm(f.target))
            if claims is None:
                return None
            return Response(text="\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1)))
        if req.stage in ("stage2", "stage3") and f.claim is not None:
            category = self.categories.get((_norm(f.reference or ""), _norm(f.claim)))
            if category is None or (req.stage == "stage3" and category == VERIFIED):
                return None
            answer = category if req.stage == "stage3" else VERIFIED if category == VERIFIED else UNVERIFIABLE
            return certain_answer(answer, req.labels) if req.labels else Response(text=answer)
        if req.stage == "world" and f.claim is not None:
            answer = self.world.get(_norm(f.claim))
            if answer is None:
                return None
            return certain_answer(answer, req.labels) if req.labels else Response(text=answer)
        return None

    def run(self, requests: list[Request]) -> list[Response]:
        out: list[Response | None] = [self._answer(r) for r in requests]
        for r in out:
            if r is not None:
                r.meta["answered_by"] = HUMAN_LABELS
        missing = [i for i, r in enumerate(out) if r is None]
        self.stats["answered"] += len(out) - len(missing)
        if missing and self.fallback is not None:
            self.stats["fallback"] += len(missing)
            for i, resp in zip(missing, self.fallback.run([requests[i] for i in missing])):
                resp.meta["teacher"] = getattr(self.fallback, "name", "fallback")
                out[i] = resp
        elif missing:
            self.stats["unanswered"] += len(missing)
            for i in missing:
                out[i] = Response(text="", meta={"teacher": "labels", "error": "no gold label for this request"})
        if self.progress is not None:
            self.progress(len(out))
        return out  # type: ignore[return-value]
