"""Every measured figure in README.md and docs/ is rendered from a result file that is there (bench/figures.py), and
every README under bench/results names only files that are there."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import figures  # noqa: E402  (bench/ is not a package)

# what a measured figure looks like in prose: a percentage, a duration, a size, a rate, a factor, a p-value
FIGURE = re.compile(r"\b\d+(?:[.,]\d+)?\s?%|\b\d+(?:\.\d+)?\s?(?:ms|s|min|minutes|seconds|GiB|GB|MB|MiB|tokens/s|"
                    r"turns/s|GFLOP/s|GB/s|nats)\b|\b\d+(?:\.\d+)?x\b|\bp\s?=\s?\d|\bp\s\d\.\d")
# paths a page or a results README may name that are not files of this repository
ELSEWHERE = ("../shared/", "runs/", "/tmp/", "~/", "http://", "https://", "data/raw/", "$")


def _outside_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines of a page outside its cog blocks and their rendered text."""
    out, inside = [], False
    for i, line in enumerate(text.splitlines(), 1):
        if "[[[cog" in line:
            inside = True
        if not inside:
            out.append((i, line))
        elif "[[[end]]]" in line:
            inside = False
    return out


def test_every_page_is_what_its_result_files_render():
    assert figures.run(check=True) == 0, "a figure differs from its result file: run python bench/figures.py"
    assert figures.cited, "no page rendered a figure"
    assert all(path.is_file() for path in figures.cited)


def test_a_changed_figure_in_a_result_file_fails_the_check_until_the_pages_are_rendered_again(tmp_path):
    assert figures.run(check=True) == 0   # what the pages cite
    results = tmp_path / "results"
    shutil.copytree(figures.RESULTS, results)
    pages = []
    for page in figures._files():
        copy = tmp_path / page.relative_to(ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(page, copy)
        pages.append(copy)
    readme = tmp_path / "README.md"
    before = readme.read_text(encoding="utf-8")
    summary = next(p for p in figures.cited if p.parent.name == "demo_cpu" and p.name in before)
    moved = results / "demo_cpu" / summary.name
    data = json.loads(moved.read_text(encoding="utf-8"))
    data["minutes_with_install"] = 987.6
    moved.write_text(json.dumps(data), encoding="utf-8")
    figures.results_root = results
    try:
        assert figures.run(check=True, pages=pages) != 0          # the page still says the old figure
        assert figures.run(pages=pages) == 0                      # rendered again from the changed file
        assert "987.6" in readme.read_text(encoding="utf-8") and readme.read_text(encoding="utf-8") != before
        assert figures.run(check=True, pages=pages) == 0
        moved.unlink()                                            # a cited file gone: the rendering fails
        with pytest.raises(figures.FigureError, match=f"demo_cpu/{summary.name}: no such result file"):
            figures.run(pages=[readme])
    finally:
        figures.results_root = figures.RESULTS


def test_a_demo_cut_by_a_time_limit_is_never_a_headline(tmp_path):
    (tmp_path / "demo_cpu").mkdir()
    cut = {"full_run": False, "cut": ["stage1: 18 of 64 steps"], "headline": ["student ..."]}
    (tmp_path / "demo_cpu" / "cut.json").write_text(json.dumps(cut), encoding="utf-8")
    (tmp_path / "demo_cpu" / "old.json").write_text(json.dumps({"headline": []}), encoding="utf-8")
    figures.results_root = tmp_path
    try:
        with pytest.raises(figures.FigureError, match=r"cut.json: not a full run \(stage1: 18 of 64 steps\)"):
            figures.demo("cut.json")
        with pytest.raises(figures.FigureError, match="records no steps done and planned"):
            figures.demo("old.json")
    finally:
        figures.results_root = figures.RESULTS


def test_a_missing_key_or_match_names_the_file_and_what_was_sought():
    with pytest.raises(figures.FigureError, match=r"test_command_time.json: no 'runs\[99\]'"):
        figures.js("test_command_time.json", "runs[99]")
    with pytest.raises(figures.FigureError, match="cpu_kinds.md: nothing matches"):
        figures.md("cpu_kinds.md", r"no such text (\d+)")


def test_no_page_types_a_measured_figure_outside_a_rendered_block():
    typed = [f"{page.relative_to(ROOT)}:{i}: {line.strip()}" for page in figures._files()
             for i, line in _outside_blocks(page.read_text(encoding="utf-8")) if FIGURE.search(line)]
    assert not typed, "render these from their result files (bench/figures.py) or remove them:\n" + "\n".join(typed)


def test_the_typed_figure_check_sees_a_typed_figure():
    page = "Plain words.\n<!-- [[[cog fig('x') ]]] -->\n71.6% rendered\n<!-- [[[end]]] -->\nThe student scores 71.6%.\n"
    assert [i for i, line in _outside_blocks(page) if FIGURE.search(line)] == [5]
    assert FIGURE.search("took 18.0 minutes") and FIGURE.search("(p = 0.40)") and FIGURE.search("3.87x faster")
    assert not FIGURE.search("top 8 of 30 layers, 64 steps, stage 2, Qwen3-8B, r: 16")


def _named_paths(text: str) -> list[str]:
    """The file paths a markdown text names: in backticks or as link targets, with a file's extension or a folder."""
    names = re.findall(r"`([^`\s]+)`", text) + re.findall(r"\]\(([^)\s#]+)", text)
    ext = re.compile(r"\.(json|jsonl|md|py|png|csv|tsv|sh|yaml|html|txt)$|/$")
    return [n for n in names if ext.search(n) and not n.startswith(ELSEWHERE) and "<" not in n and "=" not in n]


def _exists(name: str, folder: Path) -> bool:
    for base in (folder, ROOT, ROOT / "bench" / "results", ROOT / "data" / "samples"):
        if any(True for _ in base.glob(name)) if "*" in name else (base / name).exists():
            return True
    return False


def test_every_readme_under_bench_results_names_only_files_that_are_there():
    missing = [f"{readme.relative_to(ROOT)}: {name}" for readme in sorted(figures.RESULTS.rglob("README.md"))
               for name in _named_paths(readme.read_text(encoding="utf-8")) if not _exists(name, readme.parent)]
    assert not missing, "\n".join(missing)


def test_every_result_file_a_page_names_is_there():
    missing = [f"{page.relative_to(ROOT)}: {name}" for page in figures._files()
               for name in _named_paths(page.read_text(encoding="utf-8"))
               if name.startswith("bench/") and not _exists(name, page.parent)]
    assert not missing, "\n".join(missing)


def test_the_missing_file_check_sees_a_missing_file(tmp_path):
    text = "See `held.json`, `gone.json`, [the table](gone/table.md), `runs/demo-cpu/x.json` and `bench/figures.py`."
    (tmp_path / "held.json").write_text("{}")
    assert [n for n in _named_paths(text) if not _exists(n, tmp_path)] == ["gone.json", "gone/table.md"]
