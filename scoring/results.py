"""What ``VistaScorer`` returns: typed, read-only views of the records it writes.

A run's records stay plain dicts (``ScoreResult.records``, one per assistant turn, written as JSONL and read by eval
and the report page); :class:`ScoredTurn`, :class:`ScoredClaim`, :class:`Verdicts` and :class:`Scores` give them
attribute access (``turn.verdicts.safe``, ``claim.category``), and each ``to_dict()`` returns the record it was
built from, key for key. :class:`ClaimLabel` is one answer of ``VistaScorer.label_claims``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import FrozenInstanceError, asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from ..data.io import atomic_write_text
from ..pipeline.engine import TurnKey

T = TypeVar("T")


@dataclass(frozen=True)
class PerRule(Generic[T]):
    """A value under each turn rule (``safe``, ``strict``, ``authors``)."""

    safe: T | None = None
    strict: T | None = None
    authors: T | None = None

    def to_dict(self) -> dict[str, T | None]:
        return asdict(self)


class Verdicts(PerRule[str]):
    """A turn's verdict under each turn rule: ``faithful``, ``hallucinated`` or ``unknown`` (``None`` for a context
    turn, which is not scored)."""


class Scores(PerRule[float]):
    """A turn's VISTA score under each turn rule: the share of its claims the rule counts as safe (``None`` where no
    claim has a category, and for context turns)."""


@dataclass(frozen=True)
class ScoredClaim:
    """One claim of a turn. ``category``: ``VERIFIED`` or a stage-3 category (``None`` if its answer could not be
    read); ``stage2`` / ``stage3``: that stage's answer (``label``, ``probs``, ``raw``, ...); ``world``: the world
    stage's answer, where it ran."""

    text: str
    category: str | None
    stage2: Mapping[str, Any] | None = None
    stage3: Mapping[str, Any] | None = None
    error: str | None = None
    world: Mapping[str, Any] | None = None
    _record: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScoredClaim:
        return cls(d["text"], d.get("category"), d.get("stage2"), d.get("stage3"), d.get("error"), d.get("world"),
                   _record=copy.deepcopy(dict(d)))

    def to_dict(self) -> dict[str, Any]:
        """The claim as the record holds it."""
        return copy.deepcopy(dict(self._record))


@dataclass
class ScoredTurn(TurnKey):
    """One assistant turn of a run. ``scored`` is false for a context turn (no reference): its claims feed the
    background, it gets no verdict. Every field: docs/python-api.md#records."""

    claims: tuple[ScoredClaim, ...]
    verdicts: Verdicts
    scores: Scores
    unknown_reason: str | None = None
    gold_label: str | None = None
    gold_claims: tuple[Mapping[str, Any], ...] | None = None
    stage1_raw: str = ""
    stage1_truncated: bool = False
    n_claims_raw: int = 0
    claims_dropped: Mapping[str, int] = field(default_factory=dict)
    background_size: int = 0
    stage4: Mapping[str, Any] | None = None
    world_verdict: str | None = None
    world_reason: str | None = None
    answered_by: Mapping[str, str] = field(default_factory=dict)
    stage1_fallback: bool = False
    _record: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        # read-only once built (``_record`` is set last), as the frozen views beside it
        if "_record" in self.__dict__:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScoredTurn:
        """The view of one record (``TurnResult.to_dict()``, a line of the JSONL ``vista-distill score`` writes)."""
        rules = ("safe", "strict", "authors")
        verdicts, scores = d.get("verdicts") or {}, d.get("vista_scores") or {}
        gold = d.get("gold_claims")
        return cls(
            d["conversation_id"], d["source"], d["turn_index"], d["text"], d.get("reference"), d["scored"],
            tuple(ScoredClaim.from_dict(c) for c in d.get("claims") or []),
            Verdicts(*(verdicts.get(r) for r in rules)), Scores(*(scores.get(r) for r in rules)),
            unknown_reason=d.get("unknown_reason"), gold_label=d.get("gold_label"),
            gold_claims=tuple(gold) if gold is not None else None, stage1_raw=d.get("stage1_raw", ""),
            stage1_truncated=d.get("stage1_truncated", False), n_claims_raw=d.get("n_claims_raw", 0),
            claims_dropped=d.get("claims_dropped") or {}, background_size=d.get("background_size", 0),
            stage4=d.get("stage4"), world_verdict=d.get("world_verdict"), world_reason=d.get("world_reason"),
            answered_by=d.get("answered_by") or {}, stage1_fallback=bool(d.get("stage1_fallback")),
            _record=copy.deepcopy(dict(d)))

    def to_dict(self) -> dict[str, Any]:
        """The record this turn was built from, exactly (the JSONL line)."""
        return copy.deepcopy(dict(self._record))


@dataclass(frozen=True)
class ClaimLabel:
    """Stage 2's answer on one (document, claim) pair: ``label`` (``VERIFIED`` / ``UNVERIFIABLE``, ``None`` if the
    answer could not be read), ``p_verified`` (P(VERIFIED)), ``probs`` (each label's probability, where the backend
    scores labels) and ``error``."""

    label: str | None
    p_verified: float | None
    probs: Mapping[str, float] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


@dataclass
class ScoreResult:
    """What ``VistaScorer.score`` returns. ``turns``: one :class:`ScoredTurn` per assistant turn; ``records``: the same
    turns as the dicts written to JSONL (``turns[i].to_dict() == records[i]``); ``summary``: the run's numbers
    (``scoring/summary.py``); ``evidence_records``: the evidence probes' records, where they ran. The HTML page of a
    run is the report layer's: ``scoring.page.write_score_page(result, path)``."""

    records: list[dict[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)
    evidence_records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def turns(self) -> list[ScoredTurn]:
        return [ScoredTurn.from_dict(r) for r in self.records]

    def write(self, path: str | Path) -> tuple[Path, Path]:
        """Write the records as JSONL to ``path``, the summary beside it (``<stem>.summary.json``) and, where the
        evidence probes ran, their records (``<stem>.evidence.jsonl``). Returns ``(path, summary_path)``."""
        path = Path(path)
        atomic_write_text(path, _jsonl(self.records))
        if self.evidence_records:
            atomic_write_text(path.with_name(path.stem + ".evidence.jsonl"), _jsonl(self.evidence_records))
        summary_path = path.with_name(path.stem + ".summary.json")
        atomic_write_text(summary_path, json.dumps(self.summary, indent=2, ensure_ascii=False))
        return path, summary_path
