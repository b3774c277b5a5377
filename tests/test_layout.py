"""The package's shape (docs/layout.md): the root holds the public API and entry points only, no module is over
450 lines (the paper's verbatim prompts excepted), no function over 80 lines nor over 8 parameters, and imports point
down the layers: a package imports only from packages below it, except inside ``if TYPE_CHECKING:`` (annotations);
the scoring path (``scorer.py``, ``scoring/``) imports nothing from ``eval/``, and the product imports nothing from
``testing/`` (the test servers)."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# lowest first; a package may import from the ones before it (check, publish, distill, train and eval from all);
# testing (servers on 127.0.0.1 for tests and benchmarks) above them all: nothing in the product imports it
LAYERS = [
    "runtime",
    "data",
    "pipeline",
    "backends",
    "config",
    "scoring",
    "publish",
    "check",
    "distill",
    "train",
    "eval",
    "testing",
]
TOP = {"check", "publish", "distill", "train", "eval", "testing"}
ALLOWED_TOP = {"check": {"train"}, "distill": {"publish"}, "train": {"publish"}}   # top-level peers they use


def _package_modules() -> list[Path]:
    return [p for p in ROOT.rglob("*.py") if p.relative_to(ROOT).parts[0] in LAYERS]


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for sub in ast.walk(node):
                if hasattr(sub, "lineno"):
                    lines.add(sub.lineno)
    return lines


def _imported_packages(path: Path, rel: tuple[str, ...] | None = None) -> list[tuple[str, int]]:
    rel = rel or path.relative_to(ROOT).parts
    tree = ast.parse(path.read_text())
    skip = _type_checking_lines(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.lineno in skip:
            continue
        if node.level:
            base = list(rel[:-1])[: len(rel) - node.level]
            target = base + (node.module.split(".") if node.module else [])
        elif node.module and node.module.startswith("vista_distill."):
            target = node.module.split(".")[1:]
        else:
            continue
        if target and target[0] in LAYERS:
            out.append((target[0], node.lineno))
    return out


def test_the_package_root_holds_the_public_api_and_entry_points_only():
    assert sorted(p.name for p in ROOT.glob("*.py")) == ["__init__.py", "__main__.py", "cli.py", "demo.py", "scorer.py"]


def test_no_module_over_450_lines():
    long = {str(p.relative_to(ROOT)): n for p in _package_modules()
            if (n := len(p.read_text().splitlines())) > 450 and p.name != "paper_prompts.py"}
    assert not long


MAX_FUNCTION_LINES = 80


def _long_functions(path: Path, bound: int = MAX_FUNCTION_LINES) -> list[str]:
    tree = ast.parse(path.read_text())
    return [f"{path.name}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)" for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > bound]


def test_no_function_over_80_lines():
    modules = _package_modules() + [ROOT / name for name in ("cli.py", "demo.py", "scorer.py")]
    assert not [f for p in modules for f in _long_functions(p)]


def test_the_function_length_check_sees_a_long_function(tmp_path):
    """The check above can fail: a function of 81 lines is found, one of 80 is not."""
    probe = tmp_path / "probe.py"
    probe.write_text("def long():\n" + "    x = 1\n" * 80 + "\n\ndef short():\n" + "    x = 1\n" * 79)
    assert _long_functions(probe) == ["probe.py:1 long (81 lines)"]


MAX_PARAMETERS = 8


def _parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Positional, keyword-only, ``*args`` and ``**kwargs`` each count one; a method's ``self`` or ``cls`` none."""
    a = node.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return len(names) - (names[:1] in (["self"], ["cls"])) + (a.vararg is not None) + (a.kwarg is not None)


def _wide_functions(path: Path, bound: int = MAX_PARAMETERS) -> list[str]:
    tree = ast.parse(path.read_text())
    return [f"{path.name}:{n.lineno} {n.name} ({k} parameters)" for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and (k := _parameter_count(n)) > bound]


def test_no_function_takes_over_8_parameters():
    """Settings travel as one object (a backend's settings dataclass, the recipe's section that is one), not as a
    long list of keywords; the constructors dataclasses generate are not in the source, so not counted."""
    modules = _package_modules() + [ROOT / name for name in ("cli.py", "demo.py", "scorer.py")]
    assert not [f for p in modules for f in _wide_functions(p)]


def test_the_parameter_check_sees_a_wide_function(tmp_path):
    """The check above can fail: a function of 9 parameters is found (``*args`` and ``**kwargs`` count), one of 8 is
    not, nor a method of 8 besides ``self``."""
    probe = tmp_path / "probe.py"
    probe.write_text("def wide(a, b, /, c, *args, d, e=1, f=2, g=3, **kw):\n    pass\n\n\n"
                     "def fits(a, b, c, d, *, e, f, g, h):\n    pass\n\n\n"
                     "class C:\n    def method(self, a, b, c, d, e, f, g, h):\n        pass\n")
    assert _wide_functions(probe) == ["probe.py:1 wide (9 parameters)"]


def _imports_of(package: str, modules: list[Path]) -> list[str]:
    """Where ``modules`` (package modules or the root's) import from ``package``, outside ``if TYPE_CHECKING:``."""
    return [f"{p.relative_to(ROOT)}:{line}" for p in modules
            for target, line in _imported_packages(p, (p.name,) if p.parent == ROOT else None) if target == package]


def test_the_scoring_path_imports_nothing_from_eval():
    """eval/ consumes the scoring path; nothing below it, and not the public scorer, imports it."""
    below = [p for p in _package_modules() if p.relative_to(ROOT).parts[0] not in ("eval", "testing")]
    assert not _imports_of("eval", below + [ROOT / "scorer.py"])


def test_the_product_imports_nothing_from_testing(tmp_path):
    """testing/ holds the servers the tests and benchmarks start; no package and no root module imports it, and the
    launchers are there, not among the backends. The check can fail: a root module's import of it is found."""
    product = [p for p in _package_modules() if p.relative_to(ROOT).parts[0] != "testing"] + sorted(ROOT.glob("*.py"))
    assert not _imports_of("testing", product)
    launchers = {"loopback.py", "llama_server.py", "vllm_server.py"}
    assert launchers <= {p.name for p in (ROOT / "testing").glob("*.py")}
    assert not launchers & {p.name for p in (ROOT / "backends").glob("*.py")}
    probe = tmp_path / "probe.py"
    probe.write_text("from .testing.llama_server import LlamaServer\n")
    assert _imported_packages(probe, ("cli.py",)) == [("testing", 1)]


def test_imports_point_down_the_layers():
    upward = []
    for path in _package_modules():
        src = path.relative_to(ROOT).parts[0]
        for target, line in _imported_packages(path):
            if target == src or target in ALLOWED_TOP.get(src, set()):
                continue
            if src in TOP and target not in TOP:
                continue
            if LAYERS.index(target) > LAYERS.index(src):
                upward.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not upward, upward


def test_the_layer_check_sees_an_upward_import(tmp_path):
    """The check above can fail: an upward import written into a module is found."""
    bad = tmp_path / "probe.py"
    bad.write_text("from typing import TYPE_CHECKING\nfrom ..eval.report import render_markdown\n"
                   "if TYPE_CHECKING:\n    from ..config import Recipe\n")
    assert _imported_packages(bad, ("data", "probe.py")) == [("eval", 2)]


def _test_module_imports(path: Path) -> list[str]:
    """Where a file of tests/ imports a test module or conftest (tests share code through ``helpers`` only)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        for name in names:
            top = name.split(".")[0]
            if top.startswith("test_") or top == "conftest":
                out.append(f"{path.name}:{node.lineno} imports {top}")
    return out


def test_no_test_module_imports_another():
    """A change in one test file breaks no other: shared helpers live in ``tests/helpers.py``, fixtures in
    ``conftest.py``."""
    tests = sorted((ROOT / "tests").glob("*.py"))
    assert len(tests) > 40 and not [hit for p in tests for hit in _test_module_imports(p)]


def test_the_test_import_check_sees_a_test_module_import(tmp_path):
    """The check above can fail: a test module importing another, or conftest, inside a function or not, is found."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import os\nfrom helpers import SAMPLE\nfrom conftest import ROOT\n\n\ndef f():\n"
        "    from test_train import distill_sample\n    import test_eval_report\n"
    )
    assert _test_module_imports(probe) == [
        "test_probe.py:3 imports conftest",
        "test_probe.py:7 imports test_train",
        "test_probe.py:8 imports test_eval_report",
    ]


# Wording of a work log: the periods the product was written in and their order. The product says what is and why;
# bench/results notes date their runs and name their commits.
WORK_LOG = re.compile(r"\b(?:sessions?|(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|"
                      r"\d+(?:st|nd|rd|th)) (?:stop|iteration|round of work)|stop \d+)\b", re.IGNORECASE)
TECHNICAL = re.compile(r"start_new_session|requests\.Session|ClientSession|\.Session\(")


def _work_log_lines(path: Path) -> list[str]:
    return [f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{i}: {line.strip()[:80]}"
            for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
            if WORK_LOG.search(TECHNICAL.sub("", line))]


def test_no_work_log_wording():
    """Code, recipes, docs and the README speak of the product as it is (bench/results/ holds dated run notes)."""
    skip = {".venv", "tests", ".git", "build", "runs", "checkpoints", "results", "__pycache__"}
    files = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip and not d.startswith(".") and not d.endswith(".egg-info")]
        files += [Path(folder) / n for n in names if n.endswith((".py", ".md", ".yaml", ".toml"))]
    assert not [hit for p in files for hit in _work_log_lines(p)]


def test_the_work_log_check_sees_a_period_of_work(tmp_path):
    """The check above can fail: a period label is found, a process session is not."""
    probe = tmp_path / "probe.md"
    probe.write_text("Added in the sixth session.\nsubprocess.Popen(cmd, start_new_session=True)\nAs of stop 12.\n")
    assert [h.split(": ", 1)[0] for h in _work_log_lines(probe)] == ["probe.md:1", "probe.md:3"]


def test_pyproject_lists_every_package():
    import tomllib

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    data = tool["package-data"]
    listed = set(tool["packages"]) - set(data)
    found = {"vista_distill"} | {"vista_distill." + ".".join(p.parent.relative_to(ROOT).parts)
                                 for p in ROOT.rglob("__init__.py") if p.relative_to(ROOT).parts[0] in LAYERS}
    assert found == listed
    # data folders are packages of their own (setuptools drops unlisted ones): every folder of the shipped data
    # is listed, and each listed one ships files
    folders = {"vista_distill." + ".".join(d.relative_to(ROOT).parts)
               for top in ("data/samples", "recipes") for d in [ROOT / top, *(ROOT / top).rglob("*")] if d.is_dir()}
    assert folders == set(data) <= set(tool["packages"])
    for name, globs in data.items():
        folder = ROOT.joinpath(*name.split(".")[1:])
        assert any(f.is_file() for g in globs for f in folder.glob(g)), name


def _third_party_imports(source: str, local: set[str]) -> set[str]:
    """Top-level names of the modules ``source`` imports that are neither the standard library nor ``local``."""
    import sys

    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in local}


def _declared_distributions() -> set[str]:
    import re

    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"]) + [d for extra in project["optional-dependencies"].values() for d in extra]
    return {re.split(r"[\[<>=!~ ;]", s, maxsplit=1)[0].lower().replace("_", "-") for s in specs}


def test_every_third_party_import_is_declared():
    """Each module the package imports from outside it is installed by pyproject.toml: a dependency or the extra
    that guards it, not something another package happens to pull in."""
    from importlib.metadata import packages_distributions

    local = {"vista_distill", *(p.stem for p in (ROOT / "train").glob("_*.py"))}  # train/'s scripts import their helper
    dists = packages_distributions()
    declared = _declared_distributions()

    def undeclared(source: str) -> set[str]:
        return {m for m in _third_party_imports(source, local)
                if not {d.lower().replace("_", "-") for d in dists.get(m, [m])} & declared}

    files = [p for p in ROOT.rglob("*.py") if p.relative_to(ROOT).parts[0] not in ("tests", "bench", "build")
             and not any(part.startswith(".") or part.endswith(".egg-info") for part in p.relative_to(ROOT).parts)]
    missing = {f"{p.relative_to(ROOT)}: {m}" for p in files for m in undeclared(p.read_text())}
    assert not missing, sorted(missing)
    # the check can fail: an import of an installed package that pyproject.toml does not name
    assert undeclared("import pluggy\nfrom rich.table import Table\nimport os") == {"pluggy"}


# A commit id of this repository belongs in a bench/results file (where a figure was measured), not in the product's
# text: the README, docs/, recipes, code and the benchmark scripts say what is, not when it changed.
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")


def _commit_ids(text: str) -> list[str]:
    """The words of ``text`` that name a commit of this repository (``git cat-file`` resolves them)."""
    import subprocess

    candidates = sorted({w for w in HEX.findall(text) if re.search(r"[a-f]", w) and re.search(r"[0-9]", w)})
    if not candidates:
        return []
    r = subprocess.run(["git", "cat-file", "--batch-check"], input="\n".join(candidates) + "\n", cwd=ROOT,
                       capture_output=True, text=True, check=True)
    return [w for w, line in zip(candidates, r.stdout.splitlines()) if line.split()[1:2] == ["commit"]]


def _product_text_files() -> list[Path]:
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "recipes").rglob("*.yaml"),
             *(ROOT / "bench").glob("*.py"), ROOT / "bench" / "README.md", *ROOT.glob("*.py")]
    files += [p for layer in LAYERS for p in (ROOT / layer).rglob("*.py")]
    return [p for p in files if p.is_file()]


def test_no_commit_id_of_this_repository_in_the_product():
    assert (ROOT / ".git").exists(), "this check reads the repository's history: run the tests in a git clone"
    hits = {str(p.relative_to(ROOT)): ids for p in _product_text_files() if (ids := _commit_ids(p.read_text()))}
    assert not hits, hits


def test_the_commit_id_check_sees_a_commit(tmp_path):
    """The check above can fail: this repository's HEAD, short or long, is found; other hex words are not."""
    import subprocess

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    # the shortest abbreviation of 7+ characters that holds a letter and a digit, as the check reads ids
    short = next(head[:n] for n in range(7, 41) if re.search(r"[a-f]", head[:n]) and re.search(r"[0-9]", head[:n]))
    text = f"Measured at {short} (full id {head}); upstream pin 0123abc4567def; colour #a1b2c3d."
    assert _commit_ids(text) == sorted([short, head])


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the product modules it imports, at any level (inside functions too; not under ``if
    TYPE_CHECKING:``), for every module under ``root`` but the tests and benchmarks. ``from . import x`` counts as
    an import of ``x`` where ``x`` is a module, else of the package."""
    paths = [p for p in root.rglob("*.py") if p.relative_to(root).parts[0] not in ("tests", "bench", ".venv")]
    names = {_module_name(p, root): p for p in paths}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_lines(tree)
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps: set[str] = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.lineno in skip:
                continue
            if node.level:
                base = package[: len(package) - node.level + 1]
            elif node.module and node.module.split(".")[0] == "vista_distill":
                base = []
            else:
                continue
            module = ".".join(base + (node.module.split(".") if node.module else []))
            module = module.removeprefix("vista_distill.").removeprefix("vista_distill")
            for alias in node.names:
                sub = f"{module}.{alias.name}" if module else alias.name
                deps.add(sub if sub in names else module)
        graph[name] = {d for d in deps if d in names and d != name}
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (modules in order, the first again at the end), or None."""
    from graphlib import CycleError, TopologicalSorter

    try:
        TopologicalSorter(graph).prepare()
    except CycleError as e:
        return list(e.args[1])
    return None


def test_no_import_cycle_at_any_level():
    """No module imports, directly or through others, one that imports it: within a package and inside functions
    too."""
    assert import_cycle(import_graph(ROOT)) is None


def test_the_cycle_check_sees_a_cycle_inside_one_package_and_inside_a_function(tmp_path):
    pkg = tmp_path / "eval"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "report.py").write_text("from .format import pct\n")
    (pkg / "format.py").write_text("def pct():\n    from .report import table\n")
    (pkg / "rules.py").write_text("from . import format\n")
    graph = import_graph(tmp_path)
    assert graph["eval.rules"] == {"eval.format"} and graph["eval.format"] == {"eval.report"}
    assert set(import_cycle(graph)) == {"eval.report", "eval.format"}
    (pkg / "format.py").write_text("def pct():\n    return 1\n")
    assert import_cycle(import_graph(tmp_path)) is None


def _percent_formatting(path: Path) -> list[str]:
    """Where an f-string formats ``100 * x`` itself (a percentage written again, not runtime/numbers.py's)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FormattedValue) and isinstance(node.value, ast.BinOp) and \
                isinstance(node.value.op, ast.Mult) and 100 in (getattr(node.value.left, "value", None),
                                                                getattr(node.value.right, "value", None)):
            out.append(f"{path.relative_to(path.parents[1]) if path.parent != ROOT else path.name}:{node.lineno}")
    return out


def test_one_number_formatter_for_every_table(tmp_path):
    """Percentages are formatted in one place (runtime/numbers.py: percent, number, pvalue), for the product's tables
    and the benchmarks' alike. The check can fail: an f-string of ``100 * x`` is found."""
    files = [p for p in [*_package_modules(), *ROOT.glob("*.py"), *(ROOT / "bench").glob("*.py")]
             if p != ROOT / "runtime" / "numbers.py"]
    assert not [hit for p in files for hit in _percent_formatting(p)]
    probe = tmp_path / "pkg" / "probe.py"
    probe.parent.mkdir()
    probe.write_text("def pct(x):\n    return f'{100 * x:.1f}'\n")
    assert _percent_formatting(probe) == ["pkg/probe.py:2"]


# the modules that define the prompts' layout and text: the renderer and the prompts themselves
RENDERER = {"templates.py", "paper_prompts.py", "project_prompts.py"}
_REGEX_CALLS = {"compile", "search", "match", "fullmatch", "split", "findall", "finditer", "sub", "subn"}


def _input_headings() -> set[str]:
    """The headings the renderer puts in the stages' user messages ("REFERENCE TEXT:", "CLAIM:", ...)."""
    from vista_distill.pipeline.protocol import Fields
    from vista_distill.pipeline.templates import render_input

    fields = Fields(target="x", history=(("user", "y"),), claim="c", reference="r", background=("b",), evidence=("e",))
    return {line for stage in ("stage1", "stage2", "world") for line in render_input(stage, fields).splitlines()
            if re.fullmatch(r"[A-Z][A-Z ]+:", line)}


def _prompt_reading(path: Path, headings: set[str], regexes: bool = True) -> list[str]:
    """Where a module recovers a request's fields from a rendered prompt: a string holding one of the renderer's
    headings, or (``regexes``) a regular expression over upper-case headings (``^([A-Z][A-Z ]+):``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for heading in sorted(h for h in headings if h in node.value or h[:-1] + "\\n" in node.value):
                found.append(f"{path.name}:{node.lineno} holds {heading!r}")
        if (regexes and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _REGEX_CALLS and getattr(node.func.value, "id", None) == "re" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                and "[A-Z]" in node.args[0].value and ":" in node.args[0].value):
            found.append(f"{path.name}:{node.lineno} parses headings with {node.args[0].value[:40]!r}")
    return sorted(found, key=lambda f: (int(f.split(":")[1].split()[0]), f))


def test_no_backend_or_pipeline_module_reads_a_rendered_prompt_for_its_fields():
    headings = _input_headings()
    assert {"TARGET TURN:", "REFERENCE TEXT:", "CLAIM:", "BACKGROUND KNOWLEDGE:"} <= headings
    modules = [p for p in _package_modules() if p.relative_to(ROOT).parts[0] in ("backends", "pipeline")
               and p.name not in RENDERER]
    # parsing.py reads the model's answers (a list under a "Claims:" header), never a prompt
    assert not [f for p in modules for f in _prompt_reading(p, headings, regexes=p.name != "parsing.py")]


def test_the_prompt_reading_check_sees_a_regex_and_a_heading_search(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('import re\n_REF = re.compile(r"(REFERENCE TEXT:\\n)(.*?)(\\n\\nCLAIM:\\n)")\n'
                     '_FIELD = re.compile(r"^([A-Z][A-Z ()]+):\\n", re.M)\n'
                     'def claim(content):\n    return content.split("CLAIM:\\n")[-1]\n'
                     'def fine(request):\n    return request.fields.claim\n')
    assert _prompt_reading(probe, _input_headings()) == [
        "probe.py:2 holds 'CLAIM:'", "probe.py:2 holds 'REFERENCE TEXT:'",
        "probe.py:3 parses headings with '^([A-Z][A-Z ()]+):\\\\n'", "probe.py:5 holds 'CLAIM:'"]


# The training stack: train/ uses its public names only, so that an upgrade within pyproject.toml's bounds changes
# nothing silently (a private name may change in any release)
TRAINING_LIBRARIES = ("trl", "transformers", "peft", "accelerate")
STRING_ACCESS = {"getattr", "hasattr", "setattr", "delattr"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _library_bindings(tree: ast.AST) -> tuple[set[str], list[str]]:
    """The names ``tree`` binds to a training library's modules or objects, and its imports of private names."""
    bound, hits = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in TRAINING_LIBRARIES:
                    bound.add((a.asname or a.name).split(".")[0])
                    hits += [f"{node.lineno}: import {a.name}"] if any(map(_private, a.name.split("."))) else []
        elif isinstance(node, ast.ImportFrom) and not node.level and \
                (node.module or "").split(".")[0] in TRAINING_LIBRARIES:
            private_module = any(map(_private, node.module.split(".")))
            for a in node.names:
                bound.add(a.asname or a.name)
                if private_module or _private(a.name):
                    hits.append(f"{node.lineno}: from {node.module} import {a.name}")
    return bound, hits


def _root_name(node: ast.AST) -> str | None:
    """``a`` of ``a.b.c`` (None when the chain starts elsewhere than at a name)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _private_library_names(source: str) -> list[str]:
    """Where ``source`` uses a private name of trl, transformers, peft or accelerate: an import of one, an attribute
    of an imported library object (``tu._use_triton``), and in a class deriving from a library class its private
    methods overridden (``def _get_train_sampler``) and attributes read or written (``self._metrics``,
    ``super()._x``); and anywhere, a private name passed as a string to getattr/hasattr/setattr/delattr."""
    tree = ast.parse(source)
    bound, hits = _library_bindings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and _root_name(node.value) in bound:
            hits.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in STRING_ACCESS and len(node.args) > 1 \
                and isinstance(node.args[1], ast.Constant) and _private(str(node.args[1].value)):
            hits.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ClassDef) and any(_root_name(b) in bound for b in node.bases):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(sub.name):
                    hits.append(f"{sub.lineno}: def {sub.name}")
                elif isinstance(sub, ast.Attribute) and _private(sub.attr) and (
                        getattr(sub.value, "id", None) == "self" or
                        (isinstance(sub.value, ast.Call) and getattr(sub.value.func, "id", None) == "super")):
                    hits.append(f"{sub.lineno}: {ast.unparse(sub)}")
    return sorted(set(hits), key=lambda h: int(h.split(":")[0]))


def test_train_uses_no_private_name_of_trl_or_transformers():
    """train/ (the trainer above all) stays on the public surface of TRL, transformers, PEFT and accelerate."""
    hits = {str(p.relative_to(ROOT)): found for p in sorted((ROOT / "train").rglob("*.py"))
            if (found := _private_library_names(p.read_text()))}
    assert not hits, hits


def test_the_private_name_check_sees_each_kind_of_use():
    """The check above can fail: each kind of use in a synthetic trainer is found; public names and a class of
    one's own with private attributes are not."""
    probe = (
        "import trl.trainer.utils as tu\n"                                    # 1
        "from transformers.trainer import _is_peft_model\n"                   # 2
        "from trl import SFTTrainer\n"                                        # 3
        "from peft import PeftModel\n"                                        # 4
        "tu._use_triton = lambda device: True\n"                              # 5
        "class T(SFTTrainer):\n"                                              # 6
        "    def _get_train_sampler(self, dataset=None):\n"                   # 7
        "        return super()._get_train_sampler(dataset)\n"                # 8
        "    def compute_loss(self, model, inputs, **kw):\n"                  # 9
        "        self._metrics['train']['x'].append(1.0)\n"                   # 10
        "        return getattr(self, '_total_train_tokens', 0)\n"            # 11
        "class Mine:\n"                                                       # 12
        "    def _helper(self):\n"                                            # 13
        "        return self._cache, PeftModel.from_pretrained, self.__class__\n"  # 14
    )
    assert _private_library_names(probe) == [
        "2: from transformers.trainer import _is_peft_model", "5: tu._use_triton", "7: def _get_train_sampler",
        "8: super()._get_train_sampler", "10: self._metrics", "11: getattr(self, '_total_train_tokens', 0)"]


def test_the_training_modules_import_trl_only_to_train():
    """``vista_distill`` and the training entry points (train/run.py, the CLI) load neither TRL nor torch on import:
    train/trainer.py, which subclasses TRL's trainer, is imported where a stage is prepared."""
    import subprocess
    import sys

    code = ("import sys, vista_distill, vista_distill.cli, vista_distill.demo, vista_distill.train.run; "
            "print(sorted(m for m in ('torch', 'trl', 'transformers', 'peft') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
