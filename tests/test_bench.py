"""A smoke test of every maintained benchmark (bench/*.py), as bench/README.md documents it.

Parse-checked, every script: each command of its README section runs with ``ArgumentParser.parse_args`` patched to
stop right after a successful parse (the documented flags match the real parser; module-level imports load against
today's package), and every name a script imports from the package inside its functions must resolve; harness.py,
a library, is imported. Real runs on the embedded SmolLM2-135M, tiny inputs, outputs under tmp_path: hardware.py,
profile_scorer.py (prefill-bound measurement shrunk) and score_throughput.py (untrained stage adapters),
train_throughput.py (the bundled sample's labels-teacher silver data), gpu_check.py (every part
on a 2-layer random Qwen3-8B, the NF4 halves skipped; and its --dry-run's wheels). Parse-checked only:
demo_protocol / world_protocol (hours of CPU), server_student / distill_teacher (a vLLM or llama.cpp server),
benchmark_samples / vista_human_dev (../shared/data, a demo run), fresh_clone (a fresh clone, minutes).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
README = BENCH / "README.md"
LIBRARIES = {"harness.py", "figures.py"}   # imported, not run as a benchmark (figures.py: tests/test_figures.py)
VISTA_DEV = ROOT / "tests" / "fixtures" / "vista_human" / "dev.json"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
MARKER = "BENCH-ARGS-PARSED"
# runs sys.argv[1] as `python bench/X.py ARGS` would (its folder first on sys.path), stopping after the outermost
# successful parse (parse_args, or parse_known_args called directly; a subparser's nested parse does not stop it)
PARSE_ONLY = f"""
import argparse, runpy, sys
P, depth = argparse.ArgumentParser, [0]
_args, _known = P.parse_args, P.parse_known_args
def done(): print({MARKER!r}, flush=True); raise SystemExit(0)
def parse_args(self, *a, **k): depth[0] += 1; _args(self, *a, **k); done()
def parse_known_args(self, *a, **k):
    depth[0] += 1; out = _known(self, *a, **k); depth[0] -= 1
    if not depth[0]: done()
    return out
P.parse_args, P.parse_known_args = parse_args, parse_known_args
sys.argv = sys.argv[1:]
sys.path.insert(0, sys.argv[0].rpartition('/')[0])
runpy.run_path(sys.argv[0], run_name='__main__')
"""


def readme_commands() -> dict[str, list[list[str]]]:
    """``{script: [argv, ...]}``: the commands of each ``## X.py`` section's bash block, continuations joined,
    comments dropped, ``&&`` chains split."""
    out = {}
    for m in re.finditer(r"^## (\S+\.py)\n(.*?)(?=^## |\Z)", README.read_text(), re.M | re.S):
        block = re.search(r"```bash\n(.*?)```", m.group(2), re.S)
        cmds: list[list[str]] = []
        for line in (block.group(1) if block else "").replace("\\\n", " ").splitlines():
            cur: list[str] = []
            for word in [*shlex.split(line, comments=True), "&&"]:
                if word != "&&":
                    cur.append(word)
                elif cur:
                    cmds.append(cur)
                    cur = []
        out[m.group(1)] = cmds
    return out


def run(argv: list[str], timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=timeout)


def parse_only(script: str, args: list[str]) -> subprocess.CompletedProcess:
    return run(["-c", PARSE_ONLY, f"bench/{script}", *args], timeout=300)


def test_bench_readme_names_every_script():
    commands = readme_commands()
    scripts = sorted(p.name for p in BENCH.glob("*.py"))
    documented = [s for s in scripts if s not in LIBRARIES]
    assert len(documented) <= 15, documented
    assert sorted(commands) == documented, "every bench script, and only those, has a README section"
    for script, cmds in commands.items():
        assert cmds, f"## {script} has no command"
        for cmd in cmds:
            assert cmd[:2] == ["python", f"bench/{script}"], f"## {script}: {shlex.join(cmd)}"
    for lib in LIBRARIES:
        assert f"`{lib}`" in README.read_text()
    results = [p for p in (BENCH / "results").rglob("*") if p.is_file()]
    assert len(results) <= 64, f"{len(results)} files under bench/results/"


@pytest.mark.parametrize("script,args", [(s, c[2:]) for s, cmds in readme_commands().items() for c in cmds],
                         ids=lambda v: v if isinstance(v, str) else " ".join(v)[:40])
def test_each_documented_command_parses(script, args):
    proc = parse_only(script, args)
    assert proc.returncode == 0 and MARKER in proc.stdout, f"{script} {shlex.join(args)}:\n{proc.stderr[-3000:]}"


def test_the_parse_check_fails_on_an_unknown_flag():
    proc = parse_only("hardware.py", ["--threads", "1", "--no-such-flag"])
    assert proc.returncode != 0 and MARKER not in proc.stdout
    assert "unrecognized arguments: --no-such-flag" in proc.stderr
    proc = parse_only("demo_protocol.py", ["no-such-step"])
    assert proc.returncode != 0 and "invalid choice" in proc.stderr


def test_every_package_import_in_bench_resolves():
    """The names each script imports from the package inside its functions (after the parse), e.g. a renamed
    helper: what the parse check cannot see for the scripts that are not run here."""
    import ast
    import importlib

    missing, checked_names = [], 0
    for path in sorted(BENCH.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "vista_distill":
                pairs = [(node.module, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                pairs = [(a.name, None) for a in node.names if a.name.split(".")[0] == "vista_distill"]
            else:
                continue
            for module, name in pairs:
                checked_names += 1
                try:
                    found = importlib.import_module(module)
                    assert name is None or hasattr(found, name) or importlib.import_module(f"{module}.{name}")
                except (ImportError, AssertionError) as err:
                    missing.append(f"{path.name}:{node.lineno}: {module} {name or ''} ({err})")
    assert checked_names > 50 and not missing, "\n".join(missing)


def _path_edits(path: Path) -> list[str]:
    """Where a script changes ``sys.path`` (a call on it or an assignment to it)."""
    import ast

    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        target = node.func if isinstance(node, ast.Call) else node.targets[0] if isinstance(node, ast.Assign) else None
        text = ast.unparse(target) if target is not None else ""
        if text.startswith("sys.path"):
            out.append((node.lineno, f"{path.name}:{node.lineno}: {text}"))
    return [text for _, text in sorted(out)]


def test_bench_imports_the_installed_package_and_edits_no_sys_path(tmp_path):
    """A script's own folder is on ``sys.path`` when run as ``python bench/X.py``, and the package is installed: no
    script edits the path. The check can fail: an insertion written into a script is found."""
    assert not [e for p in sorted(BENCH.glob("*.py")) for e in _path_edits(p)]
    probe = tmp_path / "probe.py"
    probe.write_text("import sys\nsys.path.insert(0, 'x')\nsys.path = []\n")
    assert _path_edits(probe) == ["probe.py:2: sys.path.insert", "probe.py:3: sys.path"]


def _over_limits(path: Path, lines: int = 80, params: int = 8) -> list[str]:
    """The functions of a script over the product's limits: more than ``lines`` lines or ``params`` parameters
    (``self`` and ``cls`` not counted; ``*args`` and ``**kwargs`` one each)."""
    out = []
    for n in ast.walk(ast.parse(path.read_text())):
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = n.args
        names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)] + [x.arg for x in (a.vararg, a.kwarg) if x]
        count = len(names) - (names[:1] in (["self"], ["cls"]))
        if n.end_lineno - n.lineno + 1 > lines or count > params:
            out.append(f"{path.name}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines, {count} parameters)")
    return out


def test_bench_functions_stay_within_the_products_limits(tmp_path):
    """No bench function over 80 lines or 8 parameters; the check can fail on either."""
    assert not [f for p in sorted(BENCH.glob("*.py")) for f in _over_limits(p)]
    probe = tmp_path / "probe.py"
    probe.write_text("def wide(a, b, c, d, e, f, g, h, *i):\n    pass\n\n\nclass C:\n"
                     "    def ok(self, a, b, c, d, e, f, g, h):\n        pass\n\n\ndef long():\n" + "    x = 1\n" * 80)
    assert _over_limits(probe) == ["probe.py:1 wide (2 lines, 9 parameters)",
                                   "probe.py:10 long (81 lines, 0 parameters)"]


def test_harness_imports():
    proc = run(["-c", "import sys; sys.path.insert(0, 'bench'); import harness; print(harness.ROOT)"], timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == str(ROOT), proc.stderr[-3000:]


@pytest.fixture(scope="module")
def untrained_adapters(tmp_path_factory) -> Path:
    """stage1..3 LoRA adapters with B = 0 (r=8, q_proj/v_proj), untrained."""
    root = tmp_path_factory.mktemp("bench_adapters")
    code = ("import sys, torch; from peft import LoraConfig, get_peft_model; "
            "from transformers import AutoModelForCausalLM; "
            "from vista_distill.backends.model_loading import resolve_model; torch.manual_seed(0)\n"
            "for s in ('stage1', 'stage2', 'stage3'):\n"
            "    get_peft_model(AutoModelForCausalLM.from_pretrained(resolve_model(None)), LoraConfig(r=8, "
            "target_modules=['q_proj', 'v_proj'], task_type='CAUSAL_LM')).save_pretrained(f'{sys.argv[1]}/{s}')")
    proc = run(["-c", code, str(root)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root


def checked(argv: list[str]) -> subprocess.CompletedProcess:
    proc = run(argv)
    assert proc.returncode == 0, f"{shlex.join(argv)}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_hardware_runs(tmp_path):
    checked(["bench/hardware.py", "--threads", "1", "--dtypes", "float32", "--repeats", "1", "--train-repeats", "1",
             "--prefill-shape", "1x8", "--train-shape", "1x8", "--out", str(tmp_path)])
    [js] = tmp_path.glob("hardware_*.json")
    result = json.loads(js.read_text())
    assert [(r["dtype"], r["threads"]) for r in result["rows"]] == [("float32", 1)]
    assert result["rows"][0]["train_tokens_per_s"] > 0 and len(result["gguf"]) == 4
    assert js.with_suffix(".md").read_text().startswith("# Precision x threads")


@pytest.mark.slow
def test_profile_scorer_runs_and_compares(tmp_path, untrained_adapters):
    """The student pipeline on one turn; its prefill-bound measurements (4 x 4 forwards of 8 x 256 tokens, minutes
    on one core) shrunk to one forward of 1 x 16 tokens, the only departure from `python bench/profile_scorer.py`."""
    records = tmp_path / "records"
    argv = ["--adapters", str(untrained_adapters), "--pipelines", "student", "--input", str(VISTA_DEV), "--limit",
            "1", "--threads", "1", "--dtype", "float32", "--no-cprofile", "--records", str(records), "--tag", "smoke",
            "--out", str(tmp_path / "out")]
    shrink = ("import sys; sys.path.insert(0, 'bench'); import profile_scorer as p; "
              "p.forward_throughput.__defaults__ = p.forward_throughput_after_prefix.__defaults__ = (1, 16, 1); "
              "sys.argv = ['bench/profile_scorer.py', *sys.argv[1:]]; p.main()")
    checked(["-c", shrink, *argv])
    [js] = (tmp_path / "out").glob("profile_scorer_*_smoke.json")
    out = json.loads(js.read_text())
    assert out["conversations"] == 1 and [p["pipeline"] for p in out["pipelines"]] == ["student"]
    assert out["pipelines"][0]["scored_turns"] == 1 and out["pipelines"][0]["floor"]["floor_s_per_turn"] > 0
    assert js.with_suffix(".md").read_text().startswith("# In-process scorer")
    [rec] = [json.loads(line) for line in (records / "student.jsonl").read_text().splitlines()]
    assert rec["scored"] and rec["conversation_id"] == "BEGIN-1" and "safe" in rec["verdicts"]
    after = tmp_path / "after"  # the same turn with its safe verdict flipped: --compare must count it
    after.mkdir()
    rec["verdicts"]["safe"] = f"not {rec['verdicts']['safe']}"
    (after / "student.jsonl").write_text(json.dumps(rec) + "\n")
    compared = json.loads(checked(["bench/profile_scorer.py", "--compare", str(records), str(after)]).stdout)
    student = compared["pipelines"]["student"]
    assert (student["turns"], student["same_claims"], student["same_verdict"]["safe"]) == (1, 1, 0)


@pytest.mark.slow
def test_score_throughput_runs(tmp_path, untrained_adapters):
    report = tmp_path / "score_throughput.md"
    checked(["bench/score_throughput.py", "--adapters", str(untrained_adapters), "--configs", "batched",
             "--input", str(VISTA_DEV), "--limit", "1", "--dtype", "float32", "--threads", "1", "--out", str(report)])
    result = json.loads(report.with_suffix(".json").read_text())
    assert result["limit"] == 1 and list(result["runs"]) == ["batched"]
    assert result["runs"]["batched"]["facts"]["scored_turns"] == 1
    assert report.read_text().startswith("# Scoring throughput: student pipeline")


@pytest.mark.slow
def test_train_throughput_runs(tmp_path):
    from helpers import distill_sample

    silver = distill_sample(tmp_path / "silver")
    out = tmp_path / "train_throughput.md"
    small = "train.per_device_train_batch_size=2;train.micro_batch_size=2;train.max_length=384;student.dtype=float32"
    checked(["bench/train_throughput.py", "--recipe", "recipes/demo-cpu.yaml", "--silver", str(silver),
             "--stage", "stage1", "--steps", "1", "--warmup", "1", "--variant", f"small={small}",
             "--output", str(out)])
    [row] = json.loads(out.with_suffix(".json").read_text())
    assert row["variant"] == "small" and row["batch"] == 2 and row["max_length"] == 384
    assert row["tokens_per_s"] > 0 and row["dtype"] == "float32"
    assert "| small |" in out.read_text()


def test_fresh_clone_names_the_cpu_kind_reads_pytest_and_finds_the_main_command():
    sys.path.insert(0, str(BENCH))
    import fresh_clone

    amx = "model name\t: Intel(R) Xeon(R) Processor @ 2.1GHz\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
    avx2 = "model name\t: AMD EPYC 7B12\nflags\t\t: fma avx2 f16c\n"
    assert fresh_clone.cpu(amx) == ("intel-xeon-amx", "Intel Xeon")
    assert fresh_clone.cpu(avx2) == ("amd-epyc-avx2", "AMD EPYC")
    assert fresh_clone.cpu(avx2.replace("avx2", "avx2 avx512_bf16"))[0] == "amd-epyc-avx512bf16"
    log = "....\n===== 823 passed, 2 skipped in 1086.21s (0:18:06) =====\n"
    assert fresh_clone.pytest_counts(log) == {"passed": 823, "failed": 0, "skipped": 2, "error": 0,
                                              "pytest_minutes": 18.1}
    assert fresh_clone.pytest_counts("1 failed, 3 passed in 6.00s")["failed"] == 1
    assert fresh_clone.main_command(ROOT / "README.md").endswith("vista-distill demo")


CPU_CHECK = ["--layers", "2", "--hidden", "64", "--turns", "4", "--rows", "2", "--tokens", "8", "--steps", "1",
             "--threads", "1", "--train-override",
             "train.max_length=256;train.per_device_train_batch_size=2;train.use_cpu=true"]


@pytest.mark.slow
def test_gpu_check_runs_every_part_on_a_cpu(tmp_path):
    """bench/gpu_check.py end to end on a 2-layer, 64-wide Qwen3-8B at random weights: every part in its own
    process, one result file with each part's status and figures (the NF4 halves skipped: they need CUDA)."""
    proc = checked(["bench/gpu_check.py", *CPU_CHECK, "--work", str(tmp_path / "work"), "--out", str(tmp_path)])
    [js] = tmp_path.glob("cpu-*.json")
    assert str(js) in proc.stdout
    r = json.loads(js.read_text())
    assert r["arch"] == "qwen3-8b" and "shrunk: layers=2, hidden=64" in r["model"] and r["total_s"] > 0
    parts = r["parts"]
    assert list(parts) == ["train", "score", "decode", "generate_batch"]
    lora, qlora = parts["train"]["qwen3-8b-lora-80gb"], parts["train"]["qwen3-8b-qlora-24gb"]
    assert lora["status"] == "ok" and lora["result"]["tokens_per_s"] > 0 and lora["result"]["batch"] == 2
    assert lora["estimate"]["measured_shape_gib"] > 0 and lora["silver"]["tokens_max"] <= 256
    assert qlora["status"] == "skipped: needs CUDA (bitsandbytes NF4)" and qlora["estimate"]["recipe_gib"] > 0
    bf16, nf4 = parts["score"]["bf16"], parts["score"]["nf4"]
    assert bf16["status"] == "ok" and bf16["scored_turns"] >= 4 and bf16["s_per_turn"] > 0
    assert bf16["bound_s_per_turn"] > 0 and {"stage1", "stage2"} <= set(bf16["per_stage"])
    assert set(bf16["bound_at_context"]) == set(bf16["per_stage"])
    assert nf4["status"].startswith("skipped: needs CUDA")
    dec = parts["decode"]
    assert dec["status"] == "ok" and dec["weights_stream_ms"] is None   # the bandwidth is a GPU's copy
    assert [s["setting"].split(" (")[0] for s in dec["settings"]] == [
        "eager, float32 adapters", "eager, bf16 adapters", "CUDA graphs, bf16 adapters",
        "CUDA graphs, adapter merged", "CUDA graphs, base model"]
    assert all(s["ms_per_step"] > 0 and s["decode_steps"] > 0 for s in dec["settings"])
    gb = parts["generate_batch"]
    assert gb["status"] == "ok" and gb["same_text"] == 2 and gb["generate_batch_s"] > 0 and gb["slot_s"] > 0
    assert all(p["part_s"] > 0 for p in parts.values())
    again = checked(["bench/gpu_check.py", *CPU_CHECK, "--work", str(tmp_path / "work"), "--out", str(tmp_path),
                     "--parts", "decode"])
    r2 = json.loads(js.read_text())
    assert str(js) in again.stdout and r2["reused"] and r2["earlier_commands"] == [r["command"]]
    assert list(r2["parts"]) == list(parts) and r2["parts"]["train"] == parts["train"]


def test_gpu_check_dry_run_lists_the_wheels_within_64_mib(tmp_path):
    proc = checked(["bench/gpu_check.py", "--dry-run", "--wheels", str(tmp_path)])
    out = json.loads(proc.stdout)
    assert [w["name"] for w in out["wheels"]] == ["trl", "datasets", "bitsandbytes"]
    assert sorted(p.name for p in tmp_path.glob("*.whl")) == sorted(w["wheel"] for w in out["wheels"])
    total = sum(p.stat().st_size for p in tmp_path.glob("*.whl"))
    assert out["within_limit"] and total <= 64 * 2**20 and abs(out["total_mib"] - total / 2**20) < 0.01
    assert [c.split(" && ")[0] for c in out["commands"]] == [f"pip install --no-deps {tmp_path}/*.whl"] * 2
    assert [c.rsplit("--parts ", 1)[1] for c in out["commands"]] == ["train,score", "decode,generate_batch"]
