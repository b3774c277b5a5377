"""One home per benchmark (data/benchmarks/): each module declares its loader, its fetch entry and, where the
project bundles a sample, the function that rebuilds it; the bundled samples are what those functions make."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest
from vista_distill.data.benchmarks import BENCHMARKS, MODULES, fetch_sources, guess_benchmark
from vista_distill.data.benchmarks.__main__ import main as build_main
from vista_distill.data.benchmarks.samples import SAMPLES
from vista_distill.data.download import fetch

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


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


@pytest.mark.skipif(not (SHARED / "faithdial" / "data-audit").is_dir(), reason="needs ../shared/data beside the clone")
def test_build_sample_rebuilds_every_bundled_sample_byte_for_byte(tmp_path, capsys):
    assert build_main(["build", "--data", str(SHARED), "--out", str(tmp_path)]) == 0
    made = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert len(made) == 13 and "begin_wow/begin_train_wow.tsv" in made
    different = [f for f in made if not filecmp.cmp(tmp_path / f, SAMPLES / f, shallow=False)]
    assert not different
    assert "137 faithful + 137 of 383 hallucinated" in capsys.readouterr().out


def test_build_names_a_missing_data_root(tmp_path, capsys):
    assert build_main(["build", "begin", "--data", str(tmp_path / "none")]) == 2
    assert "data fetch" in capsys.readouterr().err
