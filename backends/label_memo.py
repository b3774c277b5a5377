"""Label answers kept by prompt, so a prompt scored again is answered without a forward pass: an evidence probe's
empty reference is the twin its claim was already scored with (backends/evidence_head.py), and the same claim
comes back in later calls. A key is :func:`memo_key`: the stage, the labels, whether the claim's log-probability was
asked, and a digest of the prompt's token ids (a few-shot prompt is thousands of ids: 4,096 of them kept as tuples
would hold hundreds of MB). The answers are the label log-probabilities the backend computed (the label layer weighs
them afterwards), copied in and out."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ..pipeline.protocol import LabelScores, Response


def memo_key(stage: str, ids: Sequence[int], labels: Sequence[str], claim_logprob: bool) -> tuple:
    return stage, tuple(labels), claim_logprob, hashlib.blake2b(array("q", ids).tobytes(), digest_size=20).digest()


def answer_copy(r: Response) -> Response:
    return dataclasses.replace(r, probs=dict(r.probs) if r.probs is not None else None, meta=copy.deepcopy(r.meta))


def scores_copy(s: LabelScores) -> LabelScores:
    return dataclasses.replace(s, logprobs=list(s.logprobs) if s.logprobs is not None else None,
                               meta=copy.deepcopy(s.meta))


class LabelMemo:
    """The most recent ``size`` label answers, least recently used first out (0: none kept past the call that
    computed them; a prompt asked twice in one call still runs once)."""

    def __init__(self, size: int = 0) -> None:
        self.size = size
        self._answers: OrderedDict[tuple, LabelScores] = OrderedDict()

    def __contains__(self, key: tuple) -> bool:
        return key in self._answers

    def put(self, key: tuple, answer: LabelScores) -> None:
        self._answers[key] = scores_copy(answer)

    def fill(self, out: list[Any], keys: dict[int, tuple]) -> list[int]:
        """Answer each ``out[i]`` still None whose key is kept (``keys``: index -> key); returns those indices.
        Trims to ``size`` afterwards, so keys put in the same call are all there to answer from."""
        hits = [i for i, key in keys.items() if out[i] is None and key in self._answers]
        for i in hits:
            self._answers.move_to_end(keys[i])
            out[i] = scores_copy(self._answers[keys[i]])
        while len(self._answers) > self.size:
            self._answers.popitem(last=False)
        return hits
