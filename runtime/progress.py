"""The terminal: live progress bars of ``score``, ``distill``, ``train`` and ``eval`` (rich: one bar per phase,
with a total and an ETA), and quiet libraries (their progress bars and known warnings off
unless ``-v``, everything in a log file)."""

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


def console(stderr: bool = True):
    """The rich console vista-distill's progress and tables go to (stderr for bars, stdout for results)."""
    from rich.console import Console

    out = Console(stderr=stderr, highlight=False, soft_wrap=False)
    if not out.is_terminal:   # a log file or pipe: keep whole lines (rich would crop them at 80 columns)
        out.width = max(out.width, 200)
    return out


def make_table(title: str, header: list[str], rows: list[list[Any]], max_width: dict[int, int] | None = None):
    """A rich table for the terminal: first column left-aligned, the rest right-aligned, None as "-". A header may
    hold a line break (two-line headers keep tables within 100 columns); ``max_width`` folds a column's cells."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE, title_justify="left")
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i == 0 else "right", max_width=(max_width or {}).get(i))
    for row in rows:
        table.add_row(*("-" if v is None else str(v) for v in row))
    return table


def print_table(title: str, header: list[str], rows: list[list[Any]], max_width: dict[int, int] | None = None) -> None:
    """A closing summary table on stdout (make_table)."""
    console(stderr=False).print(make_table(title, header, rows, max_width))


class RequestBar:
    """A rich bar (on stderr) counting model requests, with a total and an ETA.

    ``target``: the backend that reports requests as they finish, through its ``progress`` attribute
    (pointed at :meth:`update` while the bar is open; see ``pipeline.protocol.Backend``); without a target,
    requests count as done when :meth:`on_issue` announces them. ``total=0`` grows with the requests
    announced (stage-1 requests are all issued up front; later stages add theirs as claims appear); ``None``
    leaves the bar without a total. ``postfix`` gives the text after the bar (default: the stage last
    issued); it is redrawn with the bar. A disabled bar prints nothing and leaves ``target`` alone.
    On a terminal the bar is redrawn in place; into a file or pipe it is written once, when it closes.
    """

    def __init__(self, desc: str, target: Any = None, *, enabled: bool = True, total: int | None = 0,
                 mininterval: float = 0.1, postfix: Callable[[], str] | None = None, unit: str = "req") -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.enabled = enabled
        self.stage = ""
        self.postfix = postfix or (lambda: self.stage)
        self.completed, self.total = 0, total
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(),
            TextColumn(unit), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
            TextColumn("{task.fields[postfix]}"),
            console=console(), disable=not enabled, refresh_per_second=max(1.0, 1 / max(mininterval, 1e-3)),
        )
        self._task = self._progress.add_task(desc, total=total, postfix="")
        if enabled:
            self._progress.start()
        self.target = target if enabled else None
        if self.target is not None:
            self.target.progress = self.update

    @property
    def postfix_text(self) -> str:
        return str(self._progress.tasks[0].fields.get("postfix", ""))

    def update(self, n: int) -> None:
        """``n`` requests done."""
        self.completed += n
        self._progress.update(self._task, advance=n)
        self.show()

    def show(self) -> None:
        """Take the postfix text anew (drawn at the bar's next refresh)."""
        self._progress.update(self._task, postfix=self.postfix())

    def on_issue(self, stage: str, n: int) -> None:
        """``n`` requests of ``stage`` sent (the engine's ``on_issue`` callback)."""
        self.stage = stage
        if self.total is not None:
            self.total += n
            self._progress.update(self._task, total=self.total)
        self.show()
        if self.target is None:
            self.update(n)

    def close(self) -> None:
        if self.enabled:
            self.show()
            self._progress.stop()
            self.enabled = False
        if self.target is not None:
            self.target.progress = None
            self.target = None   # the bar keeps no model alive


def training_bar(stage: str) -> Any:
    """A ``transformers.TrainerCallback`` drawing one bar over the stage's optimizer steps (total and ETA),
    with the training and eval loss as they are logged; used when the trainer's own bar is off (quiet)."""
    from transformers import TrainerCallback

    class StepBar(TrainerCallback):
        def __init__(self) -> None:
            self.bar: RequestBar | None = None
            self.loss: dict[str, float] = {}

        def _text(self) -> str:
            return " | ".join(f"{k} {v:.3f}" for k, v in self.loss.items())

        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                self.bar = RequestBar(f"train {stage}", total=state.max_steps, unit="steps", postfix=self._text)
                if state.global_step:
                    self.bar.update(state.global_step)   # resumed

        def on_step_end(self, args, state, control, **kwargs):
            if self.bar is not None:
                self.bar.update(1)

        def on_log(self, args, state, control, logs=None, **kwargs):
            for key, name in (("loss", "loss"), ("eval_loss", "eval loss")):
                if logs and key in logs:
                    self.loss[name] = float(logs[key])
            if self.bar is not None:
                self.bar.show()

        def on_train_end(self, args, state, control, **kwargs):
            if self.bar is not None:
                self.bar.close()
                self.bar = None

    return StepBar()


__all__ = ["QUIET_ENV", "RequestBar", "console", "log_to_file", "make_table", "print_table", "quiet_libraries",
           "training_bar"]
