"""A run's finished parts on disk, so that a killed ``score`` or ``eval`` resumes where it stopped.

``score`` cuts the conversations into fixed chunks (by position in the input), ``eval`` runs each system per
round; each finished part is appended to a JSONL journal, flushed and fsynced, as soon as it finishes. A rerun
with the same input, settings and model reads the journal, skips the parts it holds and runs the rest with the
same boundaries, so its output is the one an uninterrupted run writes. The first line names what the journal
belongs to (a sha256 of the conversations, the settings, the model and the chunking); a journal of another run
is set aside with a warning, and a torn last line (a kill mid-write) is dropped.
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
    ``{"key": k, "value": v}`` line per finished part."""

    def __init__(self, path: str | Path, fingerprint: str) -> None:
        self.path = Path(path)
        self.fingerprint = fingerprint
        self._lock: Any = None

    def open(self) -> dict[str, Any]:
        """The finished parts this run's journal holds (none without one), the journal rewritten to hold exactly
        those (a torn last line dropped, another run's journal replaced) and ready for :meth:`append`. The journal is
        this process's until :meth:`remove` or its end: a second run on it is refused (``RunLocked``), so what it
        holds is only ever a stopped run's."""
        from ..runtime.exit_codes import hold_output

        if self._lock is None:
            self._lock = hold_output(self.path)
        done: dict[str, Any] = {}
        if self.path.exists():
            lines = self.path.read_text(encoding="utf-8").splitlines()
            head = _json(lines[0]) if lines else None
            if not isinstance(head, dict) or head.get("journal") != self.fingerprint:
                log.warning("%s: the journal of another run (other input, settings or model): starting over",
                            self.path)
            else:
                for n, line in enumerate(lines[1:], 2):
                    entry = _json(line)
                    if not (isinstance(entry, dict) and isinstance(entry.get("key"), str) and "value" in entry):
                        log.warning("%s line %d: unreadable (a run killed while writing it): dropped, and the "
                                    "lines after it", self.path, n)
                        break
                    done[entry["key"]] = entry["value"]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in (
            {"journal": self.fingerprint}, *({"key": k, "value": v} for k, v in done.items()))))
        return done

    def append(self, key: str, value: Any) -> None:
        """Add a finished part: on disk (flushed, fsynced) before this returns."""
        line = json.dumps({"key": key, "value": value}, ensure_ascii=False, default=str) + "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def remove(self) -> None:
        """The journal gone with the run it served (its lock file too)."""
        from ..runtime.exit_codes import lock_path

        self.path.unlink(missing_ok=True)
        self.release()
        lock_path(self.path).unlink(missing_ok=True)

    def release(self) -> None:
        """Let another run take the journal (the lock file stays: whoever locks it next owns it)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def _json(line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None
