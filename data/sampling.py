"""The paper's sampling protocol: N random conversations (500 per benchmark) drawn with a seed."""

from __future__ import annotations

import random
from collections.abc import Sequence

from .schema import Conversation

PAPER_N = 500


def sample_conversations(conversations: Sequence[Conversation], n: int = PAPER_N,
                         seed: int = 0) -> list[Conversation]:
    """``n`` conversations drawn uniformly without replacement with ``random.Random(seed)``,
    returned in their original order; all of them when there are no more than ``n``.

    The draw depends only on the seed and the input order, so the same file and seed always
    give the same sample. ``n <= 0`` means all.
    """
    convs = list(conversations)
    if n <= 0 or n >= len(convs):
        return convs
    picked = sorted(random.Random(seed).sample(range(len(convs)), n))
    return [convs[i] for i in picked]
