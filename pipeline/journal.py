"""A run's finished chunks on disk, so that a killed ``score`` resumes where it stopped.

The conversations are cut into fixed chunks (by position in the input); each chunk's records are appended to
a JSONL journal, flushed and fsynced, as soon as the chunk finishes. A rerun with the same input, settings and
model reads the journal, skips the chunks it holds and runs the rest with the same chunk boundaries, so its
output is the one an uninterrupted run writes. The first line names what the journal belongs to (a sha256 of
the conversations, the engine settings, the model and the chunk size); a journal of another run is set aside
with a warning, and a torn last line (a kill mid-write) is dropped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..data.io import atomic_write_text

log = logging.getLogger(__name__)


def run_fingerprint(conversations: Sequence[Any], settings: Any, model: Any, chunk_size: int) -> str:
    """sha256 naming a run: its conversations, its engine settings, its model (and adapters) and chunk size."""
    payload = json.dumps({"conversations": [c.to_dict() for c in conversations], "settings": repr(settings),
                          "model": repr(model), "chunk_size": chunk_size},
                         ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class Journal:
    """The JSONL journal at ``path`` of the run named ``fingerprint``: ``{"journal": fingerprint}``, then one
    ``{"chunk": k, "records": [...]}`` line per finished chunk."""

    def __init__(self, path: str | Path, fingerprint: str) -> None:
        self.path = Path(path)
        self.fingerprint = fingerprint

    def open(self) -> dict[int, list[dict[str, Any]]]:
        """The finished chunks this run's journal holds (none without one), the journal rewritten to hold exactly
        those (a torn last line dropped, another run's journal replaced) and ready for :meth:`append`."""
        done: dict[int, list[dict[str, Any]]] = {}
        if self.path.exists():
            lines = self.path.read_text(encoding="utf-8").splitlines()
            head = _json(lines[0]) if lines else None
            if not isinstance(head, dict) or head.get("journal") != self.fingerprint:
                log.warning("%s: the journal of another run (other input, settings or model): starting over",
                            self.path)
            else:
                for n, line in enumerate(lines[1:], 2):
                    entry = _json(line)
                    if not (isinstance(entry, dict) and isinstance(entry.get("chunk"), int)
                            and isinstance(entry.get("records"), list)):
                        log.warning("%s line %d: unreadable (a run killed while writing it): dropped, and the "
                                    "lines after it", self.path, n)
                        break
                    done[entry["chunk"]] = entry["records"]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in (
            {"journal": self.fingerprint}, *({"chunk": k, "records": r} for k, r in sorted(done.items())))))
        return done

    def append(self, chunk: int, records: list[dict[str, Any]]) -> None:
        """Add a finished chunk: on disk (flushed, fsynced) before this returns."""
        line = json.dumps({"chunk": chunk, "records": records}, ensure_ascii=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _json(line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None
