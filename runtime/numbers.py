"""The one place a number becomes a table cell (report.md, the terminal tables, the page, the benchmarks' markdown,
the rendered figures): a fraction as a percentage, a number, a p-value; ``–`` where there is none."""

from __future__ import annotations

from typing import Any

MISSING = "–"


def percent(x: Any, digits: int = 1, *, signed: bool = False, unit: str = "", missing: str = MISSING) -> str:
    """A fraction as a percentage: ``0.7164`` -> ``71.6`` (``signed``: ``+71.6``; ``unit``: appended, ``"%"``)."""
    if x is None:
        return missing
    return f"{100 * x:{'+' if signed else ''}.{digits}f}{unit}"


def number(x: Any, digits: int = 3, missing: str = MISSING) -> str:
    """A float to ``digits`` decimals; anything else as it prints."""
    if x is None:
        return missing
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def pvalue(p: float | None, digits: int | None = None, missing: str = MISSING) -> str:
    """A p-value: ``digits`` significant digits, or (None) four decimals and scientific notation below 1e-4."""
    if p is None:
        return missing
    if digits is not None:
        return f"{p:.{digits}g}"
    return f"{p:.1e}" if p < 1e-4 else f"{p:.4f}"


__all__ = ["MISSING", "number", "percent", "pvalue"]
