"""On-disk cache of teacher calls: one JSON file per call under ``calls/<2 hex>/<key>.json``.

The key is a sha256 over the model, the rendered messages and every sampling parameter, so a
rerun (after Ctrl-C, SIGKILL or power loss) finds each completed call and never repeats it. Every
file is written to a temporary name, fsynced and renamed (then the folder is fsynced), so a
reader sees either nothing or a whole entry. An unreadable entry (a disk fault, a truncated or
hand-edited file: not JSON, not an object, a field missing or of the wrong type, another key) is
logged and counted as ``unreadable`` and as a miss, so the call is made again and the entry rewritten.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..data.io import atomic_write_text

log = logging.getLogger(__name__)


def call_key(payload: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of ``payload`` (model, messages, sampling parameters)."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def messages_digest(messages: Any) -> str:
    """Short sha256 of a message list (to name a prompt in records without repeating it)."""
    return call_key({"messages": list(messages)})[:16]


# Fields an entry may hold and the types its readers (CachedBackend, OpenAIBackend) rely on; "key" and
# "text" are required. None is allowed where a backend writes it (no label, no probabilities).
_INT = (int,)
_NUM = (int, float)
ENTRY_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {   # field -> (types, may be None)
    "key": ((str,), False),
    "text": ((str,), False),
    "label": ((str,), True),
    "probs": ((dict,), True),
    "prompt_tokens": (_INT, False),
    "completion_tokens": (_INT, False),
    "latency_s": (_NUM, True),
    "raw": ((str,), True),
    "think": ((str,), True),
    "finish_reason": ((str,), True),
    "error": ((str,), True),
    "attempts": (_INT, True),
}
REQUIRED_FIELDS = ("key", "text")


def entry_problem(entry: Any, key: str) -> str | None:
    """Why ``entry`` (parsed JSON) is not a usable cache entry for ``key``, or None if it is."""
    if not isinstance(entry, dict):
        return f"expected a JSON object, found {type(entry).__name__}"
    missing = [f for f in REQUIRED_FIELDS if f not in entry]
    if missing:
        return f"field(s) {', '.join(missing)} missing"
    for name, (types, nullable) in ENTRY_FIELDS.items():
        if name not in entry or (entry[name] is None and nullable):
            continue
        value = entry[name]
        if isinstance(value, bool) or not isinstance(value, types):   # bool is an int to isinstance
            want = " or ".join(t.__name__ for t in types) + (" or null" if nullable else "")
            return f"field {name!r} should be {want}, found {type(value).__name__} {value!r:.60}"
    if entry["key"] != key:
        return f"holds key {entry['key']}"
    probs = entry.get("probs")
    if probs and not all(isinstance(v, _NUM) and not isinstance(v, bool) for v in probs.values()):
        return f"field 'probs' should map labels to numbers, found {probs!r:.80}"
    return None


class CallCache:
    """Completed teacher calls on disk; ``stats`` counts hits, misses, writes and unreadable entries."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.stats = {"hits": 0, "misses": 0, "writes": 0, "overwrites": 0, "unreadable": 0}

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry stored under ``key``, or None (a miss; an unreadable entry is also counted as such)."""
        p = self.path(key)
        try:
            entry = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            self.stats["misses"] += 1
            return None
        except (OSError, ValueError) as e:   # ValueError: not JSON, or not UTF-8
            return self._unreadable(p, f"{type(e).__name__}: {e}")
        problem = entry_problem(entry, key)
        if problem:
            return self._unreadable(p, problem)
        self.stats["hits"] += 1
        return entry

    def _unreadable(self, path: Path, why: str) -> None:
        log.warning("%s: unreadable cache entry (%s); calling the teacher again", path, why)
        self.stats["unreadable"] += 1
        self.stats["misses"] += 1
        return None

    def put(self, key: str, entry: Mapping[str, Any]) -> None:
        """Store a completed call atomically (durable once this returns)."""
        p = self.path(key)
        if p.exists():
            self.stats["overwrites"] += 1  # a repeated call: should stay 0
        atomic_write_text(p, json.dumps({**entry, "key": key}, ensure_ascii=False, sort_keys=True))
        fd = os.open(p.parent, os.O_RDONLY)
        try:
            os.fsync(fd)  # make the rename itself durable
        finally:
            os.close(fd)
        self.stats["writes"] += 1

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("??/*.json"))
