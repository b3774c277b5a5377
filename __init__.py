"""vista-distill: the VISTA dialogue-factuality pipeline as compact local scorers."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["ClaimLabel", "ScoreResult", "ScoredClaim", "ScoredTurn", "Scores", "Verdicts", "VistaScorer",
           "read_conversations", "write_conversations"]

RESULT_TYPES = ("ClaimLabel", "ScoreResult", "ScoredClaim", "ScoredTurn", "Scores", "Verdicts")


def __getattr__(name: str):
    # Lazy: `import vista_distill` must stay cheap (no torch) for the CLI and the data tools.
    if name == "VistaScorer":
        from .scorer import VistaScorer

        return VistaScorer
    if name in RESULT_TYPES:
        from .scoring import results

        return getattr(results, name)
    if name in ("read_conversations", "write_conversations"):
        from .data import io

        return getattr(io, name)
    raise AttributeError(name)
