"""Evidence for the world-knowledge stage: passages from the user's knowledge file or folder, searched per
claim with BM25 (the ``bm25s`` library), and, in the "concurrent" setting of the mixed-context study, the
turn's reference sentences and background facts searched together with them.

Knowledge files: ``.jsonl`` (one passage per line, in a ``text``, ``passage`` or ``contents`` field), ``.json``
(a list of such objects or strings) or ``.txt`` / ``.md`` (passages separated by blank lines); a folder is
read file by file in name order. Errors name the file, line and field.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

TEXT_FIELDS = ("text", "passage", "contents")


class KnowledgeError(ValueError):
    """A knowledge file or folder that cannot be read; the message names the file, line and field."""

KNOWLEDGE_SUFFIXES = (".jsonl", ".json", ".txt", ".md")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


@dataclass(frozen=True)
class Passage:
    text: str
    source: str          # "knowledge" (the user's files), "reference" or "background" (the turn's own)
    score: float
    origin: str = ""     # file:line of a knowledge passage


class KnowledgeBase:
    """Passages searched with BM25 (English stop words removed); a query's passages with a positive score."""

    def __init__(self, passages: list[str], source: str = "knowledge", origins: list[str] | None = None) -> None:
        import bm25s

        self.passages, self.source = passages, source
        self.origins = origins or [""] * len(passages)
        self._bm25 = bm25s.BM25()
        if passages:
            self._bm25.index(bm25s.tokenize(passages, stopwords="en", show_progress=False), show_progress=False)

    def search(self, query: str, k: int) -> list[Passage]:
        import bm25s

        if not self.passages or k <= 0:
            return []
        ids, scores = self._bm25.retrieve(bm25s.tokenize([query], stopwords="en", show_progress=False),
                                          k=min(k, len(self.passages)), show_progress=False)
        return [Passage(self.passages[i], self.source, round(float(s), 4), self.origins[i])
                for i, s in zip(ids[0].tolist(), scores[0].tolist()) if s > 0]


def read_passages(path: str | Path) -> tuple[list[str], list[str]]:
    """(passages, their origins ``file:line``) of a knowledge file or folder."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in KNOWLEDGE_SUFFIXES and p.is_file())
        if not files:
            raise KnowledgeError(f"{path}: no knowledge files ({', '.join(KNOWLEDGE_SUFFIXES)}) in this folder")
    elif path.is_file():
        files = [path]
    else:
        raise KnowledgeError(f"{path}: knowledge file or folder not found")
    passages: list[str] = []
    origins: list[str] = []
    for f in files:
        for where, text in _file_passages(f):
            passages.append(text)
            origins.append(where)
    if not passages:
        raise KnowledgeError(f"{path}: no passages found")
    return passages, origins


def _file_passages(f: Path) -> list[tuple[str, str]]:
    raw = f.read_text(encoding="utf-8")
    if f.suffix in (".txt", ".md"):   # paragraphs: lines up to a blank one
        out: list[tuple[str, str]] = []
        block: list[str] = []
        start = 0
        for n, line in enumerate([*raw.splitlines(), ""], 1):
            if line.strip():
                start = start if block else n
                block.append(line.strip())
            elif block:
                out.append((f"{f}:{start}", " ".join(block)))
                block = []
        return out
    if f.suffix == ".json":
        try:
            rows = json.loads(raw)
        except json.JSONDecodeError as e:
            raise KnowledgeError(f"{f}: not valid JSON ({e})") from None
        if not isinstance(rows, list):
            raise KnowledgeError(f"{f}: expected a list of passages (strings or objects with a text field)")
        return [(f"{f}:[{i}]", _passage_text(row, f"{f}: item {i}")) for i, row in enumerate(rows)]
    out = []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise KnowledgeError(f"{f}:{n}: not valid JSON ({e})") from None
        out.append((f"{f}:{n}", _passage_text(row, f"{f}:{n}")))
    return out


def _passage_text(row: object, where: str) -> str:
    if isinstance(row, str) and row.strip():
        return row.strip()
    if isinstance(row, dict):
        for key in TEXT_FIELDS:
            if isinstance(row.get(key), str) and row[key].strip():
                return row[key].strip()
    raise KnowledgeError(f"{where}: no passage text (expected a non-empty string in one of the fields "
                      f"{', '.join(TEXT_FIELDS)})")


@functools.lru_cache(maxsize=4)
def load_knowledge(path: str) -> KnowledgeBase:
    """The knowledge base of a file or folder, indexed once per process."""
    passages, origins = read_passages(path)
    return KnowledgeBase(passages, "knowledge", origins)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text or "") if s.strip()]


class TurnContext:
    """The turn's reference sentences and background facts as one BM25 index (the "concurrent" setting),
    built once per turn and searched for each of its claims."""

    def __init__(self, reference: str | None, background: list[str]) -> None:
        own = [(s, "reference") for s in sentences(reference or "")] + [(b, "background") for b in background]
        self._tags = {t: src for t, src in reversed(own)}
        self._index = KnowledgeBase([t for t, _ in own], "turn") if own else None

    def search(self, claim: str, k: int) -> list[Passage]:
        if self._index is None:
            return []
        return [Passage(p.text, self._tags[p.text], p.score) for p in self._index.search(claim, k)]


def evidence_for(claim: str, knowledge: str | None, top_k: int, turn: TurnContext | None = None) -> list[Passage]:
    """The passages the world stage sees for ``claim``: the knowledge base's best ``top_k`` (when a path is
    given), then, with the turn's context ("concurrent"), the best ``top_k`` of its reference and background."""
    found = load_knowledge(knowledge).search(claim, top_k) if knowledge else []
    return found + (turn.search(claim, top_k) if turn is not None else [])
