"""The evidence head of a stage 2 adapter: how much the reference raises the claim's likelihood, weighed with the
adapter's own label margin.

A small student trained on label tokens learns what a hallucinated response *sounds* like faster than whether its
reference states it (bench/results/demo_protocol: own-vs-foreign AUC 0.53). The language model underneath does
read the reference: the claim's tokens become more likely once the reference that states them precedes them.
That pointwise mutual information, ``pmi = mean log p(claim | prompt with reference) - mean log p(claim | same
prompt, empty reference)`` (PMI-Faith, Nandwani et al. 2023, for knowledge-grounded dialogue), comes almost free
in process: the claim is already the end of the stage 2 prompt, so one forward gives both the label and the
claim's log-probabilities, and the empty-reference twin is a short prompt.

The head is logistic: ``P(VERIFIED) = sigmoid(w_margin * margin + w_pmi * pmi + bias)``, ``margin`` the adapter's
log-probability of VERIFIED minus UNVERIFIABLE. Its three numbers are fitted after training on the stage's silver
validation split (examples the adapter never trained on; the teacher's labels) and saved beside the adapter as
``evidence_head.json``; the in-process backend applies it wherever the file is. Served students (llama.cpp, vLLM)
score without it (their label methods see no claim log-probabilities).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HEAD_FILE = "evidence_head.json"
_REFERENCE = re.compile(r"(REFERENCE TEXT:\n)(.*?)(\n\nCLAIM:\n)(?P<claim>.*)\Z", re.DOTALL)


@dataclass(frozen=True)
class EvidenceHead:
    w_margin: float
    w_pmi: float
    bias: float
    fitted: dict[str, Any] = field(default_factory=dict)   # on what, how many, their accuracy

    def p_verified(self, margin: float, pmi: float) -> float:
        z = self.w_margin * margin + self.w_pmi * pmi + self.bias
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / HEAD_FILE
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, folder: str | Path) -> EvidenceHead | None:
        """The head saved in an adapter folder, or None; a damaged file names itself."""
        path = Path(folder) / HEAD_FILE
        if not path.exists():
            return None
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            return cls(float(d["w_margin"]), float(d["w_pmi"]), float(d["bias"]), dict(d.get("fitted") or {}))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not an evidence head ({e}); delete it or fit it again") from e


def claim_and_twin(content: str) -> tuple[str, str] | None:
    """(the claim, the same stage 2 user message with an empty REFERENCE TEXT), or None for another layout."""
    m = _REFERENCE.search(content)
    if m is None or not m["claim"].strip():
        return None
    return m["claim"], content[:m.start(2)] + content[m.end(2):]


def fit(margins: Sequence[float], pmis: Sequence[float], verified: Sequence[bool], **about: Any) -> EvidenceHead:
    """The logistic head on (margin, pmi) -> VERIFIED (scikit-learn, default L2), with what it was fitted on and
    its accuracy there (and the adapter's alone, margin > 0, for comparison)."""
    from sklearn.linear_model import LogisticRegression

    x = [[m, p] for m, p in zip(margins, pmis)]
    y = [int(v) for v in verified]
    if len(set(y)) < 2:
        raise ValueError(f"an evidence head needs both labels to fit; got {len(y)} examples of one")
    lr = LogisticRegression().fit(x, y)
    (w_m, w_p), b = lr.coef_[0].tolist(), float(lr.intercept_[0])
    head = EvidenceHead(w_m, w_p, b)
    acc = sum((head.p_verified(m, p) > 0.5) == bool(v) for m, p, v in zip(margins, pmis, y)) / len(y)
    alone = sum((m > 0) == bool(v) for m, v in zip(margins, y)) / len(y)
    return EvidenceHead(w_m, w_p, b, {**about, "examples": len(y), "verified": sum(y), "accuracy": round(acc, 4),
                                      "adapter_alone_accuracy": round(alone, 4)})
