"""The one conversation schema used by every loader, the pipeline engine, distillation and evaluation.

A :class:`Conversation` is an ordered list of :class:`Turn` objects. Assistant turns that carry a
reference text are *scored*; assistant turns without one (the authors' ``"N/A"``) are context turns
whose claims only feed the background knowledge.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .vocabulary import (  # noqa: F401 - the schema's names, defined in vocabulary.py
    ABSTENTION,
    ASSISTANT,
    CLAIM_CATEGORIES,
    CONTRADICTED,
    FAITHFUL,
    HALLUCINATED,
    LACKING_EVIDENCE,
    OUT_OF_SCOPE,
    ROLES,
    STAGE2_LABELS,
    STAGE3_LABELS,
    TURN_LABELS,
    UNKNOWN,
    UNVERIFIABLE,
    USER,
    VERIFIED,
)


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
        """Build from :meth:`to_dict` output; a malformed record raises ``ValueError`` listing
        :func:`record_problems` (readers call that first to locate every problem)."""
        problems = record_problems(d)
        if problems:
            raise ValueError("; ".join(_describe(*p) for p in problems))
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


# A problem in one record: (turn index or None, field or None, what was wrong and what was expected).
Problem = tuple[int | None, str | None, str]

CONVERSATION_FIELDS = ("id", "source", "turns", "background", "meta")
TURN_FIELDS = ("role", "text", "reference", "gold_label", "gold_claims", "meta")
CLAIM_FIELDS = ("text", "label")


def _type(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _describe(turn: int | None, field: str | None, message: str) -> str:
    where = ", ".join(([f"turn {turn}"] if turn is not None else []) + ([f"field '{field}'"] if field else []))
    return f"{where}: {message}" if where else message


def record_problems(d: Any) -> list[Problem]:
    """Every way one :meth:`Conversation.to_dict` record breaks the schema (empty when it is valid).

    Conversations need a str/int ``id``, a str ``source`` and a non-empty ``turns`` list with at
    least one assistant turn; turns a ``role`` in ROLES, a str ``text``, a str-or-null ``reference``,
    a ``gold_label`` in TURN_LABELS or null, ``gold_claims`` null or a list of ``{text, label}``
    with the label in CLAIM_CATEGORIES or null; ``background`` is a list of str, ``meta`` an object.
    """
    if not isinstance(d, dict):
        return [(None, None, f"expected a JSON object (one conversation), got {_type(d)}")]
    out: list[Problem] = []
    for key in sorted(set(d) - set(CONVERSATION_FIELDS)):
        out.append((None, key, f"unknown field; expected only {list(CONVERSATION_FIELDS)}"))
    for key in ("id", "source", "turns"):
        if key not in d:
            out.append((None, key, "missing"))
    cid = d.get("id")
    if "id" in d and not (
        (isinstance(cid, str) and cid.strip()) or (isinstance(cid, int) and not isinstance(cid, bool))
    ):
        out.append((None, "id", f"expected a non-empty string or an integer, got {cid!r}"))
    if "source" in d and not isinstance(d["source"], str):
        out.append((None, "source", f"expected a string, got {_type(d['source'])}"))
    bg = d.get("background")
    if bg is not None:
        if not isinstance(bg, list):
            out.append((None, "background", f"expected a list of strings, got {_type(bg)}"))
        else:
            out += [(None, f"background[{k}]", f"expected a string, got {_type(b)}")
                    for k, b in enumerate(bg) if not isinstance(b, str)]
    if d.get("meta") is not None and not isinstance(d["meta"], dict):
        out.append((None, "meta", f"expected an object, got {_type(d['meta'])}"))
    turns = d.get("turns")
    if "turns" in d and not isinstance(turns, list):
        out.append((None, "turns", f"expected a list of turn objects, got {_type(turns)}"))
    elif isinstance(turns, list):
        if not turns:
            out.append((None, "turns", "conversation has no turns"))
        for ti, t in enumerate(turns):
            out += [(ti, f, m) for _, f, m in _turn_problems(t)]
        if turns and all(isinstance(t, dict) for t in turns) and not any(t.get("role") == ASSISTANT for t in turns):
            out.append((None, "turns", "no assistant turn: nothing to score"))
    return out


def _turn_problems(t: Any) -> list[Problem]:
    if not isinstance(t, dict):
        return [(None, None, f"expected a turn object {{role, text, ...}}, got {_type(t)} {t!r:.40}")]
    out: list[Problem] = []
    for key in sorted(set(t) - set(TURN_FIELDS)):
        out.append((None, key, f"unknown field; expected only {list(TURN_FIELDS)}"))
    if "role" not in t:
        out.append((None, "role", "missing"))
    elif t["role"] not in ROLES:
        out.append((None, "role", f"expected one of {ROLES}, got {t['role']!r}"))
    if "text" not in t:
        out.append((None, "text", "missing"))
    elif not isinstance(t["text"], str):
        out.append((None, "text", f"expected a string, got {_type(t['text'])}"))
    if t.get("reference") is not None and not isinstance(t["reference"], str):
        out.append((None, "reference", f"expected a string or null, got {_type(t['reference'])}"))
    gold = t.get("gold_label")
    if gold is not None and gold not in TURN_LABELS:
        out.append((None, "gold_label", f"expected one of {TURN_LABELS} or null, got {gold!r}"))
    if t.get("meta") is not None and not isinstance(t["meta"], dict):
        out.append((None, "meta", f"expected an object, got {_type(t['meta'])}"))
    claims = t.get("gold_claims")
    if claims is None:
        return out
    if not isinstance(claims, list):
        return out + [(None, "gold_claims", f"expected a list of {{text, label}} objects or null, got {_type(claims)}")]
    for k, c in enumerate(claims):
        f = f"gold_claims[{k}]"
        if not isinstance(c, dict):
            out.append((None, f, f"expected an object {{text, label}}, got {_type(c)}"))
            continue
        for key in sorted(set(c) - set(CLAIM_FIELDS)):
            out.append((None, f"{f}.{key}", f"unknown field; expected only {list(CLAIM_FIELDS)}"))
        if not isinstance(c.get("text"), str):
            out.append(
                (None, f"{f}.text", "missing" if "text" not in c else f"expected a string, got {_type(c['text'])}")
            )
        label = c.get("label")
        if label is not None and label not in CLAIM_CATEGORIES:
            out.append((None, f"{f}.label", f"expected one of {CLAIM_CATEGORIES} or null, got {label!r}"))
    return out
