"""``data prepare`` / ``data stats`` through argparse, as the top-level CLI will call them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from vista_distill.data.cli import add_data_subcommands
from vista_distill.data.io import read_conversations
from vista_distill.data.splits import find_leaks

FIX = Path(__file__).resolve().parent / "fixtures"


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="vista-distill")
    add_data_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_prepare_samples_writes_and_reports(tmp_path, capsys):
    out, rep = tmp_path / "begin.jsonl", tmp_path / "report.json"
    src = str(FIX / "begin" / "dev_05_24_21.tsv")
    code = run(["data", "prepare", "--benchmark", "begin", "--source", src, "--n", "2", "--seed", "1",
                "--ambiguous", "drop", "--out", str(out), "--report", str(rep)])
    assert code == 0
    convs = read_conversations(out)
    assert len(convs) == 2
    report = json.loads(rep.read_text())
    assert report["rows_read"] == 5 and report["records_out"] == 3 and len(report["rejected"]) == 2
    assert report["reconciles"] and report["sampled"] == 2 and report["seed"] == 1
    text = capsys.readouterr().out
    assert "rows read 5 = records 3 + rejected 2" in text and "wrote 2 of 3" in text
    again = tmp_path / "again.jsonl"
    run(["data", "prepare", "--benchmark", "begin", "--source", src, "--n", "2", "--seed", "1",
         "--ambiguous", "drop", "--out", str(again)])
    assert again.read_text() == out.read_text()


def test_prepare_errors_are_reported_not_raised(tmp_path, capsys):
    bad = tmp_path / "begin_dev_x.tsv"
    bad.write_text((FIX / "begin" / "dev_05_24_21.tsv").read_text().replace("\tgeneric\t", "\tperhaps\t"))
    code = run(["data", "prepare", "--benchmark", "begin", "--source", str(bad), "--out", str(tmp_path / "o.jsonl")])
    assert code == 2   # bad input (runtime/exit_codes.py)
    err = capsys.readouterr().err
    assert f"{bad}, row 4 (line 5), field 'gold label': unknown label 'perhaps'" in err
    assert not (tmp_path / "o.jsonl").exists()
    code = run(["data", "prepare", "--benchmark", "begin", "--source", str(bad), "--on-error", "reject",
                "--out", str(tmp_path / "o.jsonl")])
    assert code == 0 and "rejected     1  field 'gold label': unknown label" in capsys.readouterr().out
    assert run(["data", "prepare", "--benchmark", "begin", "--source", str(bad), "--label-map", "nonsense",
                "--out", str(tmp_path / "o.jsonl")]) == 2


def test_prepare_against_held_out_material(tmp_path, capsys):
    src = str(FIX / "begin" / "dev_05_24_21.tsv")
    held = tmp_path / "test.jsonl"
    assert run(["data", "prepare", "--benchmark", "begin", "--source", src, "--n", "2", "--out", str(held)]) == 0
    out = tmp_path / "silver.jsonl"
    args = ["data", "prepare", "--benchmark", "begin", "--source", src, "--n", "0", "--against", str(held),
            "--out", str(out)]
    assert run(args) == 2
    assert "share dialogues" in capsys.readouterr().err and not out.exists()
    assert run(args + ["--drop-leaks"]) == 0
    kept = read_conversations(out)
    dropped = 5 - len(kept)
    assert dropped >= 2 and f"dropped {dropped} conversation(s)" in capsys.readouterr().out
    assert find_leaks(read_conversations(held), kept) == []


def test_stats_counts_sources_labels_and_claims(capsys):
    assert run(["data", "stats", str(FIX / "vista_human" / "dev.json")]) == 0
    text = capsys.readouterr().out
    assert "conversations   2" in text and "scored turns    2" in text
    assert "claims          3 on 2 turns" in text
    assert "VERIFIED 1" in text and "OUT-OF-SCOPE 1" in text and "CONTRADICTED 1" in text
    assert run(["data", "stats", "--json", str(FIX / "vista_human" / "dev.json")]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["per_source"] == {"AIS": {"conversations": 1, "scored_turns": 1, "hallucinated": 1, "claims": 1},
                                   "BEGIN": {"conversations": 1, "scored_turns": 1, "faithful": 1, "claims": 2}}
    assert stats["reference_words"]["max"] == 10


def test_stats_missing_file(tmp_path, capsys):
    assert run(["data", "stats", str(tmp_path / "nope.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_stats_on_a_benchmarks_own_table_names_the_command_that_reads_it(capsys):
    """A BEGIN .tsv given where conversations are expected: the error names `data prepare --benchmark begin`
    with the file, and the prepared file is then read."""
    src = FIX / "begin" / "dev_05_24_21.tsv"
    assert run(["data", "stats", str(src)]) == 2
    err = capsys.readouterr().err
    assert f"vista-distill data prepare --benchmark begin --source {src}" in err and "not valid JSON" not in err
