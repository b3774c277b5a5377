"""The report's cells and tables: numbers, p-values and percentages as report.md prints them (– where missing), the
accuracy over the turns every system covered, and the markdown table (stage_rules.py and tuning.py use them too)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _number(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _pvalue(p: float | None) -> str:
    if p is None:
        return "–"
    return f"{p:.1e}" if p < 1e-4 else f"{p:.4f}"


def _percent(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _common(turn: dict[str, Any]) -> str:
    """Accuracy over the turns every system covered, with their number."""
    if turn.get("n_common") is None:
        return "–"
    return f"{_percent(turn.get('accuracy_common'))} ({turn['n_common']})"
