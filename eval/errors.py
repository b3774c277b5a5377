"""The error that stops a whole evaluation (a system that cannot run is reported, not raised)."""

from __future__ import annotations


class EvalError(ValueError):
    """A configuration or material problem that stops the whole evaluation."""
