"""Undoing class-balanced sampling at inference: logit adjustment (Menon et al., 2021, "Long-tail learning via logit
adjustment").

An adapter trained with ``train.class_balance=sampler`` saw each label c at a rate ``count_c x w_c`` instead of
``count_c`` (``train/balance.py``), so its label scores carry a prior that favours the rare labels. Adding
``-log w_c`` to each label's log-probability puts the training data's own label prior back. Whether that helps is
decided on the silver validation split after training (``train/evidence_fit.py``: accuracy with and without) and the
decision is kept beside the adapter as ``label_prior.json``; both backends (in process and served) apply a shift the
file holds, so a user loading the adapters gets the verdicts the choice was made with.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PRIOR_FILE = "label_prior.json"


@dataclass
class LabelPrior:
    """Per-label log-probability shifts (empty: the adapter's own scores were kept) and what the choice saw."""

    shift: dict[str, float]
    fitted: dict[str, Any] = field(default_factory=dict)

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / PRIOR_FILE
        path.write_text(json.dumps({"shift": self.shift, "fitted": self.fitted}, indent=2) + "\n")
        return path

    @classmethod
    def load(cls, folder: str | Path) -> LabelPrior | None:
        """The folder's prior when it shifts anything, else None."""
        path = Path(folder) / PRIOR_FILE
        if not path.exists():
            return None
        from ..data.io import SchemaError  # a ValueError: bad input, the CLI's one-line error

        try:
            raw = json.loads(path.read_text())
        except ValueError as e:
            raise SchemaError(path, f"not valid JSON ({e}); delete it or train the stage again") from e
        shift = raw.get("shift") if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or not isinstance(shift, dict):
            raise SchemaError(path, "expected an object {shift: {label: number}, fitted: {...}}",
                              field=None if not isinstance(raw, dict) else "shift")
        if problem := shift_problem(shift):
            raise SchemaError(path, problem[1], field=f"shift.{problem[0]}")
        prior = cls({str(k): float(v) for k, v in shift.items()}, raw.get("fitted") or {})
        return prior if prior.shift else None


def shift_problem(shift: Mapping[str, Any]) -> tuple[str, str] | None:
    """(label, why) for the first entry of a label shift that is not a known label with a finite number; a shift
    that named a label in another spelling would otherwise be dropped without a word."""
    from ..data.vocabulary import LABELS

    known = {lab for labels in LABELS.values() for lab in labels}
    for label, v in shift.items():
        if label not in known:
            return str(label), f"unknown label {str(label)[:40]!r} (labels: {', '.join(sorted(known))})"
        if not json_number(v):
            return str(label), f"expected a finite number, got {json.dumps(v)[:40]}"
    return None


def json_number(v: Any) -> bool:
    """A finite JSON number a float holds (not a boolean, not NaN or Infinity, not one too large for a float)."""
    return not isinstance(v, bool) and (isinstance(v, float) and math.isfinite(v) or isinstance(v, int)
                                        and abs(v) < 1e308)


def sampler_shift(weights: Mapping[str, float]) -> dict[str, float]:
    """``-log w_c`` per label from the sampler's weights (a label's shift is relative: only differences matter)."""
    return {lab: -math.log(w) for lab, w in weights.items() if w > 0}

