"""Stage 1's list generation kept readable by a small model: a row stops once a line repeats or loops
(``RepeatedLineStop``), and a list marker may not be followed by a digit (``ListMarkerFormat``); the
``TransformersBackend`` passes both to ``generate``."""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import Any

from ..pipeline.parsing import claim_key

_LIST_NUMBER = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*")


@dataclass(frozen=True)
class _VocabIds:
    """Token ids by what their text holds, for the list-generation checks below."""

    newline: frozenset[int]        # a line break anywhere
    sentence_end: frozenset[int]   # . ! or ? anywhere
    period_end: frozenset[int]     # ends with a period
    marker_ban: list[int]          # may not follow a list marker: starts with a digit or period, or breaks the line


_VOCAB_IDS: weakref.WeakKeyDictionary[Any, _VocabIds] = weakref.WeakKeyDictionary()


def _vocab_ids(backend: Any) -> _VocabIds:
    """Each token's text read once per tokenizer (the whole vocabulary), then kept while the tokenizer lives."""
    tok = backend.tokenizer
    if tok not in _VOCAB_IDS:
        pieces = [tok.convert_tokens_to_string([t]) if t else ""
                  for t in tok.convert_ids_to_tokens(list(range(len(tok))))]
        _VOCAB_IDS[tok] = _VocabIds(
            newline=frozenset(i for i, p in enumerate(pieces) if "\n" in p),
            sentence_end=frozenset(i for i, p in enumerate(pieces) if any(c in p for c in ".!?")),
            period_end=frozenset(i for i, p in enumerate(pieces) if p.endswith(".")),
            marker_ban=[i for i, p in enumerate(pieces) if p[:1].isdigit() or p.startswith(".") or "\n" in p])
    return _VOCAB_IDS[tok]


class RepeatedLineStop:
    """Stops a row once it completes a line that repeats an earlier one, or once its unfinished line has
    said the same sentence ``LOOP_REPEATS`` times or ends in one phrase said over and over (small models loop on
    lists, and within a line: "the scene in the scene in ...", "(1.1.1.1..."). A looping row would otherwise run
    to its budget and then be retried with twice the budget, for a line the parser drops anyway.

    Checked when the row's newest token ends a line or a sentence, and every ``TAIL_CHECK`` tokens for a phrase
    loop, so it costs little next to a decode step.
    """

    def __init__(self, backend: Any, prompt_len: int) -> None:
        self.tokenizer, self.prompt_len = backend.tokenizer, prompt_len
        v = _vocab_ids(backend)
        self.newline_ids, self.sentence_end_ids = v.newline, v.sentence_end

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        return torch.tensor([self.row_done(row) for row in input_ids[:, self.prompt_len:].tolist()],
                            dtype=torch.bool, device=input_ids.device)

    def row_done(self, generated: list[int]) -> bool:
        """Whether a row that generated these token ids is to stop."""
        last = generated[-1] if generated else None
        newline, sentence = last in self.newline_ids, last in self.sentence_end_ids
        if not (newline or sentence):   # a phrase loop never ends a sentence: looked for every TAIL_CHECK tokens
            if len(generated) % TAIL_CHECK:
                return False
            tail = self.tokenizer.decode(
                generated[-TAIL_TOKENS:], skip_special_tokens=True
            )  # the row's last ~200+ chars
            return _looping_tail(tail.rsplit("\n", 1)[-1])
        text = self.tokenizer.decode(generated, skip_special_tokens=True)
        return (newline and _has_repeated_line(text)) or (sentence and _looping_line(text))


class ListMarkerFormat:
    """Numbered lists: after a line's list marker (``1.``, ``12.``) the next token may not be a digit, a period
    or a line break. A small student that is unsure how a claim starts gives the digit the most probability of
    any single token, greedy decoding takes it, and the line becomes ``1.1.1.1...`` until its budget, a line
    the parser cannot read (seen on 73% of 200 validation turns with the demo's stage 1 trained 24 steps).
    Checked only on steps whose newest token ends with a period."""

    def __init__(self, backend: Any, prompt_len: int) -> None:
        self.tokenizer, self.prompt_len = backend.tokenizer, prompt_len
        v = _vocab_ids(backend)
        self.period_end_ids, self.ban_ids = v.period_end, v.marker_ban

    def __call__(self, input_ids, scores):
        for row, ids in enumerate(input_ids[:, self.prompt_len:].tolist()):
            self.apply(ids, scores[row])
        return scores

    def apply(self, generated: list[int], scores) -> None:
        """Ban, in one row's next-token ``scores``, what may not follow these generated token ids."""
        if generated and generated[-1] in self.period_end_ids:
            text = self.tokenizer.decode(generated, skip_special_tokens=True)
            if _MARKER_ONLY.match(text.rsplit("\n", 1)[-1]):
                scores[self.ban_ids] = float("-inf")


_MARKER_ONLY = re.compile(r"^\s*\d{1,3}\.$")
LOOP_REPEATS = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def list_stop_reason(text: str) -> str | None:
    """Why stage 1's stop rule ends a list with this text: ``loop`` (its last line said one sentence
    ``LOOP_REPEATS`` times, or ends in a phrase loop), ``repeat`` (a completed line repeats an earlier one), or None.
    The in-process backend and a served list (cut afterwards) record the same finish reason from it."""
    if _looping_line(text):
        return "loop"
    if _has_repeated_line(text):
        return "repeat"
    return None


TAIL_CHECK = 8
TAIL_TOKENS = 64   # what _looping_tail reads (its last 200 characters) fits in a row's last 64 tokens
_TAIL_LOOP = re.compile(r"(.{1,40}?)\1{3,}$", re.DOTALL)


def _looping_tail(line: str) -> bool:
    """Does the unfinished line end in one piece of text (1-40 characters) said 4+ times back to back, over 48+
    characters? No claim does; "the scene in the scene in ..." and "1.1.1.1..." do."""
    tail = line[-200:]
    m = _TAIL_LOOP.search(tail)
    return m is not None and len(tail) - m.start() >= 48


def _looping_line(text: str) -> bool:
    """Has the unfinished last line said one sentence (of 8+ characters) ``LOOP_REPEATS`` times, or does it end in
    a phrase loop (:func:`_looping_tail`)?"""
    line = text.rsplit("\n", 1)[-1]
    if _looping_tail(line):
        return True
    seen: dict[str, int] = {}
    for sentence in _SENTENCE_END.split(line.strip()):
        key = sentence.strip().lower()
        if len(key) >= 8 and key[-1] in ".!?":
            seen[key] = seen.get(key, 0) + 1
            if seen[key] >= LOOP_REPEATS:
                return True
    return False


def _has_repeated_line(text: str) -> bool:
    """Does a completed line (one followed by a newline) repeat an earlier one, list numbers aside (and what
    :func:`claim_key` sets aside: a counting template repeats a line)?"""
    lines = [claim_key(_LIST_NUMBER.sub("", ln)) for ln in text.split("\n")[:-1]]
    lines = [ln for ln in lines if ln]
    return len(lines) != len(set(lines))
