"""Benchmark loaders on small hand-written fixtures in each official format (no ../shared needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vista_distill.data.benchmarks import BENCHMARKS, guess_benchmark, load_benchmark
from vista_distill.data.io import SchemaError, read_conversations, write_conversations
from vista_distill.data.loading import RowError
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

FIX = Path(__file__).resolve().parent / "fixtures"


def scored(result):
    return [t for c in result for t in c.turns if t.is_scored]


def labels(result):
    return [t.gold_label for t in scored(result)]


def assert_reconciled(result, rows, records, rejected=0):
    r = result.report
    assert (r.rows_read, r.records_out, len(r.rejected)) == (rows, records, rejected)
    assert r.reconciles


def write_lines(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


# ------------------------------------------------------------------------------------- BEGIN


def test_begin_2022_labels_roles_and_reference():
    res = load_benchmark("begin", FIX / "begin" / "begin_dev_wow.tsv")
    assert_reconciled(res, 4, 4)
    assert labels(res) == [FAITHFUL, HALLUCINATED, HALLUCINATED, FAITHFUL]  # Generic -> default hallucinated
    conv = res[1]
    assert [t.role for t in conv.turns] == [USER, ASSISTANT]
    assert conv.turns[0].text == "have you ever been to paris?"
    # bare quotes inside an unquoted TSV field survive
    assert '"best"' in conv.turns[1].text
    assert conv.turns[1].reference.startswith("The Eiffel Tower")
    assert conv.turns[1].meta["original_label"] == "Not fully attributable"
    assert conv.turns[1].meta["model"] == "gpt2"
    # empty previous message: no user turn
    assert [t.role for t in res[3].turns] == [ASSISTANT]
    # the same (message, knowledge) answered by two models is one dialogue for splitting
    assert res[0].meta["dialogue_id"] == res[1].meta["dialogue_id"] != res[2].meta["dialogue_id"]
    assert len({c.id for c in res}) == 4


@pytest.mark.parametrize("ambiguous, expected, dropped", [
    ("faithful", [FAITHFUL, HALLUCINATED, FAITHFUL, FAITHFUL], 0),
    ("drop", [FAITHFUL, HALLUCINATED, FAITHFUL], 1),
])
def test_begin_ambiguous_option(ambiguous, expected, dropped):
    res = load_benchmark("begin", FIX / "begin" / "begin_dev_wow.tsv", ambiguous=ambiguous)
    assert labels(res) == expected
    assert_reconciled(res, 4, 4 - dropped, dropped)
    if dropped:
        (rej,) = res.report.rejected
        assert rej.row == 3 and rej.kind == "dropped" and "Generic" in rej.reason


def test_begin_2021_five_way_labels():
    res = load_benchmark("begin", FIX / "begin" / "dev_05_24_21.tsv")
    assert_reconciled(res, 5, 5)
    assert labels(res) == [FAITHFUL, HALLUCINATED, HALLUCINATED, HALLUCINATED, HALLUCINATED]
    assert res[0].meta["release"] == "2021"
    assert res[2].turns[1].meta["full_label_set"].endswith("hallucination-personal")
    res = load_benchmark("begin", FIX / "begin" / "dev_05_24_21.tsv", ambiguous="drop")
    assert labels(res) == [FAITHFUL, HALLUCINATED, HALLUCINATED]
    assert sorted(r.row for r in res.report.rejected) == [4, 5]


def test_begin_label_map_overrides_a_label():
    res = load_benchmark("begin", FIX / "begin" / "dev_05_24_21.tsv", label_map={"hallucination": "ambiguous"},
                         ambiguous="faithful")
    assert labels(res)[2] == FAITHFUL
    with pytest.raises(ValueError, match="label_map values"):
        load_benchmark("begin", FIX / "begin" / "dev_05_24_21.tsv", label_map={"generic": "maybe"})


def test_begin_response_as_claim():
    res = load_benchmark("begin", FIX / "begin" / "begin_dev_wow.tsv", claims="response")
    claims = [c.turns[c.scored_turns[0]].gold_claims for c in res]
    assert [[x.label for x in cs] for cs in claims] == [
        ["VERIFIED"], ["LACKING EVIDENCE"], ["OUT-OF-SCOPE"], ["VERIFIED"]]   # row 3 is Generic
    assert claims[1][0].text == res[1].turns[1].text.strip()
    assert res[1].turns[1].meta["claims_complete"] is False
    five_way = load_benchmark("begin", FIX / "begin" / "dev_05_24_21.tsv", claims="response")
    assert [c.turns[c.scored_turns[0]].gold_claims[0].label for c in five_way] == [
        "VERIFIED", "CONTRADICTED", "LACKING EVIDENCE", "OUT-OF-SCOPE", "OUT-OF-SCOPE"]
    assert load_benchmark("begin", FIX / "begin" / "begin_dev_wow.tsv")[0].turns[-1].gold_claims is None
    with pytest.raises(ValueError, match="claims must be one of"):
        load_benchmark("begin", FIX / "begin" / "begin_dev_wow.tsv", claims="sentences")


@pytest.mark.parametrize("text, expected", [
    # the clause is the claim, the rest of the response keeps the response's label
    ("I don't know the exact amount but I do know that it is a regional division .",
     [("I don't know the exact amount", "ABSTENTION"), ("I do know that it is a regional division .", "VERIFIED")]),
    ("Agreed ! I 'm not sure how many you watched , but it 's a great cast .",
     [("I 'm not sure how many you watched", "ABSTENTION"), ("Agreed ! it 's a great cast .", "VERIFIED")]),
    ("Usually a college team , but I do n't know",
     [("I do n't know", "ABSTENTION"), ("Usually a college team", "VERIFIED")]),
    ("Not sure", [("Not sure", "ABSTENTION")]),
    ("I can't remember what it was like.", [("I can't remember what it was like", "ABSTENTION")]),
    ("I'm not sure. Lol", [("I'm not sure", "ABSTENTION")]),      # under 3 words left: no second claim
    # not abstentions: news to the speaker, surprise, a hedge on the speaker's own view, someone else's doubt
    ("I didn't know that! It is huge.", [("I didn't know that! It is huge.", "VERIFIED")]),
    ("I had no idea, it is huge.", [("I had no idea, it is huge.", "VERIFIED")]),
    ("I'm not sure I would call it a comedy .", [("I'm not sure I would call it a comedy .", "VERIFIED")]),
    ("I don't know if I agree with him.", [("I don't know if I agree with him.", "VERIFIED")]),
    ("He is not sure about it.", [("He is not sure about it.", "VERIFIED")]),
])
def test_response_plus_abstention_splits_a_clear_abstention_off(text, expected):
    from vista_distill.data.loading import response_claims

    assert [(c.text, c.label) for c in response_claims(text, VERIFIED, "response+abstention")] == expected
    assert [(c.text, c.label) for c in response_claims(text, VERIFIED, "response")] == [(text, VERIFIED)]


def test_begin_generic_is_out_of_scope_and_an_abstention_its_own_claim(tmp_path):
    header = "model_name\tdata_source\tknowledge\tmessage\tresponse\tbegin_label"
    chess = "t5\twow\tChess is a board game for two players."
    rows = [f"{chess}\tDo you play?\tSure, sometimes!\tGeneric",
            f"{chess}\tWho invented it?\tI do n't know , but it was invented in 1990 .\tNot fully attributable",
            f"{chess}\tHow many play?\tIt is for two players .\tFully attributable"]
    path = write_lines(tmp_path / "begin_dev_wow.tsv", "\r\n".join([header, *rows]) + "\r\n")
    res = load_benchmark("begin", path, claims="response+abstention")
    claims = [[(c.text, c.label) for c in conv.turns[-1].gold_claims] for conv in res]
    assert claims == [[("Sure, sometimes!", OUT_OF_SCOPE)],
                      [("I do n't know", "ABSTENTION"), ("it was invented in 1990 .", LACKING_EVIDENCE)],
                      [("It is for two players .", VERIFIED)]]
    assert all(conv.turns[-1].meta["claims_complete"] is False for conv in res)
    assert [len(c.turns[-1].gold_claims) for c in load_benchmark("begin", path, claims="response")] == [1, 1, 1]


def test_faithdial_audit_response_claims():
    """BEGIN column -> the response's claim: Generic OUT-OF-SCOPE, Uncooperative alone no claim, entailment with
    uncooperative VERIFIED (the content is entailed), any hallucination LACKING EVIDENCE."""
    gold = load_benchmark("faithdial-audit", FIX / "faithdial" / "gold_wow.csv", claims="response")
    got = [[c.label for c in t.gold_claims] if t.gold_claims else None for t in scored(gold)]
    # Entailment, Hallucination, Partial Hallucination, Generic, Uncooperative
    assert got == [[VERIFIED], [LACKING_EVIDENCE], [LACKING_EVIDENCE], [OUT_OF_SCOPE], None]
    assert scored(gold)[3].gold_claims[0].text == "Sure!"
    model = load_benchmark("faithdial-audit", FIX / "faithdial" / "gpt2_processed_wow.csv", claims="response")
    # entailment, entailment+hallucination, entailment+uncooperative (twice, one with the released typo), hallucinated
    assert [[c.label for c in t.gold_claims] for t in scored(model)] == [
        [VERIFIED], [LACKING_EVIDENCE], [VERIFIED], [VERIFIED], [LACKING_EVIDENCE]]
    assert all(t.gold_claims is None for t in scored(load_benchmark("faithdial-audit",
                                                                     FIX / "faithdial" / "gold_wow.csv")))


def test_faithdial_audit_abstention_split(tmp_path):
    path = write_lines(tmp_path / "wow.csv", (
        "evidence,history,response,BEGIN,VRM\n"
        "Jazz originated in New Orleans.,who invented jazz?,\"I'm not sure, but it was born in Chicago.\","
        "Hallucination,Disclosure\n"
        "Jazz originated in New Orleans.,do you like jazz?,\"I am not sure\",Generic,Disclosure\n"))
    res = load_benchmark("faithdial-audit", path, claims="response+abstention")
    assert [[(c.text, c.label) for c in t.gold_claims] for t in scored(res)] == [
        [("I'm not sure", "ABSTENTION"), ("it was born in Chicago.", LACKING_EVIDENCE)],
        [("I am not sure", "ABSTENTION")]]


def test_begin_directory_with_split(tmp_path):
    (tmp_path / "wow").mkdir()
    (tmp_path / "wow" / "begin_dev_wow.tsv").write_bytes((FIX / "begin" / "begin_dev_wow.tsv").read_bytes())
    (tmp_path / "wow" / "begin_test_wow.tsv").write_bytes((FIX / "begin" / "begin_dev_wow.tsv").read_bytes())
    res = load_benchmark("begin", tmp_path, split="test")
    assert len(res) == 4 and res[0].meta["file"] == "begin_test_wow.tsv"
    assert len(load_benchmark("begin", tmp_path)) == 8
    with pytest.raises(FileNotFoundError, match="split 'valid'"):
        load_benchmark("begin", tmp_path, split="valid")


def _bad_begin(tmp_path):
    good = (FIX / "begin" / "begin_dev_wow.tsv").read_bytes().decode("utf-8").split("\r\n")
    good.insert(2, "gpt2\twow\tsome knowledge\tmsg\tresponse\tMaybe attributable")  # row 2: unknown label
    good.insert(4, "gpt2\twow\tsome knowledge\tmsg\tresponse")  # row 4: a cell short
    good.append("gpt2\twow\tk\tm\tresp\tGeneric\textra")  # row 7: a cell too many
    return write_lines(tmp_path / "begin_dev_bad.tsv", "\r\n".join(good))


def test_begin_malformed_row_raises_with_file_and_row(tmp_path):
    path = _bad_begin(tmp_path)
    with pytest.raises(RowError) as e:
        load_benchmark("begin", path)
    assert e.value.row == 2 and e.value.field == "begin_label"
    assert str(path) in str(e.value) and "row 2" in str(e.value) and "Maybe attributable" in str(e.value)
    assert isinstance(e.value, SchemaError)  # callers catching SchemaError see it too


def test_begin_malformed_rows_rejected_and_counted(tmp_path):
    res = load_benchmark("begin", _bad_begin(tmp_path), on_error="reject")
    assert_reconciled(res, 7, 4, 3)
    reasons = {r.row: r.reason for r in res.report.rejected}
    assert set(reasons) == {2, 4, 7}
    assert "unknown label" in reasons[2] and "expected 6" in reasons[4] and "7 cells" in reasons[7]
    assert all(r.kind == "malformed" for r in res.report.rejected)


def test_begin_wrong_header_is_a_schema_error(tmp_path):
    path = write_lines(tmp_path / "x.tsv", "a\tb\n1\t2\n")
    with pytest.raises(SchemaError, match="not a BEGIN TSV"):
        load_benchmark("begin", path)


# ---------------------------------------------------------------------------------- FaithDial


def test_faithdial_hub_shaped_rows_become_dialogues_with_original_responses():
    res = load_benchmark("faithdial", FIX / "faithdial" / "test.jsonl")
    assert_reconciled(res, 4, 4)
    by_id = {c.id: c for c in res}
    conv = by_id["FaithDial-7"]
    assert [t.role for t in conv.turns] == [USER, ASSISTANT, USER, ASSISTANT, USER, ASSISTANT]
    assert conv.scored_turns == [1, 3, 5]
    # the unedited (original) response is scored, with the BEGIN label of that response
    assert conv.turns[1].text.startswith("Jazz started in New York")
    assert conv.turns[1].gold_label == HALLUCINATED
    assert conv.turns[1].meta["faithdial_response"].startswith("Jazz originated")
    assert conv.turns[3].gold_label == FAITHFUL and conv.turns[3].meta["edited"] is False
    assert conv.turns[5].text == "Yes." and conv.turns[5].gold_label == HALLUCINATED  # Generic, default
    assert conv.turns[3].reference.startswith("Jazz is characterized")
    assert by_id["FaithDial-9"].turns[0].gold_label == HALLUCINATED  # Entailment + Hallucination


def test_faithdial_nested_readme_format_and_split_dir():
    res = load_benchmark("faithdial", FIX / "faithdial", split="validation")  # -> valid.json
    assert_reconciled(res, 3, 3)
    assert res[0].scored_turns == [1, 3, 5]
    assert labels(load_benchmark("faithdial", FIX / "faithdial" / "valid.json")) == labels(res)


def test_faithdial_drop_keeps_turn_as_context_and_edited_mode():
    res = load_benchmark("faithdial", FIX / "faithdial" / "test.jsonl", ambiguous="drop")
    conv = next(c for c in res if c.id == "FaithDial-7")
    assert conv.scored_turns == [1, 3] and conv.turns[5].text == "Yes."  # still in the history
    assert_reconciled(res, 4, 3, 1)
    ed = load_benchmark("faithdial", FIX / "faithdial" / "test.jsonl", responses="edited")
    conv = next(c for c in ed if c.id == "FaithDial-7")
    assert conv.turns[1].text.startswith("Jazz originated") and conv.turns[1].gold_label is None


def test_faithdial_malformed_jsonl(tmp_path):
    lines = (FIX / "faithdial" / "test.jsonl").read_text(encoding="utf-8").splitlines()
    lines.insert(1, "{not json")  # line 2
    rec = json.loads(lines[0])
    rec.update(dialog_idx=11, BEGIN=["Hallucinaton"])  # line 6: typo label
    lines.append(json.dumps(rec))
    path = write_lines(tmp_path / "test.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(RowError, match=r"row 2: not valid JSON"):
        load_benchmark("faithdial", path)
    res = load_benchmark("faithdial", path, on_error="reject")
    assert_reconciled(res, 6, 4, 2)
    reasons = {r.row: r.reason for r in res.report.rejected}
    assert set(reasons) == {2, 6}
    assert reasons[2].startswith("not valid JSON") and reasons[6].startswith("field 'BEGIN': unknown label")


def test_faithdial_save_to_disk_copy_and_unlabelled_turns(tmp_path):
    from datasets import Dataset, DatasetDict

    rows = [json.loads(line) for line in (FIX / "faithdial" / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    for r in rows:
        r["original_response"] = r["original_response"] or ""  # the Hub stores "" for unedited turns
    rows[3]["BEGIN"] = []
    DatasetDict({"test": Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "fd"))
    res = load_benchmark("faithdial", tmp_path / "fd", split="test")
    assert_reconciled(res, 4, 4)
    assert labels(res) == [HALLUCINATED, FAITHFUL, HALLUCINATED, None]
    assert "without BEGIN labels" in res.report.notes[0]
    assert res[0].turns[3].meta["edited"] is False


def test_faithdial_hub_id_unreachable_names_download(monkeypatch):
    import datasets

    def offline(*a, **k):
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(RuntimeError, match="McGill-NLP/FaithDial.*local path"):
        load_benchmark("faithdial", "McGill-NLP/FaithDial", split="test")


def test_faithdial_audit_gold_and_model_files():
    gold = load_benchmark("faithdial", FIX / "faithdial" / "gold_wow.csv")
    assert_reconciled(gold, 7, 5, 2)
    assert {r.kind for r in gold.report.rejected} == {"blank"}
    # Entailment, Hallucination, Partial Hallucination, Generic, Uncooperative
    assert labels(gold) == [FAITHFUL, HALLUCINATED, HALLUCINATED, HALLUCINATED, HALLUCINATED]
    assert gold[4].turns[-1].meta["vrm"] == "confirmation,\nacknowledgment,\ndisclosure"
    assert labels(load_benchmark("faithdial", FIX / "faithdial" / "gold_wow.csv", ambiguous="faithful")) == [
        FAITHFUL, HALLUCINATED, HALLUCINATED, FAITHFUL, FAITHFUL]
    model = load_benchmark("faithdial-audit", FIX / "faithdial" / "gpt2_processed_wow.csv", ambiguous="faithful")
    assert_reconciled(model, 5, 5)
    # combined labels; the released typos 'entailmentt' / 'hallucinated' are known aliases
    assert labels(model) == [FAITHFUL, HALLUCINATED, FAITHFUL, FAITHFUL, HALLUCINATED]
    assert model[0].turns[-1].meta["model"] == "gpt2"
    assert [t.role for t in model[1].turns] == [ASSISTANT]  # empty history


def test_faithdial_audit_blank_rows_never_raise_but_bad_rows_do(tmp_path):
    text = (FIX / "faithdial" / "gold_wow.csv").read_text(encoding="utf-8")
    path = write_lines(tmp_path / "topical.csv", text.replace(',Sure!,Generic,', ',Sure!,,', 1))
    with pytest.raises(RowError, match=r"row 4 \(line 5\), field 'BEGIN': empty"):
        load_benchmark("faithdial-audit", path)
    res = load_benchmark("faithdial-audit", path, on_error="reject")
    assert res.report.rejected_by_kind() == {"blank": 2, "malformed": 1}


# --------------------------------------------------------------------------------------- FADE


def test_fade_corruption_file_scores_corrupted_text_and_packs_dialogues():
    res = load_benchmark("fade", FIX / "fade" / "human_verified.csv")
    assert_reconciled(res, 5, 5)
    assert "corrupted_response" in res.report.notes[0]
    by_did = {}
    for c in res:
        by_did.setdefault(c.meta["dialogue_id"], []).append(c)
    # dialogue 100: rows 1-2 share one conversation; row 3 scores the same position as row 2 and
    # row 4 is the user's response, so each gets its own conversation
    assert sorted(c.meta["rows"] for c in by_did["100"]) == [[1, 2], [3], [4]]
    conv = next(c for c in by_did["100"] if c.meta["rows"] == [1, 2])
    assert [t.role for t in conv.turns] == [USER, ASSISTANT, USER, ASSISTANT]
    assert conv.turns[1].text == "yes ! it was directed by steven spielberg ."  # the text the tags describe
    assert conv.turns[1].gold_label == HALLUCINATED and conv.turns[1].meta["hallucination_spans"] == 1
    assert conv.turns[3].gold_label == FAITHFUL
    assert conv.turns[3].text == conv.turns[3].text.lower()  # case never gives the label away
    assert conv.turns[1].reference == "Inception directed by Christopher Nolan"
    row3 = next(c for c in by_did["100"] if c.meta["rows"] == [3])
    assert row3.turns[-1].reference == "Inception : `starring`: Leonardo DiCaprio"  # rendered from paths
    user_row = next(c for c in by_did["100"] if c.meta["rows"] == [4])
    assert user_row.turns[-1].meta["speaker"] == "user" and user_row.turns[-1].is_scored
    assert len({c.id for c in res}) == len(res)


def test_fade_observed_split_scores_original_response_and_speakers_option():
    res = load_benchmark("fade", FIX / "fade", split="test")  # -> test_observed.csv
    assert_reconciled(res, 2, 2)
    (conv,) = res
    assert conv.turns[1].text == "Yes ! It was directed by Christopher Nolan in 1975 ."
    assert labels(res) == [HALLUCINATED, FAITHFUL]
    only = load_benchmark("fade", FIX / "fade" / "human_verified.csv", speakers="assistant")
    assert_reconciled(only, 5, 4, 1)
    assert only.report.rejected[0].row == 4 and only.report.rejected[0].kind == "dropped"


def test_fade_response_as_claim():
    res = load_benchmark("fade", FIX / "fade" / "human_verified.csv", claims="response")
    conv = next(c for c in res if c.meta["rows"] == [1, 2])
    assert [t.gold_claims[0].label for t in (conv.turns[1], conv.turns[3])] == ["LACKING EVIDENCE", "VERIFIED"]
    assert conv.turns[1].gold_claims[0].text == "yes ! it was directed by steven spielberg ."   # the scored text
    assert conv.turns[0].gold_claims is None and conv.turns[2].gold_claims is None   # context turns
    assert load_benchmark("fade", FIX / "fade" / "human_verified.csv")[0].turns[1].gold_claims is None
    with pytest.raises(ValueError, match="claims must be one of"):
        load_benchmark("fade", FIX / "fade" / "human_verified.csv", claims="all")


def test_fade_malformed_rows(tmp_path):
    lines = (FIX / "fade" / "human_verified.csv").read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2].replace("'O'", "'X-TAG'", 1)  # row 2: bad BILOU tag
    lines[5] = lines[5].replace("['I enjoy", "['I enjoy'", 1)  # row 5: history not a literal
    path = write_lines(tmp_path / "bad.csv", "\n".join(lines) + "\n")
    with pytest.raises(RowError, match=r"bad.csv, row 2 \(line 3\), field 'hallucination_tags'"):
        load_benchmark("fade", path)
    res = load_benchmark("fade", path, on_error="reject")
    assert_reconciled(res, 5, 3, 2)
    assert {r.row for r in res.report.rejected} == {2, 5}


def test_fade_missing_file_names_download(tmp_path):
    with pytest.raises(FileNotFoundError, match="souvikdgp16/FADE"):
        load_benchmark("fade", tmp_path, split="test")


# ------------------------------------------------------------------------------------ DialFact


def test_dialfact_labels_and_context():
    res = load_benchmark("dialfact", FIX / "dialfact" / "test_split.jsonl")
    assert_reconciled(res, 4, 4)
    # SUPPORTS, REFUTES, NEI factual (lacking evidence), NEI personal (ambiguous -> default)
    assert labels(res) == [FAITHFUL, HALLUCINATED, HALLUCINATED, HALLUCINATED]
    assert [t.role for t in res[0].turns] == [USER, ASSISTANT, USER, ASSISTANT]
    assert res[0].scored_turns == [3]  # context assistant turns are not scored
    assert res[0].turns[3].reference.startswith("Mount Etna\nMount Etna is an active")
    assert res[0].meta["dialogue_id"] == res[2].meta["dialogue_id"] == "11___3"
    assert labels(load_benchmark("dialfact", FIX / "dialfact", split="test", ambiguous="faithful"))[3] == FAITHFUL
    dropped = load_benchmark("dialfact", FIX / "dialfact" / "test_split.jsonl", ambiguous="drop")
    assert_reconciled(dropped, 4, 3, 1)


def test_dialfact_response_as_claim():
    res = load_benchmark("dialfact", FIX / "dialfact" / "test_split.jsonl", claims="response")
    claims = [c.turns[c.scored_turns[0]].gold_claims for c in res]
    assert [[x.label for x in cs] for cs in claims] == [
        ["VERIFIED"], ["CONTRADICTED"], ["LACKING EVIDENCE"], ["OUT-OF-SCOPE"]]
    assert claims[0][0].text == "Yes, Mount Etna is an active stratovolcano."
    assert load_benchmark("dialfact", FIX / "dialfact" / "test_split.jsonl")[0].turns[3].gold_claims is None
    with pytest.raises(ValueError, match="claims must be one of"):
        load_benchmark("dialfact", FIX / "dialfact" / "test_split.jsonl", claims="sentences")


def test_dialfact_malformed_rows(tmp_path):
    lines = (FIX / "dialfact" / "test_split.jsonl").read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[1])
    rec["response_label"] = "MAYBE"
    lines[1] = json.dumps(rec)
    rec = json.loads(lines[2])
    del rec["evidence_list"]
    lines[2] = json.dumps(rec)
    path = write_lines(tmp_path / "test_split.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(RowError, match=r"row 2, field 'response_label': unknown label 'MAYBE'"):
        load_benchmark("dialfact", path)
    res = load_benchmark("dialfact", path, on_error="reject")
    assert_reconciled(res, 4, 2, 2)
    assert [r.row for r in res.report.rejected] == [2, 3]


# --------------------------------------------------------------------------------- FineDialFact


def test_finedialfact_claim_labels_and_turns():
    res = load_benchmark("finedialfact", FIX / "finedialfact" / "annotated_test_data.json")
    assert_reconciled(res, 4, 4)
    claims = [c for t in scored(res) for c in t.gold_claims]
    assert [c.label for c in claims] == [VERIFIED, CONTRADICTED, LACKING_EVIDENCE, LACKING_EVIDENCE]
    assert claims[0].text == "Marie Curie won two Nobel Prizes."
    conv = res[0]
    assert [t.role for t in conv.turns] == [USER, ASSISTANT, USER, ASSISTANT]
    assert conv.turns[-1].text == "She won two Nobel Prizes." and conv.turns[-1].gold_label is None
    assert "Marie Curie\nMarie Curie was a physicist" in conv.turns[-1].reference
    assert "Nobel Prize\n" in conv.turns[-1].reference  # evidence="all"
    sel = load_benchmark("finedialfact", FIX / "finedialfact" / "annotated_test_data.json", evidence="selected")
    assert "Nobel Prize\n" not in sel[0].turns[-1].reference
    # non-verifiable NEI is the ambiguous case
    out = load_benchmark("finedialfact", FIX / "finedialfact" / "annotated_test_data.json", ambiguous="faithful",
                         turn_label="from_claims")
    assert [t.gold_claims[0].label for t in scored(out)][3] == OUT_OF_SCOPE
    assert labels(out) == [FAITHFUL, HALLUCINATED, HALLUCINATED, FAITHFUL]
    drop = load_benchmark("finedialfact", FIX / "finedialfact" / "annotated_test_data.json", ambiguous="drop")
    assert_reconciled(drop, 4, 3, 1)


def test_finedialfact_few_shot_labels_from_output_line():
    res = load_benchmark("finedialfact", FIX / "finedialfact" / "few_shot_examples.json")
    assert_reconciled(res, 2, 2)
    assert [t.gold_claims[0].label for t in scored(res)] == [VERIFIED, LACKING_EVIDENCE]
    assert scored(res)[0].meta["label_source"].startswith("few-shot")


def test_finedialfact_malformed(tmp_path):
    data = json.loads((FIX / "finedialfact" / "annotated_test_data.json").read_text(encoding="utf-8"))
    data[1]["factualLabel"] = "Partly"
    data[2]["history"] = [["C", "who?"]]
    path = tmp_path / "annotated_test_data.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RowError, match=r"row 2, field 'factualLabel'"):
        load_benchmark("finedialfact", path)
    res = load_benchmark("finedialfact", path, on_error="reject")
    assert_reconciled(res, 4, 2, 2)


# ----------------------------------------------------------------------------------------- AIS


def test_ais_wow_joined_by_ex_idx():
    res = load_benchmark("ais", FIX / "ais" / "ann_wow.csv", wow=FIX / "ais" / "test_random_split.json")
    assert_reconciled(res, 4, 4)
    conv = res[0]
    assert [t.role for t in conv.turns] == [ASSISTANT, USER, ASSISTANT]  # wizard spoke first
    assert conv.scored_turns == [2]
    assert conv.turns[2].reference == "Great Wall of China\nThe Great Wall is 21,196 km long."
    assert conv.turns[2].text.startswith("the great wall of china is over")
    # attributable, not attributable, uninterpretable, flagged (both ambiguous -> default)
    assert labels(res) == [FAITHFUL, HALLUCINATED, HALLUCINATED, HALLUCINATED]
    assert res[3].turns[-1].reference == ""  # the wizard used no passage
    assert res[0].meta["dialogue_id"] == res[1].meta["dialogue_id"] == "wow:0"
    drop = load_benchmark("ais", FIX / "ais" / "ann_wow.csv", wow=FIX / "ais" / "test_random_split.json",
                          ambiguous="drop")
    assert_reconciled(drop, 4, 2, 2)
    assert {r.reason.split(" -- ")[1] for r in drop.report.rejected} == {"uninterpretable", "flagged"}


def test_ais_qrecc_joined_with_passages():
    res = load_benchmark("ais", FIX / "ais" / "ann_qrecc.csv", qrecc=FIX / "ais" / "qrecc_test.json",
                         qrecc_passages=FIX / "ais" / "passages.jsonl")
    assert_reconciled(res, 2, 2)
    conv = res[0]
    assert [t.role for t in conv.turns] == [USER, ASSISTANT, USER, ASSISTANT]
    assert conv.turns[2].text == "how tall is it?"
    assert conv.turns[3].reference.startswith("Mount Everest is Earth's highest")
    assert labels(res) == [FAITHFUL, HALLUCINATED]


def test_ais_needs_sources_and_names_them(tmp_path):
    with pytest.raises(ValueError, match="wizard_of_wikipedia.tgz"):
        load_benchmark("ais", FIX / "ais" / "ann_wow.csv")
    with pytest.raises(ValueError, match="SCAI-QReCC"):
        load_benchmark("ais", FIX / "ais" / "ann_qrecc.csv", qrecc=FIX / "ais" / "qrecc_test.json")
    cnn = write_lines(tmp_path / "ann_cnn_dm.csv", "ex-idx,output\n")
    with pytest.raises(SchemaError, match="not dialogue data"):
        load_benchmark("ais", cnn)


def test_ais_unknown_ex_idx_is_a_located_error(tmp_path):
    text = (FIX / "ais" / "ann_wow.csv").read_text(encoding="utf-8").replace("1:3,", "9:0,").replace("1:1,", "1:x,")
    path = write_lines(tmp_path / "ann_wow.csv", text)
    with pytest.raises(RowError, match=r"row 3 \(line 4\), field 'ex-idx'"):
        load_benchmark("ais", path, wow=FIX / "ais" / "test_random_split.json")
    res = load_benchmark("ais", path, wow=FIX / "ais" / "test_random_split.json", on_error="reject")
    assert_reconciled(res, 4, 2, 2)
    assert "conversation 9 not in" in res.report.rejected[1].reason


# -------------------------------------------------------------------------------- VISTA human


def test_vista_human_loader_and_reject_mode(tmp_path):
    res = load_benchmark("vista-human", FIX / "vista_human" / "dev.json")
    assert_reconciled(res, 2, 2)
    assert [c.id for c in res] == ["BEGIN-1", "AIS-2"]
    assert res[1].scored_turns == [2]
    data = json.loads((FIX / "vista_human" / "dev.json").read_text(encoding="utf-8"))
    data.insert(1, [{"role": "robot", "utterance": "hi"}])
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SchemaError, match="conversation 1, turn 0, field 'role'"):
        load_benchmark("vista-human", path)
    res = load_benchmark("vista-human", path, on_error="reject")
    assert_reconciled(res, 3, 2, 1)
    assert res.report.rejected[0].row == 1 and "robot" in res.report.rejected[0].reason


# ------------------------------------------------------------------------------------ registry


def test_registry_rejects_unknown_benchmarks_and_options():
    with pytest.raises(ValueError, match="unknown benchmark"):
        load_benchmark("nope", FIX)
    with pytest.raises(ValueError, match="does not take option"):
        load_benchmark("fade", FIX / "fade" / "test_observed.csv", label_map={"x": "faithful"})
    with pytest.raises(ValueError, match="ambiguous must be one of"):
        load_benchmark("begin", FIX / "begin" / "begin_dev_wow.tsv", ambiguous="maybe")
    with pytest.raises(ValueError, match="on_error must be one of"):
        load_benchmark("begin", FIX / "begin" / "begin_dev_wow.tsv", on_error="ignore")
    for b in BENCHMARKS.values():
        assert {"ambiguous", "on_error", "split"} <= set(b.options()), b.name


@pytest.mark.parametrize("path, name", [
    ("begin/dev_05_24_21.tsv", "begin"), ("fade/test_observed.csv", "fade"), ("dialfact/test_split.jsonl", "dialfact"),
    ("finedialfact/annotated_test_data.json", "finedialfact"), ("ais/ann_wow.csv", "ais"),
    ("vista_human/dev.json", "vista-human"), ("faithdial/test.jsonl", "faithdial"),
])
def test_guess_benchmark(path, name):
    assert guess_benchmark(FIX / path) == name


def test_every_loader_output_round_trips_through_jsonl(tmp_path):
    results = [
        load_benchmark("begin", FIX / "begin"),
        load_benchmark("faithdial", FIX / "faithdial" / "test.jsonl"),
        load_benchmark("faithdial-audit", FIX / "faithdial" / "gold_wow.csv"),
        load_benchmark("fade", FIX / "fade" / "human_verified.csv"),
        load_benchmark("dialfact", FIX / "dialfact"),
        load_benchmark("finedialfact", FIX / "finedialfact"),
        load_benchmark("ais", FIX / "ais" / "ann_wow.csv", wow=FIX / "ais" / "test_random_split.json"),
    ]
    convs = [c for r in results for c in r]
    assert len({c.id for c in convs}) == len(convs)
    write_conversations(convs, tmp_path / "all.jsonl")
    back = read_conversations(tmp_path / "all.jsonl")
    assert [c.to_dict() for c in back] == [json.loads(json.dumps(c.to_dict())) for c in convs]


def test_guess_benchmark_ignores_a_clone_folder_named_vista_distill(tmp_path):
    """`git clone` makes a folder named vista-distill: the files below it keep their own benchmark."""
    import shutil

    clone = tmp_path / "vista-distill" / "tests" / "fixtures"
    for sub in ("faithdial", "ais", "vista_human"):
        shutil.copytree(FIX / sub, clone / sub)
    assert guess_benchmark(clone / "faithdial" / "test.jsonl") == "faithdial"
    assert guess_benchmark(clone / "ais" / "ann_wow.csv") == "ais"
    assert guess_benchmark(clone / "vista_human" / "dev.json") == "vista-human"
