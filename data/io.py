"""Read and write conversations: the VISTA authors' JSON format and our own JSONL.

Authors' format (``human_eval_VISTA_input.json``): a JSON list of conversations, each a list of
turns ``{"role", "utterance", "retrieved_document", "gold_label", "human_claims", ...}`` where
``retrieved_document`` is ``"N/A"`` for assistant turns that are context only. Our JSONL format:
one :meth:`Conversation.to_dict` per line.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..runtime.exit_codes import OutputError
from .schema import (
    ABSTENTION,
    ASSISTANT,
    CONTRADICTED,
    LACKING_EVIDENCE,
    OUT_OF_SCOPE,
    ROLES,
    TURN_LABELS,
    VERIFIED,
    Claim,
    Conversation,
    Turn,
    record_problems,
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
    """Bad input, located by file, conversation index (and JSONL line), turn index and field.

    One error may carry several problems (:meth:`collect`): ``problems`` lists them, each itself a
    located single-problem ``SchemaError``; ``str()`` / :meth:`lines` give one line per problem,
    the first :attr:`MAX_LISTED` and then how many more.
    """

    MAX_LISTED = 20

    def __init__(
        self,
        path: str | os.PathLike | None,
        message: str,
        conversation: int | None = None,
        turn: int | None = None,
        field: str | None = None,
        *,
        line: int | None = None,
    ) -> None:
        self.path, self.conversation, self.turn, self.field = path, conversation, turn, field
        self.message, self.line = message, line
        self.problems: list[SchemaError] = [self]
        where = [str(path) if path is not None else "<input>"]
        if line is not None:  # "line 3 of f.jsonl, conversation 2": editors and humans both find it
            where[0] = f"line {line} of {where[0]}"
        if conversation is not None:
            where.append(f"conversation {conversation}")
        if turn is not None:
            where.append(f"turn {turn}")
        if field is not None:   # a key holding a line break or another control character is shown escaped
            where.append(f"field '{field if field.isprintable() else json.dumps(field)[1:-1]}'")
        super().__init__(f"{', '.join(where)}: {message}")

    @classmethod
    def collect(cls, problems: Sequence[SchemaError]) -> SchemaError:
        """One error for several problems (the first one's location is the error's own)."""
        if not problems:
            raise ValueError("SchemaError.collect needs at least one problem")
        if len(problems) == 1:
            return problems[0]
        first = problems[0]
        err = SchemaError(first.path, first.message, first.conversation, first.turn, first.field, line=first.line)
        err.problems = [q for p in problems for q in p.problems]
        err.args = ("\n".join(err.lines()),)
        return err

    def lines(self) -> list[str]:
        """One line per problem, capped at :attr:`MAX_LISTED` plus a count of the rest."""
        if len(self.problems) == 1:
            return [str(self.args[0])]
        shown = [str(p.args[0]) for p in self.problems[: self.MAX_LISTED]]
        rest = len(self.problems) - len(shown)
        if rest:
            paths = sorted({str(p.path) for p in self.problems})
            shown.append(f"{', '.join(paths)}: and {rest} more problem{'s' if rest > 1 else ''} "
                         f"({len(self.problems)} in all)")
        return shown


class _Problems:
    """Collects located problems in one file so that a reader reports all of them at once."""

    def __init__(self, path: str | os.PathLike | None) -> None:
        self.path, self.items = path, []

    def add(self, message: str, conversation: int | None = None, turn: int | None = None,
            field: str | None = None, line: int | None = None) -> None:
        self.items.append(SchemaError(self.path, message, conversation, turn, field, line=line))

    def raise_if_any(self) -> None:
        if self.items:
            raise SchemaError.collect(self.items)


def _expect(cond: bool, path, msg: str, conv=None, turn=None, field=None) -> None:
    if not cond:
        raise SchemaError(path, msg, conv, turn, field)


UNIQUE_IDS_WHY = "ids must be unique (eval pairs results by conversation id and turn index)"


# Turn keys the conversation id is made of: (key, the JSON types it may have, those types in words).
_ID_FIELDS = (("conversation_id", (str, int), "a string or an integer"), ("dataset", (str,), "a string"))


def _type_name(v: Any) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", float: "number"}
    return names.get(type(v), type(v).__name__)


def _turn_from_authors(raw: Any, out: _Problems, ci: int, ti: int) -> Turn | None:
    """The Turn of one authors' turn object, or None after adding its problems to ``out``."""
    if not isinstance(raw, dict):
        out.add(f"expected a turn object {{role, utterance, retrieved_document, ...}}, got {type(raw).__name__}",
                ci, ti)
        return None
    n = len(out.items)
    for key in ("role", "utterance"):
        if key not in raw:
            out.add("missing", ci, ti, key)
    role = raw.get("role")
    if "role" in raw and role not in ROLES:
        out.add(f"expected one of {ROLES}, got {role!r}", ci, ti, "role")
    if "utterance" in raw and not isinstance(raw["utterance"], str):
        out.add(f"expected a string, got {type(raw['utterance']).__name__}", ci, ti, "utterance")
    ref = raw.get("retrieved_document")
    if ref is not None and not isinstance(ref, str):
        out.add(f'expected a string or "N/A", got {type(ref).__name__}', ci, ti, "retrieved_document")
    if role == ASSISTANT and ref is None:
        out.add('missing (use "N/A" for context-only assistant turns)', ci, ti, "retrieved_document")
    for key, types, what in _ID_FIELDS:   # the conversation's id comes from these: any other JSON type is named
        v = raw.get(key)
        if v is not None and not (isinstance(v, types) and not isinstance(v, bool)):
            out.add(f"expected {what} or null, got {_type_name(v)} {json.dumps(v)[:40]}", ci, ti, key)
    gold = raw.get("gold_label")
    if gold is not None and gold not in TURN_LABELS:
        out.add(f"expected one of {TURN_LABELS} or null, got {gold!r}", ci, ti, "gold_label")
    claims = None
    hc = raw.get("human_claims")
    if hc is not None and not isinstance(hc, list):
        out.add(f"expected a list of {{claim_text, human_judgement}} objects, got {type(hc).__name__}",
                ci, ti, "human_claims")
    elif hc is not None:
        claims = []
        for k, c in enumerate(hc):
            f = f"human_claims[{k}]"
            if not (isinstance(c, dict) and isinstance(c.get("claim_text"), str)):
                out.add("expected an object with a string 'claim_text'", ci, ti, f)
                continue
            judgement = c.get("human_judgement")
            label = None
            if judgement is not None:
                label = HUMAN_JUDGEMENT_TO_CATEGORY.get(str(judgement).strip().lower())
                if label is None:
                    out.add(f"unknown human_judgement {judgement!r}; expected one of "
                            f"{sorted(HUMAN_JUDGEMENT_TO_CATEGORY)}", ci, ti, f)
            claims.append(Claim(c["claim_text"], label))
    if len(out.items) > n:
        return None
    reference = None if ref is None or ref.strip() == NA else ref
    meta = {k: v for k, v in raw.items() if k not in _AUTHORS_KEYS}
    if role == ASSISTANT and reference is None:
        meta["retrieved_document"] = ref  # keep the exact marker for round trips
    return Turn(role=role, text=raw["utterance"], reference=reference, gold_label=gold,
                gold_claims=claims, meta=meta)


def conversations_from_authors_json(data: Any, path=None, source: str | None = None) -> list[Conversation]:
    """Parse the authors' list-of-lists JSON (already decoded); every problem is reported at once."""
    _expect(isinstance(data, list), path, f"expected a JSON list of conversations, got {type(data).__name__}")
    _expect(len(data) > 0, path, "the list holds no conversations")
    stem = Path(path).stem if path is not None else "conv"
    problems = _Problems(path)
    out = []
    first_index: dict[str, int] = {}
    for ci, raw_conv in enumerate(data):
        if not isinstance(raw_conv, list):
            problems.add(f"expected a list of turns, got {type(raw_conv).__name__}", ci)
            continue
        if not raw_conv:
            problems.add("conversation has no turns", ci)
            continue
        turns = [_turn_from_authors(t, problems, ci, ti) for ti, t in enumerate(raw_conv)]
        if any(t is None for t in turns):
            continue
        if not any(t.role == ASSISTANT for t in turns):
            problems.add("no assistant turn: nothing to score", ci)
            continue
        ids = {(t.meta.get("dataset"), t.meta.get("conversation_id")) for t in turns if "conversation_id" in t.meta}
        dataset = next((d for d, _ in ids if d), source or "unknown")
        conv_id = f"{dataset}-{next(iter(ids))[1]}" if len(ids) == 1 else f"{stem}-{ci}"
        if conv_id in first_index:
            problems.add(f"conversation id {conv_id!r} is also that of conversation {first_index[conv_id]} "
                         f"(ids come from the turns' dataset and conversation_id); {UNIQUE_IDS_WHY}", ci,
                         field="conversation_id")
            continue
        first_index[conv_id] = ci
        out.append(Conversation(id=conv_id, source=dataset, turns=turns, meta={"index": ci}))
    problems.raise_if_any()
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


def _read_text(path: Path) -> str:
    """The file as text: UTF-8 (a BOM is allowed), else an error naming the byte offset and line."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise SchemaError(path, f"not UTF-8 text: byte 0x{raw[e.start]:02x} at offset {e.start} ({e.reason}); "
                          "save the file as UTF-8", line=line) from None
    if not text.strip():
        what = "one JSON conversation per line" if path.suffix == ".jsonl" else "a JSON list of conversations"
        raise SchemaError(path, f"empty file; expected {what}")
    return text


def read_jsonl(path: str | os.PathLike) -> list[Conversation]:
    """Our JSONL: one :meth:`Conversation.to_dict` per line (blank lines are skipped). Conversations
    are numbered from 0 in file order; problems name the line and the conversation."""
    path = Path(path)
    problems = _Problems(path)
    out = []
    first_line: dict[str, tuple[int, int]] = {}
    ci = -1
    # split on "\n" only: str.splitlines() would also split inside texts holding U+2028, U+0085, ...
    for lineno, line in enumerate(_read_text(path).split("\n"), 1):
        if not line.strip():
            continue
        ci += 1
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            problems.add(f"not valid JSON (column {e.colno}: {e.msg})", ci, line=lineno)
            continue
        found = record_problems(d)
        for turn, field, message in found:
            problems.add(message, ci, turn, field, line=lineno)
        if found:
            continue
        conv = Conversation.from_dict(d)
        if conv.id in first_line:
            k, n = first_line[conv.id]
            problems.add(f"conversation id {conv.id!r} is also that of conversation {k} (line {n}); "
                         f"{UNIQUE_IDS_WHY}", ci, field="id", line=lineno)
            continue
        first_line[conv.id] = (ci, lineno)
        out.append(conv)
    problems.raise_if_any()
    return out


# Benchmarks that ship their data as tables: such a file goes through `data prepare` first.
BENCHMARK_SUFFIXES = {".tsv": "begin", ".csv": "fade"}


def read_conversations(path: str | os.PathLike) -> list[Conversation]:
    """Read conversations from ``.jsonl`` (ours) or ``.json`` (the authors' format).

    Every problem in the file (types, encoding, JSON syntax, empty conversations, duplicate ids)
    is checked before anything is returned and reported together in one :class:`SchemaError`.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.is_dir():
        raise SchemaError(path, "is a directory; expected a .jsonl or .json conversation file")
    if path.suffix == ".jsonl":
        return read_jsonl(path)
    if path.suffix.lower() in BENCHMARK_SUFFIXES:
        raise SchemaError(path, f"a {path.suffix} file is not a conversation file (.jsonl, or the authors' .json); "
                                f"a benchmark's own table like this one is read by `vista-distill data prepare "
                                f"--benchmark {BENCHMARK_SUFFIXES[path.suffix.lower()]} --source {path}`")
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as e:
        hint = ("; a .json file holds the authors' list of conversations, a .jsonl file one conversation "
                "per line") if e.msg == "Extra data" else ""
        raise SchemaError(path, f"not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}){hint}") from None
    return conversations_from_authors_json(data, path)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write through a temporary file and rename, so a crash never leaves a half-written file. A file that cannot
    be written (a path through a file, no permission, a full disk) raises :class:`OutputError` naming it."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise OutputError(path, e.strerror or str(e)) from e
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the permissions open() would
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise OutputError(path, e.strerror or str(e)) from e
        raise


def write_conversations(conversations: Iterable[Conversation], path: str | os.PathLike) -> None:
    """Write ``.jsonl`` (ours) or ``.json`` (the authors' format), atomically."""
    path = Path(path)
    if path.suffix == ".jsonl":
        text = "".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in conversations)
    else:
        text = json.dumps(conversations_to_authors_json(conversations), ensure_ascii=False, indent=1)
    atomic_write_text(path, text)


def print_error(e: BaseException) -> None:
    """``error: ...`` on stderr: one line per problem of a :class:`SchemaError`, else the message."""
    for line in (e.lines() if hasattr(e, "lines") else [str(e)]):
        print(f"error: {line}", file=sys.stderr)
