"""The one conversation schema used by every loader, the pipeline engine, distillation and evaluation.

A :class:`Conversation` is an ordered list of :class:`Turn` objects. Assistant turns that carry a
reference text are *scored*; assistant turns without one (the authors' ``"N/A"``) are context turns
whose claims only feed the background knowledge.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

USER = "user"
ASSISTANT = "assistant"
ROLES = (USER, ASSISTANT)

# Turn labels (gold and predicted). "faithful" is the paper's VERIFIED turn, "hallucinated" its
# UNVERIFIABLE turn; "unknown" is a prediction that could not be made (kept with its reason).
FAITHFUL = "faithful"
HALLUCINATED = "hallucinated"
UNKNOWN = "unknown"
TURN_LABELS = (FAITHFUL, HALLUCINATED)

# Claim categories produced by stages 2 and 3.
VERIFIED = "VERIFIED"
UNVERIFIABLE = "UNVERIFIABLE"
OUT_OF_SCOPE = "OUT-OF-SCOPE"
CONTRADICTED = "CONTRADICTED"
LACKING_EVIDENCE = "LACKING EVIDENCE"
ABSTENTION = "ABSTENTION"
STAGE2_LABELS = (VERIFIED, UNVERIFIABLE)
STAGE3_LABELS = (OUT_OF_SCOPE, CONTRADICTED, LACKING_EVIDENCE, ABSTENTION)
CLAIM_CATEGORIES = (VERIFIED, *STAGE3_LABELS)


@dataclass
class Claim:
    """An atomic claim with an optional gold category (one of CLAIM_CATEGORIES)."""

    text: str
    label: str | None = None


@dataclass
class Turn:
    role: str
    text: str
    reference: str | None = None
    gold_label: str | None = None
    gold_claims: list[Claim] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def is_scored(self) -> bool:
        """Assistant turns with a reference are verified and scored; the rest are context."""
        return self.role == ASSISTANT and self.reference is not None


@dataclass
class Conversation:
    id: str
    source: str
    turns: list[Turn]
    background: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def scored_turns(self) -> list[int]:
        return [i for i, t in enumerate(self.turns) if t.is_scored]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Conversation:
        turns = []
        for t in d["turns"]:
            t = dict(t)
            claims = t.get("gold_claims")
            if claims is not None:
                t["gold_claims"] = [Claim(**c) for c in claims]
            turns.append(Turn(**t))
        return cls(
            id=str(d["id"]),
            source=d["source"],
            turns=turns,
            background=list(d.get("background") or []),
            meta=dict(d.get("meta") or {}),
        )
