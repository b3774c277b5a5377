"""The report's cells and tables: numbers, p-values and percentages as report.md prints them (runtime/numbers.py), the
accuracy over the turns every system covered, and the markdown table (stage_rules.py and tuning.py use them too)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..runtime.numbers import number as _number
from ..runtime.numbers import percent as _percent
from ..runtime.numbers import pvalue as _pvalue

if TYPE_CHECKING:
    from .results import TurnMetrics


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _common(turn: TurnMetrics) -> str:
    """Accuracy over the turns every system covered, with their number."""
    if turn.n_common is None:
        return "–"
    return f"{_percent(turn.accuracy_common)} ({turn.n_common})"


__all__ = ["_common", "_number", "_percent", "_pvalue", "markdown_table"]
