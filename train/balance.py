"""Class balance for the label stages (2 and 3): ``train.class_balance`` ``weights`` (per-example loss
weights, inverse class frequency, capped) or ``sampler`` (class-balanced sampling with replacement).
Eval loss is never weighted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

CLASS_BALANCE = ("none", "sampler", "weights")


def class_weights(labels: Sequence[str], cap: float = 10.0) -> dict[str, float]:
    """Inverse-frequency weights ``n / (k * n_c)``, capped at ``cap`` times the smallest, renormalised
    so the mean weight per example is 1 (the loss keeps its scale)."""
    counts = Counter(labels)
    if not counts:
        return {}
    n, k = len(labels), len(counts)
    raw = {c: n / (k * m) for c, m in counts.items()}
    floor = min(raw.values())
    capped = {c: min(w, cap * floor) for c, w in raw.items()}
    mean = sum(capped[label] for label in labels) / n
    return {c: w / mean for c, w in sorted(capped.items())}


class BalancedSampler:
    """Draws ``len(weights)`` indices per epoch with replacement, probability proportional to ``weights``.

    Seeded per epoch (``set_epoch``, called by accelerate/Trainer), so a resumed run replays the same order.
    """

    def __init__(self, weights: Sequence[float], seed: int = 0) -> None:
        self.weights = list(weights)
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.weights)

    def __iter__(self) -> Iterator[int]:
        import torch

        g = torch.Generator().manual_seed(self.seed + self.epoch)
        w = torch.tensor(self.weights, dtype=torch.double)
        yield from torch.multinomial(w, len(self.weights), replacement=True, generator=g).tolist()
