"""The evidence head of a stage 2 adapter: how much the reference raises the claim's likelihood, weighed with the
adapter's own label margin.

A small student trained on label tokens learns what a hallucinated response *sounds* like faster than whether its
reference states it (bench/results/demo_protocol: own-vs-foreign AUC 0.53). The language model underneath does
read the reference: the claim's tokens become more likely once the reference that states them precedes them.
That pointwise mutual information, ``pmi = mean log p(claim | prompt with reference) - mean log p(claim | same
prompt, empty reference)`` (PMI-Faith, Nandwani et al. 2023, for knowledge-grounded dialogue), comes almost free
in process: the claim is already the end of the stage 2 prompt, so one forward gives both the label and the
claim's log-probabilities, and the empty-reference twin is a short prompt.

The head is logistic: ``P(VERIFIED) = sigmoid(w_margin * margin + w_pmi * pmi + w_overlap * overlap + bias)``,
``margin`` the adapter's log-probability of VERIFIED minus UNVERIFIABLE, ``overlap`` the share of the claim's content
words the reference holds (:func:`pipeline.evidence.coverage`, the overlap rule's own signal). Its numbers are fitted
after training on the stage's silver validation split (examples the adapter never trained on; the teacher's labels)
and saved beside the adapter as ``evidence_head.json``; the label layer (pipeline/labels.py ``weigh_evidence``)
applies it for every backend that loaded the file. A
head with ``w_margin = 0`` and no overlap is the ``pmi`` baseline (the base model's PMI alone,
backends/cheap_baselines.py). Served students give the claim's log-probabilities where the server echoes the prompt's
(backends/server.py); elsewhere their records say the head was not applied.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HEAD_FILE = "evidence_head.json"


@dataclass(frozen=True)
class EvidenceHead:
    w_margin: float
    w_pmi: float
    bias: float
    fitted: dict[str, Any] = field(default_factory=dict)   # on what, how many, their accuracy
    w_overlap: float = 0.0
    threshold: float = 0.5   # VERIFIED when P(VERIFIED) exceeds it (a calibration tunes it: backends/calibration.py)

    def p_verified(self, margin: float, pmi: float, overlap: float = 0.0) -> float:
        z = self.w_margin * margin + self.w_pmi * pmi + self.w_overlap * overlap + self.bias
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    def save(self, folder: str | Path, name: str = HEAD_FILE) -> Path:
        path = Path(folder) / name
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, folder: str | Path) -> EvidenceHead | None:
        """The head saved in an adapter folder, or None; a damaged file names itself."""
        path = Path(folder) / HEAD_FILE
        return cls.load_file(path) if path.exists() else None

    @classmethod
    def load_file(cls, path: str | Path) -> EvidenceHead:
        from ..data.io import SchemaError  # a ValueError: bad input, the CLI's one-line error

        try:
            d = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls.from_dict(d)
        except (ValueError, KeyError, TypeError, OverflowError, AttributeError) as e:
            why = f"missing {e}" if isinstance(e, KeyError) else " ".join(str(e).split())
            raise SchemaError(path, f"not an evidence head ({why}); delete it or fit it again") from e


    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvidenceHead:
        """The head a saved dict describes (``KeyError`` / ``ValueError`` / ``TypeError`` when it does not)."""
        threshold = float(d.get("threshold", 0.5))
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must lie strictly between 0 and 1, got {threshold}")
        weights = {k: d[k] if k in ("w_margin", "w_pmi", "bias") else d.get(k, 0.0)
                   for k in ("w_margin", "w_pmi", "bias", "w_overlap")}
        from .label_prior import json_number

        for k, v in weights.items():   # NaN or Infinity would answer UNVERIFIABLE (or VERIFIED) for every claim
            if not json_number(v):
                raise ValueError(f"{k}: expected a finite number, got {json.dumps(v)[:40]}")
        return cls(float(weights["w_margin"]), float(weights["w_pmi"]), float(weights["bias"]),
                   dict(d.get("fitted") or {}), float(weights["w_overlap"]), threshold)

    def says_verified(self, p: float) -> bool:
        return p > self.threshold


FEATURES = ("margin", "pmi", "overlap")


def fit(features: dict[str, Sequence[float]], verified: Sequence[bool], **about: Any) -> EvidenceHead:
    """The logistic head on the named ``features`` (any of ``FEATURES``; the others weigh 0) -> VERIFIED
    (scikit-learn, default L2), with what it was fitted on, its accuracy there, and each feature's accuracy alone
    there (margin > 0, the overlap rule, a PMI threshold fitted alone) for comparison."""
    from sklearn.linear_model import LogisticRegression

    unknown = set(features) - set(FEATURES)
    if unknown or not features:
        raise ValueError(f"evidence head features must be among {FEATURES}, got {sorted(features)}")
    names = [f for f in FEATURES if f in features]
    rows = list(zip(*(features[f] for f in names)))
    y = [int(v) for v in verified]
    if len(set(y)) < 2:
        raise ValueError(f"an evidence head needs both labels to fit; got {len(y)} examples of one")
    lr = LogisticRegression().fit(rows, y)
    w = dict(zip(names, lr.coef_[0].tolist()))
    head = EvidenceHead(w.get("margin", 0.0), w.get("pmi", 0.0), float(lr.intercept_[0]), {}, w.get("overlap", 0.0))
    feats = lambda r: {"margin": 0.0, "pmi": 0.0, **dict(zip(names, r))}  # noqa: E731
    acc = sum((head.p_verified(**feats(r)) > 0.5) == bool(v) for r, v in zip(rows, y)) / len(y)
    alone: dict[str, float] = {}
    if "margin" in features:
        alone["adapter_alone_accuracy"] = sum((m > 0) == bool(v) for m, v in zip(features["margin"], y)) / len(y)
    if "overlap" in features:
        alone["overlap_rule_accuracy"] = sum((o >= 0.5) == bool(v) for o, v in zip(features["overlap"], y)) / len(y)
    if "pmi" in features and len(names) > 1:
        pmi_lr = LogisticRegression().fit([[p] for p in features["pmi"]], y)
        alone["pmi_alone_accuracy"] = float(pmi_lr.score([[p] for p in features["pmi"]], y))
    return EvidenceHead(head.w_margin, head.w_pmi, head.bias,
                        {**about, "features": names, "examples": len(y), "verified": sum(y),
                         "accuracy": round(acc, 4), **{k: round(v, 4) for k, v in alone.items()}}, head.w_overlap)
