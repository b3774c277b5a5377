"""Malformed conversation files are refused up front: every problem located by file, record and
field, and the CLI prints them as plain ``error:`` lines with exit code 2 before any model loads."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vista_distill.data.io import SchemaError, read_conversations, write_conversations
from vista_distill.data.loading import validate_unique_ids
from vista_distill.data.schema import Conversation, Turn

USER = {"role": "user", "text": "hi"}
ASSIST = {"role": "assistant", "text": "Paris is in France.", "reference": "Paris is the capital of France."}


def conv(cid: str = "c1", **over) -> dict:
    return {"id": cid, "source": "s", "turns": [USER, ASSIST], **over}


def turn(**over) -> dict:
    return {**ASSIST, **over}


def jsonl(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


A_USER = {"role": "user", "utterance": "hi"}
A_ASSIST = {"role": "assistant", "utterance": "Paris.", "retrieved_document": "Paris is in France."}

# (file name, content, [fragments the error must contain]): each names the file (checked
# separately), the record (JSONL line and conversation / authors' conversation index) and the field.
CASES = [
    ("turns-str.jsonl", jsonl(conv(), conv("c2", turns=["abc"])),
     ["line 2 of", "conversation 1, turn 0: expected a turn object", "got str"]),
    ("turns-not-list.jsonl", jsonl(conv(turns={"role": "user"})),
     ["line 1 of", "conversation 0, field 'turns': expected a list"]),
    ("no-turns.jsonl", jsonl(conv(), conv("c2", turns=[])),
     ["line 2 of", "conversation 1, field 'turns': conversation has no turns"]),
    ("no-assistant.jsonl", jsonl(conv(turns=[USER, USER])),
     ["conversation 0, field 'turns': no assistant turn"]),
    ("id-missing.jsonl", jsonl({"source": "s", "turns": [ASSIST]}),
     ["conversation 0, field 'id': missing"]),
    ("id-list.jsonl", jsonl(conv(id=["a"])),
     ["conversation 0, field 'id': expected a non-empty string or an integer"]),
    ("id-bool.jsonl", jsonl(conv(id=True)),
     ["conversation 0, field 'id': expected a non-empty string or an integer"]),
    ("source-list.jsonl", jsonl(conv(source=["wow"])),
     ["conversation 0, field 'source': expected a string, got list"]),
    ("role-bad.jsonl", jsonl(conv(turns=[USER, turn(role="bot")])),
     ["conversation 0, turn 1, field 'role': expected one of ('user', 'assistant'), got 'bot'"]),
    ("text-number.jsonl", jsonl(conv(turns=[USER, turn(text=42)])),
     ["conversation 0, turn 1, field 'text': expected a string, got int"]),
    ("reference-number.jsonl", jsonl(conv(turns=[USER, turn(reference=3.5)])),
     ["conversation 0, turn 1, field 'reference': expected a string or null, got float"]),
    ("gold-label.jsonl", jsonl(conv(turns=[USER, turn(gold_label="true")])),
     ["conversation 0, turn 1, field 'gold_label': expected one of ('faithful', 'hallucinated')"]),
    ("claims-not-list.jsonl", jsonl(conv(turns=[USER, turn(gold_claims="Paris")])),
     ["turn 1, field 'gold_claims': expected a list"]),
    ("claim-text-number.jsonl", jsonl(conv(turns=[USER, turn(gold_claims=[{"text": 7, "label": None}])])),
     ["conversation 0, turn 1, field 'gold_claims[0].text': expected a string, got int"]),
    ("claim-label.jsonl", jsonl(conv(turns=[USER, turn(gold_claims=[{"text": "x", "label": "TRUE"}])])),
     ["turn 1, field 'gold_claims[0].label': expected one of ('VERIFIED'"]),
    ("claim-extra-key.jsonl", jsonl(conv(turns=[USER, turn(gold_claims=[{"text": "x", "score": 1}])])),
     ["turn 1, field 'gold_claims[0].score': unknown field"]),
    ("turn-extra-key.jsonl", jsonl(conv(turns=[USER, turn(utterance="x")])),
     ["conversation 0, turn 1, field 'utterance': unknown field"]),
    ("background.jsonl", jsonl(conv(background=["ok", 3])),
     ["conversation 0, field 'background[1]': expected a string, got int"]),
    ("background-str.jsonl", jsonl(conv(background="a tour guide")),
     ["conversation 0, field 'background': expected a list of strings"]),
    ("meta-list.jsonl", jsonl(conv(meta=[1])),
     ["conversation 0, field 'meta': expected an object, got list"]),
    ("turn-meta.jsonl", jsonl(conv(turns=[USER, turn(meta="x")])),
     ["conversation 0, turn 1, field 'meta': expected an object"]),
    ("not-object.jsonl", jsonl(conv(), [conv("c2")]),
     ["line 2 of", "conversation 1: expected a JSON object (one conversation), got list"]),
    ("bad-json.jsonl", jsonl(conv(), '{"id": "c2", "source": "s", "turns": [', conv("c3")),
     ["line 2 of", "conversation 1: not valid JSON (column"]),
    ("duplicate-id.jsonl", jsonl(conv("a"), conv("b"), "", conv("a")),
     ["line 4 of", "conversation 2, field 'id': conversation id 'a' is also that of conversation 0 (line 1)"]),
    ("duplicate-int-str-id.jsonl", jsonl(conv(1), conv("1")),
     ["line 2 of", "conversation 1, field 'id': conversation id '1' is also that of conversation 0"]),
    ("empty.jsonl", "", ["empty file; expected one JSON conversation per line"]),
    ("blank-lines.jsonl", "\n  \n\n", ["empty file"]),
    ("latin1.jsonl", None, ["line 2 of", "not UTF-8 text: byte 0xe9 at offset"]),
    # the authors' JSON: a list of conversations, each a list of turns
    ("empty.json", "", ["empty file; expected a JSON list of conversations"]),
    ("latin1.json", None, ["not UTF-8 text: byte 0xe9 at offset"]),
    ("bad-syntax.json", '[[{"role": "user",\n "utterance": }]]', ["not valid JSON (line 2, column"]),
    ("jsonl-as.json", jsonl(conv(), conv("c2")), ["not valid JSON (line 2", "one conversation per line"]),
    ("empty-list.json", "[]", ["the list holds no conversations"]),
    ("authors-no-assistant.json", json.dumps([[A_USER, A_ASSIST], [A_USER]]),
     ["conversation 1: no assistant turn"]),
    ("authors-turn-str.json", json.dumps([[A_USER, "hello"]]),
     ["conversation 0, turn 1: expected a turn object", "got str"]),
    ("authors-doc-number.json", json.dumps([[A_USER, {**A_ASSIST, "retrieved_document": 5}]]),
     ["conversation 0, turn 1, field 'retrieved_document': expected a string or \"N/A\", got int"]),
    ("authors-claims-dict.json", json.dumps([[A_USER, {**A_ASSIST, "human_claims": {"claim_text": "x"}}]]),
     ["conversation 0, turn 1, field 'human_claims': expected a list"]),
    ("authors-duplicate-id.json",
     json.dumps([[A_USER, {**A_ASSIST, "dataset": "WoW", "conversation_id": 7}],
                 [{**A_ASSIST, "dataset": "WoW", "conversation_id": 7}]]),
     ["conversation 1, field 'conversation_id': conversation id 'WoW-7' is also that of conversation 0"]),
]


def _write(tmp_path: Path, name: str, content: str | None) -> Path:
    path = tmp_path / name
    if content is None:  # Latin-1 bytes: "café" in a file that claims to be UTF-8
        good = json.dumps(conv()) + "\n" if name.endswith(".jsonl") else ""
        bad = json.dumps(conv("c2", turns=[USER, turn(text="café")]), ensure_ascii=False)
        path.write_bytes(good.encode() + (bad if name.endswith(".jsonl") else f"[{bad}]").encode("latin-1"))
    else:
        path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize("name, content, expected", CASES, ids=[c[0] for c in CASES])
def test_malformed_file_is_refused_naming_file_record_and_field(tmp_path, name, content, expected):
    path = _write(tmp_path, name, content)
    with pytest.raises(SchemaError) as err:
        read_conversations(path)
    text = str(err.value)
    assert str(path) in text
    for fragment in expected:
        assert fragment in text, f"{fragment!r} not in {text!r}"
    assert all(str(path) in line for line in err.value.lines())


def test_latin1_offset_is_the_first_undecodable_byte(tmp_path):
    path = _write(tmp_path, "latin1.jsonl", None)
    offset = path.read_bytes().index(b"\xe9")
    with pytest.raises(SchemaError, match=rf"line 2 of .*byte 0xe9 at offset {offset} "):
        read_conversations(path)


def test_every_problem_is_collected_and_the_listing_is_capped(tmp_path):
    lines = [conv(f"c{i}", source=i) for i in range(25)] + [conv("ok"), conv("c0", turns=["x"])]
    path = tmp_path / "many.jsonl"
    path.write_text(jsonl(*lines))
    with pytest.raises(SchemaError) as err:
        read_conversations(path)
    e = err.value
    assert len(e.problems) == 26
    assert [p.line for p in e.problems[:25]] == list(range(1, 26)) and e.problems[25].line == 27
    listing = e.lines()
    assert len(listing) == SchemaError.MAX_LISTED + 1 and len(str(e).splitlines()) == len(listing)
    assert listing[0] == f"line 1 of {path}, conversation 0, field 'source': expected a string, got int"
    assert listing[-1] == f"{path}: and 6 more problems (26 in all)"
    # the first problem is also the error's own location, as for a single-problem error
    assert (e.path, e.conversation, e.field, e.line) == (path, 0, "source", 1)


def test_a_valid_file_with_bom_and_blank_lines_still_reads(tmp_path):
    path = tmp_path / "ok.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + jsonl(conv("a"), "", conv(2)).encode())
    convs = read_conversations(path)
    assert [c.id for c in convs] == ["a", "2"] and convs[1].turns[1].reference == ASSIST["reference"]


def test_texts_with_unicode_line_separators_round_trip(tmp_path):
    """Our writer keeps U+2028 / U+0085 / form feeds raw (ensure_ascii=False): they are not line breaks."""
    c = Conversation.from_dict(conv("sep", turns=[USER, turn(text="a\u2028b\x85c\x0cd\r")]))
    path = tmp_path / "sep.jsonl"
    write_conversations([c, Conversation.from_dict(conv("next"))], path)
    assert read_conversations(path)[0] == c


def test_from_dict_rejects_what_the_reader_rejects():
    with pytest.raises(ValueError, match=r"turn 0: expected a turn object"):
        Conversation.from_dict({"id": "x", "source": "s", "turns": ["abc"]})


def _convs(*ids: str) -> list[Conversation]:
    return [Conversation(id=i, source="s", turns=[Turn(role="assistant", text="t", reference="r")]) for i in ids]


def test_duplicate_ids_across_sources_name_both_places():
    with pytest.raises(SchemaError) as err:
        validate_unique_ids([("train.jsonl", _convs("a", "b")), ("test.json", _convs("c", "b", "a"))])
    why = "ids must be unique (eval pairs results by conversation id and turn index)"
    assert err.value.lines() == [
        "test.json, conversation 1, field 'id': conversation id 'b' is also that of train.jsonl, conversation 1; "
        + why,
        "test.json, conversation 2, field 'id': conversation id 'a' is also that of train.jsonl, conversation 0; "
        + why,
    ]
    validate_unique_ids([("train.jsonl", _convs("a", "b")), ("test.json", _convs("c"))])  # no error


def test_duplicate_check_can_leave_out_dropped_conversations_keeping_positions():
    train, test = _convs("a", "b"), _convs("c", "a", "b")
    sources = [("train.jsonl", train), ("test.jsonl", test)]
    validate_unique_ids(sources, keep=lambda c: c is not test[1] and c is not test[2])  # leaks were dropped
    with pytest.raises(SchemaError) as err:
        validate_unique_ids(sources, keep=lambda c: c is not test[1])
    assert [(p.path, p.conversation) for p in err.value.problems] == [("test.jsonl", 2)]
    assert "also that of train.jsonl, conversation 1;" in str(err.value)


def test_files_written_by_the_project_pass_validation(sample_path, tmp_path):
    convs = read_conversations(sample_path)
    for name in ("rt.jsonl", "rt.json"):
        write_conversations(convs, tmp_path / name)
        assert [c.id for c in read_conversations(tmp_path / name)] == [c.id for c in convs]


# -- the real CLI, in a subprocess -----------------------------------------------------------------------

def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vista_distill.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def _assert_plain_lines(proc: subprocess.CompletedProcess, path: Path, n: int) -> list[str]:
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == n, proc.stderr
    assert all(str(path) in line for line in errors)
    return errors


def test_cli_score_refuses_a_malformed_jsonl_before_any_model_loads(tmp_path):
    bad = _write(tmp_path, "bad.jsonl", jsonl(conv(), conv("c2", turns=["abc"]), conv("c3", source=["x"])))
    out = tmp_path / "o.jsonl"
    start = time.monotonic()
    proc = _cli("score", "--input", str(bad), "--output", str(out))
    took = time.monotonic() - start
    assert proc.returncode == 2, proc.stderr
    errors = _assert_plain_lines(proc, bad, 2)
    assert errors[0] == f"error: line 2 of {bad}, conversation 1, turn 0: expected a turn object " \
                        "{role, text, ...}, got str 'abc'"
    assert errors[1] == f"error: line 3 of {bad}, conversation 2, field 'source': expected a string, got list"
    assert not out.exists() and "loading" not in proc.stderr.lower()
    assert took < 30  # the embedded model takes far longer to load and run than reading the file


def test_cli_score_names_the_byte_of_a_non_utf8_json(tmp_path):
    bad = _write(tmp_path, "latin1.json", None)
    proc = _cli("score", "--input", str(bad), "--output", str(tmp_path / "o.jsonl"))
    assert proc.returncode == 2
    (line,) = _assert_plain_lines(proc, bad, 1)
    assert f"line 1 of {bad}: not UTF-8 text: byte 0xe9 at offset" in line


def test_cli_score_refuses_duplicate_ids(tmp_path):
    bad = _write(tmp_path, "dup.jsonl", jsonl(conv("a"), conv("a")))
    proc = _cli("score", "--input", str(bad), "--output", str(tmp_path / "o.jsonl"))
    assert proc.returncode == 2
    (line,) = _assert_plain_lines(proc, bad, 1)
    assert "conversation 1, field 'id': conversation id 'a' is also that of conversation 0 (line 1)" in line


def test_cli_eval_refuses_a_malformed_input_before_any_model_loads(tmp_path):
    bad = _write(tmp_path, "bad.jsonl", jsonl(conv(turns=[USER, turn(reference=3)])))
    recipe = Path(__file__).resolve().parents[1] / "recipes" / "smollm2-135m-cpu.yaml"
    proc = _cli("eval", "--config", str(recipe), "--input", str(bad), "--output-dir", str(tmp_path / "ev"),
                "--no-progress")
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = _assert_plain_lines(proc, bad, 1)
    assert line == f"error: line 1 of {bad}, conversation 0, turn 1, field 'reference': expected a string " \
                   "or null, got int"
    assert "[eval]" not in proc.stderr  # no system ran


def test_cli_data_stats_lists_every_problem_without_a_traceback(tmp_path):
    bad = _write(tmp_path, "bad.jsonl", jsonl(conv(source=1), conv("b", turns=[])))
    proc = _cli("data", "stats", str(bad))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "conversation 0, field 'source'" in proc.stderr
    assert "conversation 1, field 'turns': conversation has no turns" in proc.stderr
