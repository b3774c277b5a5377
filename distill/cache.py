"""On-disk cache of teacher calls: one JSON file per call under ``calls/<2 hex>/<key>.json``.

The key is a sha256 over the model, the rendered messages and every sampling parameter, so a
rerun (after Ctrl-C, SIGKILL or power loss) finds each completed call and never repeats it. Every
file is written to a temporary name, fsynced and renamed (then the folder is fsynced), so a
reader sees either nothing or a whole entry; an unreadable entry (a disk fault) is a miss.
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


class CallCache:
    """Completed teacher calls on disk; ``stats`` counts hits, misses, writes and unreadable entries."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.stats = {"hits": 0, "misses": 0, "writes": 0, "overwrites": 0, "unreadable": 0}

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        p = self.path(key)
        try:
            entry = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            self.stats["misses"] += 1
            return None
        except (OSError, ValueError) as e:
            log.warning("%s: unreadable cache entry (%s); calling the teacher again", p, e)
            self.stats["unreadable"] += 1
            self.stats["misses"] += 1
            return None
        if entry.get("key") != key:
            log.warning("%s: cache entry holds key %s; calling the teacher again", p, entry.get("key"))
            self.stats["unreadable"] += 1
            self.stats["misses"] += 1
            return None
        self.stats["hits"] += 1
        return entry

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
