"""Read and write conversations: the VISTA authors' JSON format and our own JSONL.

Authors' format (``human_eval_VISTA_input.json``): a JSON list of conversations, each a list of
turns ``{"role", "utterance", "retrieved_document", "gold_label", "human_claims", ...}`` where
``retrieved_document`` is ``"N/A"`` for assistant turns that are context only. Our JSONL format:
one :meth:`Conversation.to_dict` per line.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .schema import (
    ABSTENTION,
    ASSISTANT,
    CLAIM_CATEGORIES,
    CONTRADICTED,
    LACKING_EVIDENCE,
    OUT_OF_SCOPE,
    ROLES,
    TURN_LABELS,
    VERIFIED,
    Claim,
    Conversation,
    Turn,
)

NA = "N/A"

# The authors' human_judgement vocabulary -> our claim categories.
HUMAN_JUDGEMENT_TO_CATEGORY = {
    "verifiable": VERIFIED,
    "verified": VERIFIED,
    "lacking evidence": LACKING_EVIDENCE,
    "out of scope": OUT_OF_SCOPE,
    "out-of-scope": OUT_OF_SCOPE,
    "abstention": ABSTENTION,
    "contradicted": CONTRADICTED,
}
CATEGORY_TO_HUMAN_JUDGEMENT = {
    VERIFIED: "verifiable",
    LACKING_EVIDENCE: "lacking evidence",
    OUT_OF_SCOPE: "out of scope",
    ABSTENTION: "abstention",
    CONTRADICTED: "contradicted",
}
# Keys of an authors' turn that map onto Turn fields; everything else is kept in Turn.meta.
_AUTHORS_KEYS = {"role", "utterance", "retrieved_document", "gold_label", "human_claims"}


class SchemaError(ValueError):
    """Bad input, located by file, conversation index, turn index and field."""

    def __init__(
        self,
        path: str | os.PathLike | None,
        message: str,
        conversation: int | None = None,
        turn: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path, self.conversation, self.turn, self.field = path, conversation, turn, field
        self.message = message
        where = [str(path) if path is not None else "<input>"]
        if conversation is not None:
            where.append(f"conversation {conversation}")
        if turn is not None:
            where.append(f"turn {turn}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{', '.join(where)}: {message}")


def _expect(cond: bool, path, msg: str, conv=None, turn=None, field=None) -> None:
    if not cond:
        raise SchemaError(path, msg, conv, turn, field)


def _turn_from_authors(raw: Any, path, ci: int, ti: int) -> Turn:
    _expect(isinstance(raw, dict), path, f"expected a JSON object, got {type(raw).__name__}", ci, ti)
    for key in ("role", "utterance"):
        _expect(key in raw, path, "missing", ci, ti, key)
    role = raw["role"]
    _expect(role in ROLES, path, f"expected one of {ROLES}, got {role!r}", ci, ti, "role")
    _expect(isinstance(raw["utterance"], str), path, "expected a string", ci, ti, "utterance")
    ref = raw.get("retrieved_document")
    if ref is not None:
        _expect(isinstance(ref, str), path, "expected a string or \"N/A\"", ci, ti, "retrieved_document")
    if role == ASSISTANT:
        _expect(ref is not None, path, 'missing (use "N/A" for context-only assistant turns)', ci, ti,
                "retrieved_document")
    reference = None if ref is None or ref.strip() == NA else ref
    gold = raw.get("gold_label")
    if gold is not None:
        _expect(gold in TURN_LABELS, path, f"expected one of {TURN_LABELS}, got {gold!r}", ci, ti, "gold_label")
    claims = None
    if raw.get("human_claims") is not None:
        hc = raw["human_claims"]
        _expect(isinstance(hc, list), path, "expected a list", ci, ti, "human_claims")
        claims = []
        for k, c in enumerate(hc):
            f = f"human_claims[{k}]"
            _expect(isinstance(c, dict) and isinstance(c.get("claim_text"), str), path,
                    "expected an object with a string 'claim_text'", ci, ti, f)
            judgement = c.get("human_judgement")
            label = None
            if judgement is not None:
                label = HUMAN_JUDGEMENT_TO_CATEGORY.get(str(judgement).strip().lower())
                _expect(label is not None, path,
                        f"unknown human_judgement {judgement!r}; expected one of "
                        f"{sorted(HUMAN_JUDGEMENT_TO_CATEGORY)}", ci, ti, f)
            claims.append(Claim(c["claim_text"], label))
    meta = {k: v for k, v in raw.items() if k not in _AUTHORS_KEYS}
    if role == ASSISTANT and reference is None:
        meta["retrieved_document"] = ref  # keep the exact marker for round trips
    return Turn(role=role, text=raw["utterance"], reference=reference, gold_label=gold,
                gold_claims=claims, meta=meta)


def conversations_from_authors_json(data: Any, path=None, source: str | None = None) -> list[Conversation]:
    """Parse the authors' list-of-lists JSON (already decoded)."""
    _expect(isinstance(data, list), path, f"expected a JSON list of conversations, got {type(data).__name__}")
    stem = Path(path).stem if path is not None else "conv"
    out = []
    for ci, raw_conv in enumerate(data):
        _expect(isinstance(raw_conv, list), path, f"expected a list of turns, got {type(raw_conv).__name__}", ci)
        _expect(len(raw_conv) > 0, path, "conversation has no turns", ci)
        turns = [_turn_from_authors(t, path, ci, ti) for ti, t in enumerate(raw_conv)]
        ids = {(t.meta.get("dataset"), t.meta.get("conversation_id")) for t in turns if "conversation_id" in t.meta}
        dataset = next((d for d, _ in ids if d), source or "unknown")
        conv_id = f"{dataset}-{next(iter(ids))[1]}" if len(ids) == 1 else f"{stem}-{ci}"
        out.append(Conversation(id=conv_id, source=dataset, turns=turns, meta={"index": ci}))
    return out


def conversations_to_authors_json(conversations: Iterable[Conversation]) -> list[list[dict[str, Any]]]:
    out = []
    for conv in conversations:
        turns = []
        for t in conv.turns:
            meta = dict(t.meta)
            d: dict[str, Any] = {"role": t.role, "utterance": t.text}
            marker = meta.pop("retrieved_document", NA)
            if t.role == ASSISTANT or t.reference is not None:
                d["retrieved_document"] = t.reference if t.reference is not None else marker
            if t.gold_claims is not None:
                d["human_claims"] = [
                    {"claim_text": c.text, **({"human_judgement": CATEGORY_TO_HUMAN_JUDGEMENT[c.label]}
                                             if c.label else {})}
                    for c in t.gold_claims
                ]
            if t.gold_label is not None:
                d["gold_label"] = t.gold_label
            d.update(meta)
            turns.append(d)
        out.append(turns)
    return out


def _validate(conv: Conversation, path, ci: int) -> Conversation:
    for ti, t in enumerate(conv.turns):
        _expect(t.role in ROLES, path, f"expected one of {ROLES}, got {t.role!r}", ci, ti, "role")
        _expect(isinstance(t.text, str), path, "expected a string", ci, ti, "text")
        if t.gold_label is not None:
            _expect(t.gold_label in TURN_LABELS, path, f"expected one of {TURN_LABELS}, got {t.gold_label!r}",
                    ci, ti, "gold_label")
        for k, c in enumerate(t.gold_claims or []):
            _expect(c.label is None or c.label in CLAIM_CATEGORIES, path,
                    f"expected one of {CLAIM_CATEGORIES}, got {c.label!r}", ci, ti, f"gold_claims[{k}].label")
    return conv


def read_jsonl(path: str | os.PathLike) -> list[Conversation]:
    out = []
    with open(path, encoding="utf-8") as f:
        for ci, line in enumerate(f):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                raise SchemaError(path, f"line {ci + 1} is not valid JSON ({e.msg})", ci) from e
            _expect(isinstance(d, dict), path, "expected a JSON object per line", ci)
            for key in ("id", "source", "turns"):
                _expect(key in d, path, "missing", ci, field=key)
            try:
                conv = Conversation.from_dict(d)
            except (TypeError, KeyError) as e:
                raise SchemaError(path, f"malformed record ({e})", ci) from e
            out.append(_validate(conv, path, ci))
    return out


def read_conversations(path: str | os.PathLike) -> list[Conversation]:
    """Read conversations from ``.jsonl`` (ours) or ``.json`` (the authors' format)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.suffix == ".jsonl":
        return read_jsonl(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise SchemaError(path, f"not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from e
    return conversations_from_authors_json(data, path)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write through a temporary file and rename, so a crash never leaves a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the permissions open() would
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_conversations(conversations: Iterable[Conversation], path: str | os.PathLike) -> None:
    """Write ``.jsonl`` (ours) or ``.json`` (the authors' format), atomically."""
    path = Path(path)
    if path.suffix == ".jsonl":
        text = "".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in conversations)
    else:
        text = json.dumps(conversations_to_authors_json(conversations), ensure_ascii=False, indent=1)
    atomic_write_text(path, text)
