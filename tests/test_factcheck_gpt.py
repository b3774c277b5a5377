"""The Factcheck-GPT loader on four real records (tests/fixtures/factcheck_gpt, Apache-2.0).

Records: 0 Milky Way stars (refute / partially-support only / two opinion claims, one undecomposed
sentence), 1 scuba air (irrelevant only / completely-support / support and refute together / refute),
2 cashmere (two supported claims, response true), 3 ways to help (no claims, response "NA").
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from vista_distill.config import DataSource
from vista_distill.data.benchmarks import BENCHMARKS, guess_benchmark, load_benchmark
from vista_distill.data.benchmarks.factcheck_gpt import claim_category, closest_passage, human_excerpt, load
from vista_distill.data.cli import add_data_subcommands
from vista_distill.data.io import read_conversations, write_conversations
from vista_distill.data.loading import RowError
from vista_distill.data.material import load_source
from vista_distill.data.schema import (
    ASSISTANT,
    CONTRADICTED,
    FAITHFUL,
    HALLUCINATED,
    LACKING_EVIDENCE,
    OUT_OF_SCOPE,
    USER,
    VERIFIED,
)

FIX = Path(__file__).resolve().parent / "fixtures" / "factcheck_gpt"
FILE = FIX / "factcheck-GPT-benchmark.jsonl"
RAW = [json.loads(line) for line in FILE.read_text(encoding="utf-8").splitlines()]


def answers(result):
    return [c.turns[1] for c in result]


def categories(result):
    return [[c.label for c in t.gold_claims] for t in answers(result)]


def passages(reference: str) -> dict[int, str]:
    return {int(n): text for n, text in re.findall(r"^\[(\d+)\] (.*?)(?=\n\n\[\d+\] |\Z)", reference,
                                                    re.MULTILINE | re.DOTALL)}


def write_records(tmp_path: Path, records: list, blank_first: bool = False) -> Path:
    path = tmp_path / "factcheck-GPT-benchmark.jsonl"
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text(("\n" if blank_first else "") + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_each_record_is_a_question_and_a_scored_answer_with_the_human_claims():
    res = load(FILE)
    r = res.report
    assert (r.rows_read, r.records_out, len(r.rejected), r.conversations) == (4, 4, 0, 4) and r.reconciles
    for conv, raw in zip(res, RAW):
        assert [t.role for t in conv.turns] == [USER, ASSISTANT]
        assert conv.turns[0].text == raw["prompt"] and conv.turns[1].text == raw["response"]
        assert conv.scored_turns == [1] and conv.turns[0].reference is None
        published = [c for s in raw["sentences"].values() for c in s["claims"]]
        assert [c.text for c in conv.turns[1].gold_claims] == [c.strip() for c in published]
        assert conv.source == "Factcheck-GPT" and conv.meta["benchmark"] == "factcheck-gpt"
    assert [len(t.gold_claims) for t in answers(res)] == [4, 5, 2, 0]
    assert [c.meta["row"] for c in res] == [1, 2, 3, 4]
    assert len({c.id for c in res}) == 4 and res[0].id == f"Factcheck-GPT-{res[0].meta['dialogue_id']}"


def test_claim_categories_follow_the_stances_of_each_claims_passages():
    res = load(FILE)
    assert categories(res) == [
        [CONTRADICTED, OUT_OF_SCOPE, LACKING_EVIDENCE, OUT_OF_SCOPE],   # refute, opinion, partial only, opinion
        [LACKING_EVIDENCE, VERIFIED, VERIFIED, CONTRADICTED, CONTRADICTED],   # irrelevant only, support, both, refute
        [VERIFIED, VERIFIED],
        [],
    ]
    rules = [m["rule"] for m in answers(res)[1].meta["claims"]]
    assert rules == ["irrelevant only", "completely-support", "conflicting stances: factuality true",
                     "refute", "refute"]
    assert categories(load(FILE, partial="verified"))[0][2] == VERIFIED
    # the annotators' factuality labels (true / false / unknown) instead of the stances
    human = load(FILE, evidence="human")
    assert categories(human)[1] == [VERIFIED, VERIFIED, VERIFIED, CONTRADICTED, CONTRADICTED]
    assert categories(human)[0] == [CONTRADICTED, OUT_OF_SCOPE, VERIFIED, OUT_OF_SCOPE]


@pytest.mark.parametrize("stances, factuality, expected", [
    (["completely-support", "irrelevant"], "false", VERIFIED),
    (["refute", "partially-support"], "true", CONTRADICTED),
    (["partially-support", "irrelevant"], "true", LACKING_EVIDENCE),
    (["irrelevant"] * 5, "true", LACKING_EVIDENCE),
    (["refute", "completely-support"], "false", CONTRADICTED),
    (["refute", "completely-support"], "unknown", LACKING_EVIDENCE),
])
def test_stance_mapping(stances, factuality, expected):
    assert claim_category("factual", stances, factuality)[0] == expected
    assert claim_category("not_a_claim", stances, factuality)[0] == OUT_OF_SCOPE


def test_reference_numbers_each_distinct_passage_once_and_claims_point_into_it():
    res = load(FILE)
    for t, raw in zip(answers(res), RAW):
        found = passages(t.reference)
        published = {" ".join(p.split()) for s in raw["sentences"].values() for ev in s["auto_evidence"] for p in ev}
        assert sorted(found) == list(range(1, len(published) + 1))
        assert {" ".join(p.split()) for p in found.values()} == published   # de-duplicated, nothing lost
        sentences = list(raw["sentences"].values())
        for m in t.meta["claims"]:
            s = sentences[m["sentence"]]
            j = [c.strip() for c in s["claims"]].index(t.gold_claims[t.meta["claims"].index(m)].text)
            assert [found[n] for n in m["passages"]] == [p.strip() for p in s["auto_evidence"][j]]
            assert m["stances"] == s["stance_claim_autoEvid"][j] and m["urls"] == s["auto_evidence_url"][j]
    assert [len(passages(t.reference)) for t in answers(res)] == [15, 21, 10, 0]
    assert answers(res)[3].reference == ""   # no claims, no evidence: still a scored turn
    first = answers(res)[0]   # its first claim's first passage refutes it and opens the reference
    assert first.meta["claims"][0]["stances"][0] == "refute" and first.meta["claims"][0]["passages"][0] == 1
    assert first.reference.startswith("[1] ") and "\n\n[15] " in first.reference


def test_human_evidence_is_added_to_the_reference_only_on_request():
    note = RAW[1]["sentences"]["sentence1"]["human_evidence"][0]
    retrieved, human = answers(load(FILE))[1], answers(load(FILE, evidence="human"))[1]
    assert note.strip() not in retrieved.reference and retrieved.meta["claims"][0]["human_evidence"] == note
    n = human.meta["claims"][0]["human_passage"]
    assert n == 6 and passages(human.reference)[n] == note.strip()   # right after the claim's own five
    assert len(passages(human.reference)) == len(passages(retrieved.reference)) + 1 == 22
    assert retrieved.meta["claims"][1]["human_evidence"] is None   # "NA"
    assert human_excerpt("https://en.wikipedia.org/wiki/X\n\nX was born in 1898.") == "X was born in 1898."
    assert human_excerpt("https://en.wikipedia.org/wiki/X") is None and human_excerpt(" NA ") is None


def test_turn_labels_from_claims_or_response_factuality():
    assert [t.gold_label for t in answers(load(FILE))] == [HALLUCINATED, HALLUCINATED, FAITHFUL, FAITHFUL]
    resp = load(FILE, turn_label="response")
    assert [t.gold_label for t in answers(resp)] == [HALLUCINATED, HALLUCINATED, FAITHFUL, HALLUCINATED]  # NA
    assert [t.meta["original_label"] for t in answers(resp)] == [False, False, True, "NA"]
    assert answers(load(FILE, turn_label="response", ambiguous="faithful"))[3].gold_label == FAITHFUL
    drop = load(FILE, turn_label="response", ambiguous="drop")
    assert len(drop) == 3 and drop.report.reconciles and drop.report.rejected_by_kind() == {"dropped": 1}
    assert {t.gold_label for t in answers(load(FILE, turn_label="none"))} == {None}


def test_undecomposed_sentences_mark_the_turn_incomplete_or_become_out_of_scope_claims():
    res = load(FILE)
    assert [t.meta["claims_complete"] for t in answers(res)] == [False, True, True, False]
    assert [t.meta["undecomposed_sentences"] for t in answers(res)] == [[0], [], [], [0]]
    full = load(FILE, unclaimed="out_of_scope")
    assert all(t.meta["claims_complete"] for t in answers(full))
    first = answers(full)[0].gold_claims[0]
    assert first.label == OUT_OF_SCOPE and first.text.startswith("It is difficult to say exactly how many stars")
    assert categories(full)[3] == [OUT_OF_SCOPE] and [len(c) for c in categories(full)] == [5, 5, 2, 1]
    assert [t.gold_label for t in answers(full)] == [t.gold_label for t in answers(res)]   # both safe


def test_malformed_records_are_located_by_file_row_line_and_field(tmp_path):
    bad = json.loads(json.dumps(RAW[1]))
    bad["sentences"]["sentence2"]["stance_claim_autoEvid"][1][3] = "supports"
    path = write_records(tmp_path, [RAW[0], bad, RAW[2]], blank_first=True)
    with pytest.raises(RowError, match=re.escape(f"{path}, row 2 (line 3), field "
                                                 "'sentences.sentence2.stance_claim_autoEvid[1][3]': "
                                                 "expected one of")):
        load(path)
    short = json.loads(json.dumps(RAW[2]))
    del short["sentences"]["sentence1"]["claims_factuality_label"][0]
    subtask = {"claim": "Justice Douglas was born in 1898.", "label": "true"}
    path = write_records(tmp_path, [RAW[0], bad, "{not json", short, subtask, {**RAW[2], "response": ""}])
    res = load(path, on_error="reject")
    assert (res.report.rows_read, len(res), res.report.reconciles) == (6, 1, True)
    reasons = {r.row: r.reason for r in res.report.rejected}
    assert reasons[3].startswith("not valid JSON")
    assert reasons[4] == ("field 'sentences.sentence1.claims_factuality_label': expected a list with one item "
                          "per claim (1), got 0 items")
    assert "subtask record" in reasons[5] and reasons[6].startswith("field 'response'")


def test_registered_guessed_and_options_checked(tmp_path):
    assert "factcheck-gpt" in BENCHMARKS and guess_benchmark(FILE) == "factcheck-gpt"
    assert {"evidence", "partial", "turn_label", "unclaimed"} <= set(BENCHMARKS["factcheck-gpt"].options())
    assert len(load_benchmark("factcheck-gpt", FIX)) == 4   # the file under a directory
    for option in ("evidence", "partial", "turn_label", "unclaimed"):
        with pytest.raises(ValueError, match=f"{option} must be one of"):
            load(FILE, **{option: "nope"})
    with pytest.raises(FileNotFoundError, match="github.com/yuxiaw/Factcheck-GPT"):
        load(tmp_path)
    convs, report = load_source(DataSource("factcheck-gpt", str(FILE), options={"unclaimed": "out_of_scope"}))
    assert len(convs) == 4 and report["load_report"]["records_out"] == 4


def test_prepare_and_stats_through_the_cli(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="vista-distill")
    add_data_subcommands(parser.add_subparsers(dest="command", required=True))
    out = tmp_path / "fc.jsonl"
    for argv in (["data", "prepare", "--benchmark", "factcheck-gpt", "--source", str(FIX), "--n", "0",
                  "--out", str(out)], ["data", "stats", str(out)]):
        args = parser.parse_args(argv)
        assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "wrote 4 of 4 conversations" in text and "claims          11 on 4 turns" in text
    back = read_conversations(out)
    assert [c.to_dict() for c in back] == [json.loads(json.dumps(c.to_dict())) for c in load(FILE)]
    write_conversations(back, tmp_path / "again.jsonl")
    assert (tmp_path / "again.jsonl").read_text() == out.read_text()


def test_closest_evidence_keeps_one_passage_per_claim_chosen_by_text_and_labels_by_its_stance():
    res = load(FILE, evidence="closest")
    for conv, raw in zip(res, RAW):
        sentences = [s for s in raw["sentences"].values() if s["claims"]]
        metas = conv.turns[1].meta["claims"]
        raws = [(s, j) for s in sentences for j in range(len(s["claims"]))]
        assert len(metas) == len(raws)
        refs = passages(conv.turns[1].reference)
        for meta, claim, (s, j) in zip(metas, conv.turns[1].gold_claims, raws):
            found = s["auto_evidence"][j]
            k = closest_passage(s["claims"][j], found)
            assert len(meta["passages"]) == 1 and refs[meta["passages"][0]].strip() == found[k].strip()
            assert meta["stances"] == s["stance_claim_autoEvid"][j][k:k + 1]
            if s["claim_checkworthiness"][j] in ("opinion", "not_a_claim"):
                expected = OUT_OF_SCOPE
            else:
                expected = {"completely-support": VERIFIED, "refute": CONTRADICTED}.get(meta["stances"][0],
                                                                                       LACKING_EVIDENCE)
            assert claim.label == expected, meta
    # the choice reads the text alone: a passage repeating the claim's words wins whatever its stance
    assert (
        closest_passage("Paris is the capital of France", ["Bananas are yellow.", "Paris is the capital of France."])
        == 1
    )
    assert closest_passage("x", ["only one"]) == 0


def test_sentence_unit_gives_one_scored_sentence_per_conversation_grouped_by_answer():
    whole = load(FILE)
    res = load(FILE, unit="sentence")
    by_answer = {}
    for conv in res:
        by_answer.setdefault(conv.meta["dialogue_id"], []).append(conv)
        q, a = conv.turns
        assert q.role == USER and a.role == ASSISTANT and a.meta["claims_complete"] is True
        assert a.gold_label == (FAITHFUL if all(c.label in (VERIFIED, OUT_OF_SCOPE) for c in a.gold_claims)
                                else HALLUCINATED)
        refs = passages(a.reference)
        assert sorted(n for m in a.meta["claims"] for n in m["passages"]) and set(refs) == {
            n for m in a.meta["claims"] for n in m["passages"]}
    for w in whole:
        parts = by_answer.get(w.meta["dialogue_id"], [])
        assert [c.text for p in parts for c in p.turns[1].gold_claims] == [c.text for c in w.turns[1].gold_claims]
        for p in parts:
            raw = RAW[w.meta["row"] - 1]
            sent = list(raw["sentences"].values())[p.turns[1].meta["sentence"]]
            assert p.turns[1].text == " ".join(sent["text"].split()) and p.turns[0].text == raw["prompt"]
    assert len({c.id for c in res}) == len(res)
    with pytest.raises(ValueError, match="unit='sentence'"):
        load(FILE, unit="sentence", turn_label="response")
    with pytest.raises(ValueError, match="unit must be one of"):
        load(FILE, unit="paragraph")


def test_questions_rephrase_a_share_of_sentences_with_the_same_claims_in_the_same_dialogue():
    from vista_distill.data.benchmarks.factcheck_gpt.units import as_question
    from vista_distill.data.splits import dialogue_key

    plain = load(FILE, unit="sentence", evidence="closest")
    asked = load(FILE, unit="sentence", evidence="closest", questions=1.0)
    originals = {c.id: c for c in plain}
    copies = [c for c in asked if c.meta.get("rephrased") == "question"]
    assert [c for c in asked if "rephrased" not in c.meta] == list(plain)   # the sentences themselves unchanged
    assert copies and len(copies) < len(plain)   # not every sentence can be asked (first person, questions)
    for q in copies:
        o = originals[q.id.removesuffix("q")]
        text = q.turns[1].text
        assert text.startswith(("Did you know that ", "Have you heard that ")) and text.endswith("?")
        assert text.removesuffix("?").split(" that ", 1)[1].lower() == o.turns[1].text.removesuffix(".").lower()
        assert q.turns[1].gold_claims == o.turns[1].gold_claims and q.turns[1].reference == o.turns[1].reference
        assert dialogue_key(q) == dialogue_key(o) and q.turns[0].text == o.turns[0].text
    half = load(FILE, unit="sentence", evidence="closest", questions=0.5)
    n_half = sum(c.meta.get("rephrased") == "question" for c in half)
    assert 0 < n_half < len(copies)
    assert [c.id for c in half] == [c.id for c in load(FILE, unit="sentence", evidence="closest", questions=0.5)]
    # proper nouns keep their capital; sentence-initial words lose it; first person is never presupposed
    assert as_question("Paris is the capital of France.", 1.0).endswith("that Paris is the capital of France?")
    assert as_question("The tower is 330 metres tall.", 1.0).endswith("that the tower is 330 metres tall?")
    assert as_question("I think the tower is tall.", 1.0) is None
    assert as_question("Is the tower tall?", 1.0) is None and as_question("Paris is big.", 0.0) is None
    with pytest.raises(ValueError, match="questions"):
        load(FILE, unit="sentence", questions=1.5)
    with pytest.raises(ValueError, match="unit='sentence'"):
        load(FILE, questions=0.5)
