"""The live progress bar of ``score``, ``distill`` and ``eval`` (one tqdm bar over model requests), and
the quiet terminal: library progress bars and known warnings off unless ``-v``, everything in a log file."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

QUIET_ENV = "VISTA_DISTILL_QUIET"   # set by quiet_libraries: the trainer then draws no bar of its own


def quiet_libraries() -> None:
    """Turn off the progress bars of datasets, transformers and huggingface_hub ("Tokenizing", "Filter",
    "Loading weights", GGUF conversion...) and their info messages; warnings go to the log (see
    :func:`log_to_file`), not the terminal. ``vista-distill -v`` leaves all of it on."""
    os.environ[QUIET_ENV] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    logging.captureWarnings(True)
    warn_log = logging.getLogger("py.warnings")
    warn_log.propagate = False          # FutureWarning and the like: log file only
    if not warn_log.handlers:
        warn_log.addHandler(logging.NullHandler())
    try:
        import datasets

        datasets.disable_progress_bars()
        datasets.logging.set_verbosity_error()
    except ImportError:
        pass
    try:
        import transformers

        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
    except ImportError:
        pass
    try:
        import huggingface_hub

        huggingface_hub.utils.disable_progress_bars()
    except ImportError:
        pass


def log_to_file(path: str | Path) -> Path:
    """Append every log record (INFO and up, library messages and captured warnings included) to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(min(root.level or logging.WARNING, logging.INFO))
    for h in root.handlers:   # the terminal keeps its own level
        if h is not handler and h.level == logging.NOTSET:
            h.setLevel(logging.WARNING if os.environ.get(QUIET_ENV) else logging.INFO)
    logging.getLogger("py.warnings").addHandler(handler)
    for name in ("transformers", "datasets", "trl", "peft", "accelerate"):
        logging.getLogger(name).addHandler(handler)
    return path


class RequestBar:
    """A tqdm bar (on stderr) counting model requests.

    ``target``: the backend that reports requests as they finish, through its ``progress`` attribute
    (pointed at :meth:`update` while the bar is open; see ``backends.base.Backend``); without a target,
    requests count as done when :meth:`on_issue` announces them. ``total=0`` grows with the requests announced; ``None``
    leaves the bar without a total. ``postfix`` gives the text after the bar (default: the stage last
    issued); it is redrawn with the bar. A disabled bar prints nothing and leaves ``target`` alone.
    """

    def __init__(self, desc: str, target: Any = None, *, enabled: bool = True, total: int | None = 0,
                 mininterval: float = 0.1, postfix: Callable[[], str] | None = None) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, desc=desc, unit="req", dynamic_ncols=True, disable=not enabled,
                        mininterval=mininterval)
        self.stage = ""
        self.postfix = postfix or (lambda: self.stage)
        self.target = target if enabled else None
        if self.target is not None:
            self.target.progress = self.update

    def update(self, n: int) -> None:
        """``n`` requests done."""
        self.bar.update(n)
        self.show()

    def show(self) -> None:
        """Take the postfix text anew (drawn at the bar's next refresh)."""
        self.bar.set_postfix_str(self.postfix(), refresh=False)

    def on_issue(self, stage: str, n: int) -> None:
        """``n`` requests of ``stage`` sent (the engine's ``on_issue`` callback)."""
        self.stage = stage
        if self.bar.total is not None:
            self.bar.total += n
        self.show()
        self.bar.refresh()
        if self.target is None:
            self.bar.update(n)

    def close(self) -> None:
        self.bar.close()
        if self.target is not None:
            self.target.progress = None
            self.target = None   # the bar keeps no model alive


__all__ = ["QUIET_ENV", "RequestBar", "log_to_file", "quiet_libraries"]
