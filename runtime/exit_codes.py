"""Exit codes of every ``vista-distill`` command, in one table (``vista-distill --help`` prints it), and the two
errors the commands share: a wrong option (:class:`UsageError`) and an output that cannot be written
(:class:`OutputError`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

OK = 0
PROBLEMS = 1      # the command ran and reports problems: `check` found some, `data fetch` missed files
BAD_INPUT = 2     # an input file, a recipe, silver data or an option is wrong; the message names file, record, field
SERVER = 3        # a server (teacher, student or base) cannot be reached or refuses
OUTPUT = 4        # an output cannot be written (a path through a file, no permission, a full disk, a live run on it)
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


def writable_dir(path: str | os.PathLike, what: str = "output folder", moved_by: str | None = None) -> Path:
    """``path`` created (with its parents) and checked writable before any work; an :class:`OutputError` naming
    it, ``what`` it is and, where one moves it, the setting or variable ``moved_by``."""
    path = Path(path)
    hint = f"; {moved_by} moves it" if moved_by else ""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(path, f"the {what} cannot be created: {e.strerror or e}{hint}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise OutputError(path, f"no permission to write in the {what}{hint}")
    return path


class RunLocked(OutputError):
    """Another live process is writing this output (exit :data:`OUTPUT`)."""


def lock_path(path: str | os.PathLike) -> Path:
    """The lock file :func:`hold_output` takes for ``path``: beside it, ``<name>.lock``."""
    path = Path(path)
    return path.with_name(path.name + ".lock")


def hold_output(path: str | os.PathLike) -> Any:
    """An exclusive lock on the output ``path`` for as long as the returned file stays open (the process's life at
    most: the kernel drops the lock of a dead process, so a killed run's lock is taken over); :class:`RunLocked`
    naming the live run's pid when another process holds it."""
    import fcntl

    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    f = open(lock, "a+", encoding="utf-8")   # noqa: SIM115 (held open: the lock lives as long as the file)
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        pid = f.read().strip() or "?"
        f.close()
        raise RunLocked(path, f"another run (pid {pid}) is writing it; wait for it to end or choose another "
                              "output") from None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f

