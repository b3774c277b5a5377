"""Dialogue-level splits and the train/test leakage check.

A *dialogue* is ``(conversation.source, conversation.meta["dialogue_id"])`` (the conversation id
when the loader set none): every turn and claim of a dialogue lands on one side of a split.

Leakage is checked on text, independent of ids, so it also catches one dialogue reached through
two benchmarks (FaithDial, BEGIN and AIS all derive from Wizard of Wikipedia): each scored turn
has a *full* key (normalised history + reference) and a *local* key (normalised last preceding
utterance + reference); a test conversation leaks when any of its keys occurs in the training
material.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .loading import normalise_text
from .schema import Conversation

DEFAULT_FRACTIONS = {"train": 0.8, "dev": 0.1, "test": 0.1}
KEY_KINDS = ("full", "local")


def dialogue_key(conv: Conversation) -> str:
    return f"{conv.source}:{conv.meta.get('dialogue_id', conv.id)}"


def reference_keys(conv: Conversation) -> set[str]:
    """Normalised references of a conversation's scored turns ("N/A" and empty ones left out)."""
    refs = (conv.turns[i].reference for i in conv.scored_turns)
    return {k for k in (normalise_text(r) for r in refs if r and r.strip() != "N/A") if k}


def _groups(conversations: Sequence[Conversation], by_reference: bool) -> dict[str, list[int]]:
    """Conversation indices per dialogue; ``by_reference``: dialogues that share a reference are one group
    (union-find; a group is named by its smallest dialogue key)."""
    keys = [dialogue_key(c) for c in conversations]
    parent = {k: k for k in keys}

    def find(k: str) -> str:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    if by_reference:
        owner: dict[str, str] = {}
        for k, c in zip(keys, conversations):
            for ref in reference_keys(c):
                a, b = find(owner.setdefault(ref, k)), find(k)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(find(k), []).append(i)
    return groups


def split_by_dialogue(conversations: Sequence[Conversation],
                      fractions: Mapping[str, float] = DEFAULT_FRACTIONS,
                      seed: int = 0, by_reference: bool = False) -> dict[str, list[Conversation]]:
    """Shuffle dialogues with ``seed`` and cut them into parts of about ``fractions`` of the
    conversations; conversations keep their input order within a part. ``by_reference``: dialogues
    sharing a reference (a knowledge snippet, a document) also stay on one side."""
    total = sum(fractions.values())
    if not fractions or total <= 0 or any(f < 0 for f in fractions.values()):
        raise ValueError(f"fractions must be non-negative with a positive sum, got {dict(fractions)}")
    groups = _groups(conversations, by_reference)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    names = list(fractions)
    bounds, acc = [], 0.0
    for name in names:
        acc += fractions[name] / total
        bounds.append(acc * len(conversations))
    assign: dict[int, str] = {}
    done, part = 0, 0
    for key in keys:
        # Move on once this part has its share; the last part takes whatever is left.
        while part < len(names) - 1 and done >= bounds[part] - 1e-9:
            part += 1
        for i in groups[key]:
            assign[i] = names[part]
        done += len(groups[key])
    out: dict[str, list[Conversation]] = {name: [] for name in names}
    for i, c in enumerate(conversations):
        out[assign[i]].append(c)
    return out


def _h(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode()).hexdigest()


def leak_keys(conv: Conversation, kinds: Iterable[str] = KEY_KINDS) -> set[str]:
    """Text fingerprints of every scored turn's context (see the module docstring)."""
    kinds = set(kinds)
    keys = set()
    for idx in conv.scored_turns:
        ref = normalise_text(conv.turns[idx].reference or "")
        prior = [normalise_text(t.text) for t in conv.turns[:idx]]
        if "full" in kinds:
            keys.add("full:" + _h(*prior, ref))
        if "local" in kinds:
            keys.add("local:" + _h(prior[-1] if prior else "", ref))
    return keys


@dataclass(frozen=True)
class Leak:
    test_id: str
    train_ids: tuple[str, ...]
    kind: str


class LeakageError(ValueError):
    """Test material shares dialogues with training material."""

    def __init__(self, leaks: Sequence[Leak]) -> None:
        self.leaks = list(leaks)
        shown = "; ".join(f"{lk.test_id} <- {', '.join(lk.train_ids[:3])}"
                          f"{' ...' if len(lk.train_ids) > 3 else ''} ({lk.kind})" for lk in self.leaks[:20])
        more = f"; and {len(self.leaks) - 20} more" if len(self.leaks) > 20 else ""
        super().__init__(f"{len(self.leaks)} test conversation(s) share dialogues with the training material "
                         f"(test id <- train ids): {shown}{more}")

    @property
    def test_ids(self) -> list[str]:
        return [lk.test_id for lk in self.leaks]


def find_leaks(train: Iterable[Conversation], test: Iterable[Conversation],
               kinds: Iterable[str] = KEY_KINDS) -> list[Leak]:
    """Test conversations that share a dialogue (same source and dialogue id) or a context
    fingerprint with any training conversation."""
    kinds = tuple(kinds)
    by_key: dict[str, list[str]] = {}
    by_dialogue: dict[str, list[str]] = {}
    for c in train:
        for k in leak_keys(c, kinds):
            by_key.setdefault(k, []).append(c.id)
        by_dialogue.setdefault(dialogue_key(c), []).append(c.id)
    leaks = []
    for c in test:
        hits: dict[str, str] = {}
        for cid in by_dialogue.get(dialogue_key(c), []):
            hits.setdefault(cid, "dialogue id")
        for k in sorted(leak_keys(c, kinds)):
            for cid in by_key.get(k, []):
                hits.setdefault(cid, f"{k.split(':')[0]} text")
        if hits:
            kinds_hit = sorted(set(hits.values()))
            leaks.append(Leak(c.id, tuple(sorted(hits)), "+".join(kinds_hit)))
    return leaks


def assert_no_leak(train: Iterable[Conversation], test: Iterable[Conversation],
                   kinds: Iterable[str] = KEY_KINDS) -> None:
    """Raise :class:`LeakageError` listing the offending ids if any test dialogue is in ``train``."""
    leaks = find_leaks(train, test, kinds)
    if leaks:
        raise LeakageError(leaks)


def drop_leaks(candidates: Sequence[Conversation], held_out: Iterable[Conversation],
               kinds: Iterable[str] = KEY_KINDS) -> tuple[list[Conversation], list[Leak]]:
    """``candidates`` (e.g. silver training data) without the conversations that share a
    dialogue with ``held_out`` (test material), and the leaks found."""
    leaks = find_leaks(held_out, candidates, kinds)
    bad = {lk.test_id for lk in leaks}
    return [c for c in candidates if c.id not in bad], leaks
