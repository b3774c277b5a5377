"""Shared machinery for the benchmark loaders: load reports, located row errors, label resolution.

Every loader reads *rows* (a CSV/TSV line, a JSON record, a dataset example) and turns each into
one *record* (usually one scored turn) or a counted rejection with its reason, so that
``rows_read == records_out + len(rejected)`` always holds (:meth:`LoadReport.reconciles`).

Rows are numbered from 1 in file order (the header of a CSV/TSV is not a row); where a CSV field
spans several lines the physical line is given too.
"""

from __future__ import annotations

import csv
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .io import UNIQUE_IDS_WHY, SchemaError
from .schema import ABSTENTION, ASSISTANT, FAITHFUL, HALLUCINATED, USER, Claim, Conversation, Turn

AMBIGUOUS = "ambiguous"
# What to do with labels that have no agreed binary mapping (Generic, Uncooperative, off-topic, ...).
# "hallucinated" is the default: the VISTA paper's benchmarks count anything not attributable as
# UNVERIFIABLE, and that is also what the source datasets' own binary columns do (BEGIN's
# "Not fully attributable", AIS's INT & AIS = 0).
AMBIGUOUS_CHOICES = ("hallucinated", "faithful", "drop")
DEFAULT_AMBIGUOUS = "hallucinated"
ON_ERROR_CHOICES = ("raise", "reject")

MALFORMED = "malformed"  # the row breaks the format: an error in on_error="raise" mode
DROPPED = "dropped"  # the row is well formed but left out by a named option (e.g. ambiguous="drop")
BLANK = "blank"  # an all-empty padding row (some released CSVs end with hundreds of them)


class RowError(SchemaError):
    """A malformed input row, located by file and row number (and field when known)."""

    def __init__(self, path: str | os.PathLike | None, row: int | str, message: str,
                 field: str | None = None, line: int | None = None) -> None:
        super().__init__(path, message, field=field)
        self.row, self.line = row, line
        where = [str(path) if path is not None else "<input>", f"row {row}"]
        if line is not None:
            where[-1] += f" (line {line})"
        if field is not None:
            where.append(f"field '{field}'")
        self.args = (f"{', '.join(where)}: {message}",)


@dataclass
class Rejection:
    row: int | str
    reason: str
    kind: str = MALFORMED


@dataclass
class LoadReport:
    """Counts for one loaded source; ``rows_read == records_out + len(rejected)``."""

    source: str
    benchmark: str
    rows_read: int = 0
    records_out: int = 0
    conversations: int = 0
    rejected: list[Rejection] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def reconciles(self) -> bool:
        return self.rows_read == self.records_out + len(self.rejected)

    def rejected_by_kind(self) -> dict[str, int]:
        return dict(Counter(r.kind for r in self.rejected))

    def rejected_by_reason(self) -> dict[str, int]:
        # Reasons carry row-specific detail after " -- "; group on the generic part.
        return dict(Counter(r.reason.split(" -- ")[0] for r in self.rejected).most_common())

    def summary(self) -> str:
        ok = "ok" if self.reconciles else "MISMATCH"
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.rejected_by_kind().items())) or "none"
        return (f"{self.source}: rows read {self.rows_read} = records {self.records_out} + rejected "
                f"{len(self.rejected)} ({kinds}) [{ok}]; conversations {self.conversations}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["reconciles"] = self.reconciles
        return d


@dataclass
class LoadResult:
    """A loader's output: the conversations and the report that accounts for every input row."""

    conversations: list[Conversation]
    report: LoadReport

    def __iter__(self) -> Iterator[Conversation]:
        return iter(self.conversations)

    def __len__(self) -> int:
        return len(self.conversations)

    def __getitem__(self, i: int) -> Conversation:
        return self.conversations[i]


class RowSink:
    """Counts rows for a report and routes problems: raise, or reject with the reason."""

    def __init__(self, path: str | os.PathLike, benchmark: str, on_error: str = "raise") -> None:
        if on_error not in ON_ERROR_CHOICES:
            raise ValueError(f"on_error must be one of {ON_ERROR_CHOICES}, got {on_error!r}")
        self.path, self.on_error = path, on_error
        self.report = LoadReport(source=str(path), benchmark=benchmark)

    def read(self, n: int = 1) -> None:
        self.report.rows_read += n

    def ok(self, n: int = 1) -> None:
        self.report.records_out += n

    def malformed(self, row: int | str, message: str, field: str | None = None,
                  line: int | None = None) -> None:
        """Raise a :class:`RowError`, or record the rejection (``on_error="reject"``)."""
        err = RowError(self.path, row, message, field, line)
        if self.on_error == "raise":
            raise err
        where = f"field '{field}': " if field else ""
        self.report.rejected.append(Rejection(row, f"{where}{message}", MALFORMED))

    def drop(self, row: int | str, reason: str, kind: str = DROPPED) -> None:
        """Record a well-formed row left out on purpose (never raises)."""
        self.report.rejected.append(Rejection(row, reason, kind))

    def finish(self, conversations: list[Conversation]) -> LoadResult:
        self.report.conversations = len(conversations)
        if not self.report.reconciles:  # a loader bug, never a data problem
            raise RuntimeError(f"unreconciled load report: {self.report.summary()}")
        return LoadResult(conversations, self.report)


def validate_options(ambiguous: str, on_error: str) -> None:
    if ambiguous not in AMBIGUOUS_CHOICES:
        raise ValueError(f"ambiguous must be one of {AMBIGUOUS_CHOICES}, got {ambiguous!r}")
    if on_error not in ON_ERROR_CHOICES:
        raise ValueError(f"on_error must be one of {ON_ERROR_CHOICES}, got {on_error!r}")


def norm_label(label: str) -> str:
    return " ".join(str(label).strip().lower().replace("_", " ").split())


class UnknownLabel(ValueError):
    pass


class LabelTable:
    """Maps original labels to FAITHFUL / HALLUCINATED / AMBIGUOUS.

    ``overrides`` (the loaders' ``label_map`` option) re-map normalised original labels, e.g.
    ``{"partial hallucination": "ambiguous"}``; ``aliases`` fix known typos in released files.
    """

    def __init__(self, table: Mapping[str, str], overrides: Mapping[str, str] | None = None,
                 aliases: Mapping[str, str] | None = None) -> None:
        self.table = {norm_label(k): v for k, v in table.items()}
        for k, v in (overrides or {}).items():
            if v not in (FAITHFUL, HALLUCINATED, AMBIGUOUS):
                raise ValueError(f"label_map values must be faithful/hallucinated/ambiguous, "
                                 f"got {k!r}: {v!r}")
            self.table[norm_label(k)] = v
        self.aliases = {norm_label(k): norm_label(v) for k, v in (aliases or {}).items()}

    def classify(self, labels: Sequence[str]) -> str:
        """Several labels on one response combine as: any hallucinated label wins, then any
        ambiguous one; the response is faithful only when every label is faithful."""
        classes = set()
        for raw in labels:
            lab = norm_label(raw)
            cls = self.table.get(self.aliases.get(lab, lab))
            if cls is None:
                raise UnknownLabel(f"unknown label {raw!r}; expected one of {sorted(self.table)}")
            classes.add(cls)
        if not classes:
            raise UnknownLabel("no label")
        if HALLUCINATED in classes:
            return HALLUCINATED
        if AMBIGUOUS in classes:
            return AMBIGUOUS
        return FAITHFUL


def resolve(cls: str, ambiguous: str) -> str | None:
    """The turn label for a class; None means drop (ambiguous="drop")."""
    if cls != AMBIGUOUS:
        return cls
    return None if ambiguous == "drop" else ambiguous


def split_labels(cell: str) -> list[str]:
    """'entailment,uncooperative' / 'entailment. uncooperative' -> ['entailment', 'uncooperative']."""
    return [p for p in (s.strip() for s in re.split(r"[,.;/|]", cell)) if p]


def context_turns(history: Sequence[str], response_role: str = ASSISTANT) -> list[Turn]:
    """History utterances as context turns, roles alternating backwards from the response."""
    other = USER if response_role == ASSISTANT else ASSISTANT
    n = len(history)
    return [Turn(role=other if (n - i) % 2 == 1 else response_role, text=t) for i, t in enumerate(history)]


def read_delimited(path: str | os.PathLike, delimiter: str = ",", quoting: int = csv.QUOTE_MINIMAL
                   ) -> tuple[list[str], Iterator[tuple[int, int, dict[str, str | None], list[str] | None]]]:
    """Header (stripped names) and an iterator of (row number, end line, record, extra cells).

    Short rows give ``None`` for missing fields; long rows return the surplus cells so callers
    can reject them instead of silently truncating.
    """
    f = open(path, encoding="utf-8-sig", newline="")
    reader = csv.reader(f, delimiter=delimiter, quoting=quoting)
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        f.close()
        return [], iter(())

    def rows():
        with f:
            for i, cells in enumerate(reader, start=1):
                rec: dict[str, str | None] = dict(zip(header, cells))
                for h in header[len(cells):]:
                    rec[h] = None
                extra = cells[len(header):] or None
                yield i, reader.line_num, rec, extra

    return header, rows()


def source_files(source: str | os.PathLike, split: str | None, patterns: Sequence[str],
                 what: str, download: str | None = None) -> list[Path]:
    """``source`` itself when it is a file, else the files inside it matching ``patterns`` (which
    may use ``{split}``; without a split, ``*`` stands in for it). ``download``: where the benchmark is
    published, added to the error when nothing is found."""
    try:
        return _source_files(Path(source), split, patterns, what)
    except FileNotFoundError as e:
        if download is None:
            raise
        raise FileNotFoundError(f"{e}; {what.split()[0]} is published at {download}") from e


def _source_files(p: Path, split: str | None, patterns: Sequence[str], what: str) -> list[Path]:
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    if p.is_file():
        return [p]
    for pat in patterns:
        pat = pat.format(split=split if split is not None else "*")
        # "{split}*" without a split gives "**" inside a name, which glob rejects: squeeze it.
        pat = "/".join(part if part == "**" else re.sub(r"\*+", "*", part) for part in pat.split("/"))
        hits = sorted(p.glob(pat))
        if hits:
            return hits
    raise FileNotFoundError(f"{p}: no {what} file for split {split!r} (looked for {list(patterns)})")


def merge_results(results: Sequence[LoadResult], source: str | os.PathLike, benchmark: str) -> LoadResult:
    """One result for several files; rejected rows are prefixed with their file name."""
    if len(results) == 1:
        return results[0]
    report = LoadReport(source=str(source), benchmark=benchmark)
    convs: list[Conversation] = []
    for r in results:
        convs.extend(r.conversations)
        report.rows_read += r.report.rows_read
        report.records_out += r.report.records_out
        name = Path(r.report.source).name
        report.rejected.extend(Rejection(f"{name}:{j.row}", j.reason, j.kind) for j in r.report.rejected)
        report.notes.extend(r.report.notes)
    report.conversations = len(convs)
    return LoadResult(convs, report)


_NON_WORD = re.compile(r"[^0-9a-z]+")


def normalise_text(text: str) -> str:
    """Lower-case alphanumeric words only, so tokenisation ("it 's" / "it's") and case don't matter."""
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


def text_key(*parts: str, n: int = 16) -> str:
    """A short stable hash of normalised texts (used as a dialogue id where the data has none)."""
    import hashlib

    return hashlib.sha1("\x1f".join(normalise_text(p) for p in parts).encode()).hexdigest()[:n]


CLAIMS_CHOICES = ("none", "response", "response+abstention")

# A clear abstention (VISTA's ABSTENTION: "a refusal, expression of uncertainty, or lack of knowledge", e.g. "I
# don't know"): the speaker says they do not know, are not sure, or cannot say. Tokenised dialogue text is covered
# ("I do n't know", "I 'm not sure"). Not matched: "I didn't know that" (news to the speaker), "no idea" ("I had no
# idea!" is surprise; VISTA's annotators put "I have no idea where to begin" out of scope), and a hedge on the
# speaker's own view ("I'm not sure I agree", "I don't know if I'd call it a comedy": OUT-OF-SCOPE).
_ABSTAIN = re.compile(
    r"\b(?:i\s*(?:do\s*n['’ ]?t|dont|do\s+not)(?:\s+really)?\s+know"
    r"|i\s*(?:['’]\s*m|am|m)\s+not(?:\s+(?:really|quite|too|very|entirely|totally|so))?\s+sure"
    r"|(?<![a-z] )not\s+sure"
    r"|i\s*(?:ca\s*n['’ ]?t|cant|can\s*not)\s+(?:say|tell|answer|remember|recall))\b",
    re.IGNORECASE)
_OWN_VIEW = re.compile(r"\s*(?:if|whether|that)?\s*(?:i|i\s*['’]\s*[dm]|we|my)\b", re.IGNORECASE)
# where the abstaining clause ends: a sentence or clause mark, or a contrastive conjunction
_CLAUSE_END = re.compile(r"\s*(?:[.!?;,]|\b(?:but|though|although|however)\b)", re.IGNORECASE)
_LEFT_JOIN = re.compile(r"[\s,;:-]*(?:\b(?:but|though|although|however|and|so)\b[\s,;:-]*)?$", re.IGNORECASE)
_RIGHT_JOIN = re.compile(r"^[\s,;:.!?-]*(?:(?:but|though|although|however|and|so)\b[\s,;:-]*)?", re.IGNORECASE)
MIN_REST_WORDS = 3   # what is left of a response beside its abstention is a claim from this many words


def abstention_clause(text: str) -> tuple[int, int] | None:
    """Where in ``text`` its first clear abstention clause is (start, end): from the words "I don't know" / "I'm
    not sure" / "not sure" / "I can't say" to the end of that clause ("I don't know who directed it, but ..."
    -> "I don't know who directed it"); None when there is none (see ``_ABSTAIN``)."""
    for m in _ABSTAIN.finditer(text):
        if _OWN_VIEW.match(text, m.end()):
            continue
        end = _CLAUSE_END.search(text, m.end())
        return m.start(), end.start() if end else len(text.rstrip())
    return None


def response_claims(text: str, category: str, claims: str = "response") -> list[Claim]:
    """The gold claims of a response judged as a whole, labelled ``category`` (``claims="response"``: the response
    as is, one claim). ``claims="response+abstention"``: a clear abstention clause in it (:func:`abstention_clause`)
    is its own ABSTENTION claim, and the rest of the response, from ``MIN_REST_WORDS`` words, one claim labelled
    ``category`` (the response's label describes its content, not the "I don't know"; VISTA's annotators split
    "I don't know the exact amount but I do know that ..." the same way)."""
    flat = " ".join(text.split())
    span = abstention_clause(flat) if claims == "response+abstention" else None
    if span is None:
        return [Claim(text.strip(), category)]
    text, (start, end) = flat, span
    left, right = _LEFT_JOIN.sub("", text[:start]), _RIGHT_JOIN.sub("", text[end:])
    rest = " ".join(f"{left} {right}".split())
    out = [Claim(text[start:end], ABSTENTION)]
    if len(rest.split()) >= MIN_REST_WORDS:
        out.append(Claim(rest, category))
    return out


def validate_claims_option(claims: str) -> None:
    if claims not in CLAIMS_CHOICES:
        raise ValueError(f"claims must be one of {CLAIMS_CHOICES}, got {claims!r}")


def response_claim(turn: Turn, category: str, claims: str = "response") -> None:
    """The ``claims="response"`` option: the scored response as is becomes the turn's one gold claim (for
    benchmarks of single-utterance responses judged as a whole), labelled ``category``. It is not a
    decomposition, so it gives stage 2 and 3 examples and no stage-1 example. ``claims="response+abstention"``:
    a clear abstention in the response is split off as an ABSTENTION claim (:func:`response_claims`)."""
    turn.gold_claims = response_claims(turn.text, category, claims)
    turn.meta["claims_complete"] = False


def exchange(conv_id: str, source: str, history: Sequence[str], response: str, reference: str | None,
             gold: str | None, turn_meta: dict[str, Any], conv_meta: dict[str, Any]) -> Conversation:
    """A conversation of context turns followed by one scored assistant turn."""
    turns = context_turns(history)
    turns.append(Turn(role=ASSISTANT, text=response, reference=reference, gold_label=gold, meta=turn_meta))
    return Conversation(id=conv_id, source=source, turns=turns, meta=conv_meta)


def duplicate_id_problems(sources: Sequence[tuple[str, Sequence[Conversation]]],
                          keep: Callable[[Conversation], bool] | None = None) -> list[SchemaError]:
    """One located problem per conversation whose id an earlier one (in the same or an earlier
    source) already has; ``sources`` are (name, conversations as loaded) pairs, e.g. a recipe's
    files. ``keep`` leaves out conversations dropped later (e.g. leaks) while the reported
    positions stay those of the loaded lists."""
    first: dict[str, tuple[str, int]] = {}
    problems = []
    for name, convs in sources:
        for ci, conv in enumerate(convs):
            if keep is not None and not keep(conv):
                continue
            if conv.id not in first:
                first[conv.id] = (name, ci)
                continue
            other, k = first[conv.id]
            there = f"conversation {k}" if other == name else f"{other}, conversation {k}"
            problems.append(SchemaError(name, f"conversation id {conv.id!r} is also that of {there}; "
                                        f"{UNIQUE_IDS_WHY}", ci, field="id"))
    return problems


def validate_unique_ids(sources: Sequence[tuple[str, Sequence[Conversation]]],
                     keep: Callable[[Conversation], bool] | None = None) -> None:
    """Raise a :class:`SchemaError` naming both places of every repeated conversation id."""
    problems = duplicate_id_problems(sources, keep)
    if problems:
        raise SchemaError.collect(problems)
