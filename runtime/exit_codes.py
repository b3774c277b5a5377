"""Exit codes of every ``vista-distill`` command, in one table (``vista-distill --help`` prints it), and the two
errors the commands share: a wrong option (:class:`UsageError`) and an output that cannot be written
(:class:`OutputError`)."""

from __future__ import annotations

import os
from pathlib import Path

OK = 0
PROBLEMS = 1      # the command ran and reports problems: `check` found some, `data fetch` missed files
BAD_INPUT = 2     # an input file, a recipe, silver data or an option is wrong; the message names file, record, field
SERVER = 3        # a server (teacher, student or base) cannot be reached or refuses
OUTPUT = 4        # an output cannot be written (a path through a file, no permission, a full disk)
INTERRUPTED = 130  # Ctrl-C: finished work is kept (journal, teacher cache) and the same command resumes

TABLE = ((OK, "done"), (PROBLEMS, "problems found: check's findings, files data fetch could not fetch or verify"),
         (BAD_INPUT, "bad input: a file, recipe, silver data or option (the message names it)"),
         (SERVER, "a server cannot be reached or refuses"),
         (OUTPUT, "an output cannot be written (the message names the path; a journal is kept to resume)"),
         (INTERRUPTED, "interrupted (finished work is kept; the same command resumes)"))


def help_text() -> str:
    """The table as ``--help`` shows it."""
    return "exit codes:\n" + "\n".join(f"  {code:<4} {what}" for code, what in TABLE)


class UsageError(ValueError):
    """A wrong option or argument value (exit :data:`BAD_INPUT`)."""


class OutputError(OSError):
    """An output that cannot be written: ``path`` and why (exit :data:`OUTPUT`)."""

    def __init__(self, path: str | os.PathLike, why: str) -> None:
        super().__init__(f"{path}: cannot write ({why})")
        self.path = Path(path)


def check_writable(path: str | os.PathLike) -> None:
    """Raise :class:`OutputError` when ``path`` cannot be written for a reason visible before any work: an
    ancestor that is a file, a folder without write permission, or ``path`` itself a folder."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(path, "it is a folder")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(path, f"{parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(path, f"no permission to write in {parent}")
