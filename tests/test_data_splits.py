"""The paper's sampling, dialogue-level splits and the train/test leakage check."""

from __future__ import annotations

from pathlib import Path

import pytest

from vista_distill.data.benchmarks import load_benchmark
from vista_distill.data.sampling import sample_conversations
from vista_distill.data.schema import ASSISTANT, USER, Conversation, Turn
from vista_distill.data.splits import (
    LeakageError,
    assert_no_leak,
    dialogue_key,
    drop_leaks,
    find_leaks,
    split_by_dialogue,
)

FIX = Path(__file__).resolve().parent / "fixtures"


def conv(cid: str, user: str, reply: str, ref: str, dialogue: str | None = None, source: str = "X") -> Conversation:
    meta = {"dialogue_id": dialogue} if dialogue else {}
    return Conversation(cid, source, [Turn(USER, user), Turn(ASSISTANT, reply, reference=ref, gold_label="faithful")],
                        meta=meta)


def many(n: int, per_dialogue: int = 1) -> list[Conversation]:
    return [conv(f"c{i}", f"question {i // per_dialogue}", f"answer {i}", f"doc {i // per_dialogue}",
                 dialogue=f"d{i // per_dialogue}") for i in range(n)]


def test_sample_is_seeded_sized_and_in_input_order():
    convs = many(1200)
    a = sample_conversations(convs, 500, seed=0)
    assert len(a) == 500 and len({c.id for c in a}) == 500
    assert [c.id for c in a] == [c.id for c in sample_conversations(convs, 500, seed=0)]
    assert [c.id for c in a] != [c.id for c in sample_conversations(convs, 500, seed=1)]
    order = {c.id: i for i, c in enumerate(convs)}
    assert [order[c.id] for c in a] == sorted(order[c.id] for c in a)
    assert sample_conversations(convs[:30], 500) == convs[:30]  # fewer than N: all of them
    assert len(sample_conversations(convs, 0)) == 1200  # 0 = all
    assert sample_conversations(convs) == sample_conversations(convs, 500, 0)  # the paper's default N


def test_split_keeps_every_dialogue_on_one_side_and_is_seeded():
    convs = many(300, per_dialogue=3)
    parts = split_by_dialogue(convs, {"train": 0.8, "dev": 0.1, "test": 0.1}, seed=3)
    assert sum(len(p) for p in parts.values()) == 300
    sides = {}
    for name, part in parts.items():
        for c in part:
            sides.setdefault(dialogue_key(c), set()).add(name)
    assert all(len(s) == 1 for s in sides.values())
    assert 225 <= len(parts["train"]) <= 255 and len(parts["test"]) >= 21
    again = split_by_dialogue(convs, {"train": 0.8, "dev": 0.1, "test": 0.1}, seed=3)
    assert {k: [c.id for c in v] for k, v in again.items()} == {k: [c.id for c in v] for k, v in parts.items()}
    other = split_by_dialogue(convs, {"train": 0.8, "dev": 0.1, "test": 0.1}, seed=4)
    assert [c.id for c in other["test"]] != [c.id for c in parts["test"]]
    assert_no_leak(parts["train"], parts["test"])
    with pytest.raises(ValueError):
        split_by_dialogue(convs, {"train": 0.0})


def test_split_groups_loader_dialogues():
    # FADE rows of one dialogue_id may become several conversations: they stay together
    res = load_benchmark("fade", FIX / "fade" / "human_verified.csv")
    for seed in range(5):
        parts = split_by_dialogue(res.conversations, {"a": 0.5, "b": 0.5}, seed=seed)
        a = {c.meta["dialogue_id"] for c in parts["a"]}
        b = {c.meta["dialogue_id"] for c in parts["b"]}
        assert not a & b


def test_leak_found_by_text_even_with_different_ids_and_tokenisation():
    train = [conv("tr1", "Do you like jazz?", "Yes I do.", "Jazz originated in New Orleans.")]
    test = [conv("te1", "do you like jazz ?", "No.", "jazz originated in new orleans .", source="Y"),
            conv("te2", "Do you like jazz?", "Maybe.", "A different document."),
            conv("te3", "Something else", "Yes.", "Another document.")]
    leaks = find_leaks(train, test)
    assert [lk.test_id for lk in leaks] == ["te1"]
    assert leaks[0].train_ids == ("tr1",)
    with pytest.raises(LeakageError) as e:
        assert_no_leak(train, test)
    assert e.value.test_ids == ["te1"] and "te1 <- tr1" in str(e.value)


def test_local_key_catches_same_moment_with_longer_history():
    # FaithDial keeps the whole history, BEGIN only the previous message: the same moment leaks
    long = Conversation(
        "fd",
        "FaithDial",
        [
            Turn(USER, "hi"),
            Turn(ASSISTANT, "hello"),
            Turn(USER, "Tell me about owls"),
            Turn(ASSISTANT, "Owls hunt at night.", reference="Owls are nocturnal."),
        ],
    )
    short = conv("bg", "tell me about owls", "They sleep by day.", "Owls are nocturnal.", source="BEGIN")
    assert [lk.test_id for lk in find_leaks([long], [short])] == ["bg"]
    assert find_leaks([long], [short], kinds=("full",)) == []


def test_same_dialogue_id_leaks_without_shared_text():
    a = conv("a", "q1", "r1", "doc1", dialogue="7")
    b = conv("b", "q2", "r2", "doc2", dialogue="7")
    assert find_leaks([a], [b])[0].kind == "dialogue id"
    assert find_leaks([a], [conv("c", "q2", "r2", "doc2", dialogue="7", source="Other")]) == []


def test_drop_leaks_filters_candidates():
    held = [conv("t1", "q", "r", "doc")]
    cands = [conv("s1", "q", "other reply", "doc"), conv("s2", "new", "r", "doc2")]
    kept, leaks = drop_leaks(cands, held)
    assert [c.id for c in kept] == ["s2"] and [lk.test_id for lk in leaks] == ["s1"]


def test_split_by_reference_keeps_dialogues_sharing_a_reference_together():
    # 60 dialogues over 12 documents (5 each, different questions and answers): by dialogue they scatter
    convs = [conv(f"c{i}", f"question {i}", f"answer {i}", f"Document {i % 12}.", dialogue=f"d{i}") for i in range(60)]
    convs.append(conv("na", "hello", "hi", "N/A", dialogue="dna"))      # "N/A" joins nothing
    convs.append(conv("na2", "hey", "hi", "N/A", dialogue="dna2"))
    scattered = split_by_dialogue(convs, {"a": 0.5, "b": 0.5}, seed=0)
    def refs(cs):
        return {c.turns[1].reference.lower() for c in cs if c.turns[1].reference != "N/A"}
    assert refs(scattered["a"]) & refs(scattered["b"])
    for seed in range(4):
        parts = split_by_dialogue(convs, {"a": 0.5, "b": 0.5}, seed=seed, by_reference=True)
        assert not refs(parts["a"]) & refs(parts["b"])
        assert sum(map(len, parts.values())) == 62 and 20 <= len(parts["a"]) <= 42
    again = split_by_dialogue(convs, {"a": 0.5, "b": 0.5}, seed=1, by_reference=True)
    assert [c.id for c in again["a"]] == [c.id for c in split_by_dialogue(convs, {"a": 0.5, "b": 0.5}, seed=1,
                                                                          by_reference=True)["a"]]
