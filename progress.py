"""The live progress bar of ``score``, ``distill`` and ``eval``: one tqdm bar over model requests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


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


__all__ = ["RequestBar"]
