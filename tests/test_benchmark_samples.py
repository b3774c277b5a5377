"""One home per benchmark (data/benchmarks/): each module declares its loader, its fetch entry and, where the
project bundles a sample, the function that rebuilds it; the builders run here on committed files (the full rebuild
from the official files, byte for byte: bench/benchmark_samples.py)."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest

from vista_distill.data.benchmarks import BENCHMARKS, MODULES, fetch_sources, guess_benchmark
from vista_distill.data.benchmarks.__main__ import main as build_main
from vista_distill.data.benchmarks.samples import DEMO_FAITHDIAL, SAMPLES
from vista_distill.data.download import fetch

ROOT = Path(__file__).resolve().parents[1]


def test_every_benchmark_module_declares_its_loader_and_its_fetch_entry():
    for m in MODULES:
        assert m.BENCHMARKS and all(b.loader.__module__ == m.__name__ for b in m.BENCHMARKS), m.__name__
        assert m.FETCH.name in {"vista_human", "factcheck_gpt"} | {b.name for b in m.BENCHMARKS}, m.__name__
    assert fetch.registry() == fetch_sources()
    assert len(fetch_sources()) == len(MODULES) and len(BENCHMARKS) == len(MODULES) + 1   # faithdial-audit


def test_the_dev_subsets_live_with_their_benchmark():
    subsets = {s.dest: s for src in fetch_sources().values() for s in src.subsets}
    assert sorted(subsets) == ["fhsumbench/dev.json", "finedialfact/hybridial_dev.json", "vista_human/dev.json"]
    assert len(subsets["vista_human/dev.json"].keep) == 35 and len(subsets["fhsumbench/dev.json"].keep) == 401


@pytest.mark.parametrize("path, name", [
    ("x/finedialfact/HybriDial/annotated_test_data.json", "finedialfact"),
    ("x/dialfact/scripts/testsmall.jsonl", "dialfact"),
    ("faithdial/data-audit/gold/wow.csv", "faithdial-audit"),
    ("faithdial/hub/test.json", "faithdial"),
    ("ais/ann_wow.csv".replace("ais/", "elsewhere/"), "ais"),
    ("vista-distill/tests/vista_turns.json", "vista-human"),
    ("a/b/fhsumbench/dev.json", "fhsumbench"),
])
def test_guess_by_path_longest_key_first(path, name):
    assert guess_benchmark(path) == name


def test_guess_from_a_header_line(tmp_path):
    (tmp_path / "x.tsv").write_text("knowledge\tmessage\tbegin_label\n")
    (tmp_path / "y.csv").write_text("history,response,hallucination_tags\n")
    (tmp_path / "z.txt").write_text("nothing here\n")
    assert [guess_benchmark(tmp_path / f) for f in ("x.tsv", "y.csv", "z.txt")] == ["begin", "fade", None]


def _root_from_bundled(tmp_path: Path) -> tuple[Path, Path]:
    """A data root assembled from committed files (the bundled BEGIN, FADE and Factcheck-GPT samples as their
    benchmarks' official files, the VISTA human fixture as the dev set) and an output folder holding the bundled
    FaithDial samples (whose references the BEGIN and FADE builders leave out)."""
    import shutil

    data, out = tmp_path / "data", tmp_path / "out"
    (data / "begin" / "wow").mkdir(parents=True)
    val, train = ((SAMPLES / "begin_wow" / f"begin_{s}_wow.tsv").read_bytes().decode().split("\r\n")
                  for s in ("validation", "train"))
    (data / "begin" / "wow" / "begin_dev_wow.tsv").write_bytes("\r\n".join(val[:-1] + train[1:]).encode())
    for name in ("LICENSE", "NOTICE"):
        shutil.copyfile(SAMPLES / "begin_wow" / name, data / "begin" / "wow" / name)
    (data / "fade" / "data").mkdir(parents=True)
    fval, ftrain = ((SAMPLES / "fade" / f"{s}.csv").read_text(encoding="utf-8") for s in ("validation", "train"))
    (data / "fade" / "data" / "human_verified_500.csv").write_text(fval + ftrain.split("\n", 1)[1], encoding="utf-8")
    shutil.copyfile(SAMPLES / "fade" / "LICENSE", data / "fade" / "LICENSE")
    shutil.copytree(SAMPLES / "factcheck_gpt", data / "factcheck_gpt")
    (data / "vista_human").mkdir()
    shutil.copyfile(ROOT / "tests" / "fixtures" / "vista_human" / "dev.json", data / "vista_human" / "dev.json")
    out.mkdir()
    for name in DEMO_FAITHDIAL:
        shutil.copyfile(SAMPLES / name, out / name)
    return data, out


def test_factcheck_gpt_sample_is_the_benchmark_file_unchanged(tmp_path):
    data, out = _root_from_bundled(tmp_path)
    assert build_main(["build", "factcheck-gpt", "--data", str(data), "--out", str(out)]) == 0
    for name in ("factcheck-GPT-benchmark.jsonl", "LICENSE"):
        assert filecmp.cmp(out / "factcheck_gpt" / name, SAMPLES / "factcheck_gpt" / name, shallow=False)


def test_begin_and_fade_samples_split_whole_dialogues_and_balance_the_training_rows(tmp_path):
    """The BEGIN and FADE builders on a release made of the bundled rows: validation takes whole dialogues up to
    30 (BEGIN) / 20 (FADE) rows a label, training balances the rest by label, nothing is in both, every row is an
    input row unchanged, and the licence files come along. The full rebuild from the official files, byte for
    byte, is bench/benchmark_samples.py (it needs ../shared/data)."""
    import ast
    import csv

    from vista_distill.data.loading import text_key

    data, out = _root_from_bundled(tmp_path)
    assert build_main(["build", "begin", "fade", "--data", str(data), "--out", str(out)]) == 0
    released = (data / "begin" / "wow" / "begin_dev_wow.tsv").read_bytes().decode().split("\r\n")
    header = released[0].split("\t")
    k, m, lab = header.index("knowledge"), header.index("message"), header.index("begin_label")
    split = {}
    for name in ("validation", "train"):
        lines = (out / "begin_wow" / f"begin_{name}_wow.tsv").read_bytes().decode().split("\r\n")
        assert lines[0] == released[0] and lines[-1] == "" and set(lines[1:-1]) <= set(released[1:])
        split[name] = [ln.split("\t") for ln in lines[1:-1]]
    def faithful(rows):
        return sum(r[lab].strip().lower() == "fully attributable" for r in rows)
    assert faithful(split["validation"]) == 30 and len(split["validation"]) == 60
    assert 2 * faithful(split["train"]) == len(split["train"]) > 0
    keys = {name: {text_key(r[m], r[k]) for r in rows} for name, rows in split.items()}
    assert not keys["validation"] & keys["train"]
    assert (out / "begin_wow" / "NOTICE").read_bytes() == (SAMPLES / "begin_wow" / "NOTICE").read_bytes()

    rows = {}
    for name in ("validation", "train"):
        with (out / "fade" / f"{name}.csv").open(encoding="utf-8", newline="") as f:
            rows[name] = list(csv.DictReader(f))
    def halluc(rs):
        return sum(any(t.upper().endswith("-HALLUC") for t in ast.literal_eval(r["hallucination_tags"])) for r in rs)
    assert len(rows["validation"]) == 40 and halluc(rows["validation"]) == 20
    assert 2 * halluc(rows["train"]) == len(rows["train"]) > 0
    assert not {r["dialogue_id"] for r in rows["validation"]} & {r["dialogue_id"] for r in rows["train"]}
    assert (out / "fade" / "LICENSE").exists()


def test_build_names_a_missing_data_root(tmp_path, capsys):
    assert build_main(["build", "begin", "--data", str(tmp_path / "none")]) == 2
    assert "data fetch" in capsys.readouterr().err


def test_faithdial_scope_sample_keeps_generic_and_abstaining_responses_off_held_out_references(tmp_path):
    """The scope builder on a data-audit release written here: a Generic response is one OUT-OF-SCOPE claim, an
    abstaining hallucinated one an ABSTENTION claim and the rest LACKING EVIDENCE; left out are plain Entailment,
    Uncooperative, and responses whose reference is one of the balanced sample (the demo's test), of BEGIN-WoW's
    file or of vista_human dev."""
    import csv

    from vista_distill.data.benchmarks.faithdial.sample import SCOPE_FILE, build_scope
    from vista_distill.data.io import read_conversations

    data, out = _root_from_bundled(tmp_path)
    test_ref = next(t.reference for c in read_conversations(out / "faithdial_balanced_sample.jsonl") for t in c.turns
                    if t.reference)
    begin = (data / "begin" / "wow" / "begin_dev_wow.tsv").read_bytes().decode().split("\r\n")
    begin_ref = begin[1].split("\t")[begin[0].split("\t").index("knowledge")]
    fresh = "Jazz is a music genre that originated in New Orleans."
    rows = [(fresh, "do you like jazz?", "Do you like jazz?", "Generic"),
            (fresh, "who invented it?", "I do n't know , but it was invented in 1990 .", "Hallucination"),
            (fresh, "where is it from?", "It is from New Orleans.", "Entailment"),
            (fresh, "what else?", "I'm not sure, but it is from New Orleans.", "Uncooperative"),
            (test_ref, "hi", "Sure!", "Generic"),
            (begin_ref, "hi", "Ok!", "Generic")]
    gold = data / "faithdial" / "data-audit" / "gold"
    gold.mkdir(parents=True)
    with (gold / "extra.csv").open("w", encoding="utf-8", newline="") as f:   # ids unlike the bundled rows
        w = csv.writer(f)
        w.writerow(["evidence", "history", "response", "BEGIN", "VRM"])
        w.writerows([*r, "Question"] for r in rows)
    said = build_scope(data / "faithdial" / "data-audit", data, out)
    picked = read_conversations(out / SCOPE_FILE)
    assert [[(c.text, c.label) for c in conv.turns[-1].gold_claims] for conv in picked] == [
        [("Do you like jazz?", "OUT-OF-SCOPE")],
        [("I do n't know", "ABSTENTION"), ("it was invented in 1990 .", "LACKING EVIDENCE")]]
    assert said.startswith(f"{SCOPE_FILE}: 2 responses, claims OUT-OF-SCOPE 1, ABSTENTION 1, other 1")
    assert {conv.meta["file"] for conv in picked} == {"data-audit/gold/extra.csv"}
