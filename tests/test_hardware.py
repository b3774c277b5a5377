"""Precision and threads chosen from the hardware (runtime/hardware.py), for every device kind, and recorded."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from vista_distill.config import RecipeError, load_recipe
from vista_distill.runtime import hardware
from vista_distill.runtime.hardware import Capability, choose_dtype, choose_threads
from vista_distill.train import hf_configs as sft

ROOT = Path(__file__).resolve().parents[1]

# What torch reports on each kind of device people run this on.
DEVICES = {
    "cuda-ampere": Capability("cuda", "NVIDIA A100", "AVX512", cuda_bf16=True),
    "cuda-turing": Capability("cuda", "Tesla T4", "AVX2", cuda_bf16=False),
    "mps": Capability("mps", "Apple GPU"),
    "cpu-amx": Capability("cpu", "Intel Xeon Platinum 8480+", "AVX512", cpu_amx_tile=True, cpu_avx512_bf16=True),
    "cpu-avx512-bf16": Capability("cpu", "AMD EPYC 9654", "AVX512", cpu_avx512_bf16=True),
    "cpu-avx512": Capability("cpu", "Intel Xeon Gold 6148", "AVX512"),
    "cpu-avx2": Capability("cpu", "AMD EPYC", "AVX2"),
    "cpu-arm": Capability("cpu", "Neoverse-N1", "DEFAULT"),
}
AUTO = {"cuda-ampere": "bfloat16", "cuda-turing": "float16", "mps": "float16", "cpu-amx": "bfloat16",
        "cpu-avx512-bf16": "bfloat16", "cpu-avx512": "float32", "cpu-avx2": "float32", "cpu-arm": "float32"}


@pytest.mark.parametrize("kind", sorted(DEVICES))
def test_auto_precision_follows_the_reported_capability(kind):
    choice = choose_dtype("auto", DEVICES[kind])
    assert choice.dtype == AUTO[kind] and choice.requested == "auto" and choice.native
    assert choice.reason.startswith("auto: ")


@pytest.mark.parametrize("kind", sorted(DEVICES))
def test_explicit_precision_is_honoured(kind):
    for asked, dtype in (("bf16", "bfloat16"), ("float32", "float32"), ("fp16", "float16")):
        choice = choose_dtype(asked, DEVICES[kind])
        assert choice.dtype == dtype and "as requested" in choice.reason


def test_explicit_bf16_on_a_cpu_without_it_warns_once_with_the_cost(caplog):
    cap = DEVICES["cpu-avx2"]
    choice = choose_dtype("bfloat16", cap)
    assert not choice.native
    hardware._warned.discard(("bfloat16", "cpu"))
    with caplog.at_level(logging.WARNING, logger="vista_distill.runtime.hardware"):
        hardware.warn_if_emulated(choice, cap)
        hardware.warn_if_emulated(choice, cap)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "slower than float32" in warnings[0] and "AMD EPYC" in warnings[0]
    assert choose_dtype("bfloat16", DEVICES["cpu-amx"]).native


def test_unknown_precision_names_where():
    with pytest.raises(ValueError, match=r"student.dtype: 'bf17'"):
        choose_dtype("bf17", DEVICES["cpu-avx2"], "student.dtype")


def test_this_machine_is_described_as_torch_reports_it():
    """detect() asks torch itself; auto on this CPU follows those answers (not the CPU's name)."""
    import torch

    cap = hardware.detect("cpu")
    assert cap.device == "cpu" and cap.cpu_capability == torch.backends.cpu.get_cpu_capability()
    assert cap.cpu_amx_tile == torch.cpu._is_amx_tile_supported()
    assert cap.cpu_avx512_bf16 == torch.cpu._is_avx512_bf16_supported()
    native = torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported()
    assert (cap.cpu_bf16_speedup is not None) == native   # measured only where bf16 is native
    faster = native and cap.cpu_bf16_speedup >= 1.0
    assert choose_dtype("auto", cap).dtype == ("bfloat16" if faster else "float32")
    assert cap.name == hardware.cpu_model_name() and cap.name


def test_auto_takes_bf16_only_where_its_matmul_measured_faster():
    """A CPU that reports AVX512-BF16 (or AMX) computes in bf16 under auto only where a bf16 matmul measured at
    least float32's rate; the reason names the measurement. The measurement itself is a real product here."""
    from dataclasses import replace

    slow, fast = (replace(DEVICES["cpu-avx512-bf16"], cpu_bf16_speedup=x) for x in (0.57, 2.4))
    choice = choose_dtype("auto", slow)
    assert choice.dtype == "float32" and "0.57x float32's rate" in choice.reason and choice.native
    assert choose_dtype("auto", fast).dtype == "bfloat16" and "2.4x float32's rate" in choose_dtype("auto", fast).reason
    assert choose_dtype("bfloat16", slow).dtype == "bfloat16"          # an explicit choice is still honoured
    assert choose_dtype("auto", replace(DEVICES["cpu-amx"], cpu_bf16_speedup=0.9)).dtype == "float32"
    x = hardware.bf16_matmul_speedup(tokens=64, repeats=2)
    assert 0 < x < 100


def test_the_bf16_measurement_is_kept_per_machine(tmp_path, monkeypatch):
    """Measured once and kept in the cache folder: a later process reads the kept figure instead of measuring again,
    so training and evaluation (and a second run) choose the same precision."""
    import json

    monkeypatch.setenv("VISTA_DISTILL_CACHE", str(tmp_path))
    hardware.measured_bf16_speedup.cache_clear()
    try:
        first = hardware.measured_bf16_speedup()
        path = tmp_path / hardware.BF16_SPEEDUP_FILE
        kept = json.loads(path.read_text())
        assert list(kept.values()) == [first] and hardware.cpu_model_name() in next(iter(kept))
        path.write_text(json.dumps({k: 0.25 for k in kept}))   # what an earlier process measured
        hardware.measured_bf16_speedup.cache_clear()
        assert hardware.measured_bf16_speedup() == 0.25
        monkeypatch.setenv("VISTA_DISTILL_CACHE", str(path / "not-a-folder"))   # a cache that cannot be written
        hardware.measured_bf16_speedup.cache_clear()
        assert 0 < hardware.measured_bf16_speedup() < 100
    finally:
        hardware.measured_bf16_speedup.cache_clear()


@pytest.mark.parametrize("requested,cores,load,env,expected", [
    ("auto", 2, 0.1, None, 2),      # idle 2-core machine
    ("auto", 2, 1.2, None, 1),      # another job holds a core
    ("auto", 2, 7.0, None, 1),      # overloaded: still one
    ("auto", 16, 3.4, None, 13),
    (None, 4, None, None, 4),       # no load average (not Linux)
    ("auto", 8, 0.0, "3", 3),       # OMP_NUM_THREADS set by the user
    (3, 2, 1.9, "1", 3),            # an explicit number wins
    ("2", 2, 1.9, None, 2),
])
def test_threads(requested, cores, load, env, expected):
    choice = choose_threads(requested, cores, load, env)
    assert choice.threads == expected and choice.reason


@pytest.mark.parametrize("bad", [0, -1, "many", 1.5])
def test_bad_thread_counts_are_errors(bad):
    with pytest.raises(ValueError, match="threads"):
        choose_threads(bad, 2, 0.0)


def _recipe(*overrides):
    return load_recipe(ROOT / "recipes" / "demo-cpu.yaml", list(overrides))


@pytest.mark.parametrize("kind,weights,bf16,fp16", [
    ("cpu-avx2", "float32", False, False),
    ("cpu-arm", "float32", False, False),
    ("cpu-amx", "bfloat16", True, False),
    ("cpu-avx512-bf16", "bfloat16", True, False),
    ("cuda-ampere", "bfloat16", True, False),
    ("cuda-turing", "float16", False, True),
])
def test_training_precision_auto_per_device(kind, weights, bf16, fp16):
    p = sft.training_precision(_recipe(), DEVICES[kind])
    assert (p.model_dtype, p.bf16, p.fp16, p.native) == (weights, bf16, fp16, True)


def test_training_precision_explicit_choices():
    avx2, turing = DEVICES["cpu-avx2"], DEVICES["cuda-turing"]
    forced = sft.training_precision(_recipe("student.dtype=bfloat16", "train.bf16=true"), avx2)
    assert (forced.model_dtype, forced.bf16, forced.native) == ("bfloat16", True, False)
    # bf16 weights asked for but autocast off: float32 weights (as before auto existed)
    off = sft.training_precision(_recipe("student.dtype=bfloat16", "train.bf16=false"), DEVICES["cpu-amx"])
    assert (off.model_dtype, off.bf16, off.fp16) == ("float32", False, False)
    # a GPU without bf16 cannot autocast to it: fp16 instead
    t4 = sft.training_precision(_recipe("student.dtype=bfloat16", "train.bf16=true"), turing)
    assert (t4.model_dtype, t4.bf16, t4.fp16) == ("float16", False, True)


def test_quantization_config_computes_in_the_training_dtype():
    import torch

    recipe = _recipe("student.load_in_4bit=true")
    for kind, dtype in (("cpu-avx2", torch.float32), ("cpu-amx", torch.bfloat16), ("cuda-turing", torch.float16)):
        q = sft.build_quantization_config(recipe, sft.training_precision(recipe, DEVICES[kind]))
        assert q.bnb_4bit_compute_dtype == dtype


@pytest.mark.parametrize("override,key", [("student.dtype=bf17", "student.dtype"),
                                          ("teacher.dtype=int8", "teacher.dtype"),
                                          ("train.bf16=maybe", "train.bf16"),
                                          ("train.cpu_threads=0", "train.cpu_threads"),
                                          ("eval.threads=lots", "eval.threads")])
def test_recipe_rejects_bad_precision_and_threads_naming_file_and_key(override, key):
    with pytest.raises(RecipeError, match=rf"demo-cpu.yaml: {key}"):
        _recipe(override)


def test_every_shipped_recipe_asks_for_auto():
    for path in sorted((ROOT / "recipes").glob("*.yaml")):
        r = load_recipe(path)
        assert (r.student.dtype, r.teacher.dtype, r.train.bf16) == ("auto", "auto", "auto"), path.name


def test_score_says_precision_and_threads_first_and_records_them(sample_path, tmp_path, tiny_smollm2):
    """The real CLI (on the tiny random SmolLM2: the first line and the summary are tested, not what is said): its
    first line names precision, threads and why; the summary records what ran."""
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "vista_distill", "score", "--input", str(sample_path), "--output", str(out),
         "--limit", "1", "--max-new-tokens", "stage1=24", "--threads", "1", "--model", str(tiny_smollm2)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    first = proc.stderr.strip().splitlines()[0]
    want = choose_dtype("auto", hardware.detect("cpu"))
    assert first.startswith(f"precision {want.dtype} (auto: ") and "threads 1 (threads=1 as requested)" in first
    hw = json.loads((tmp_path / "out.summary.json").read_text())["run"]["hardware"]
    assert hw["dtype"] == want.dtype and hw["threads"] == 1 and hw["cpu"] == hardware.cpu_model_name()
    assert hw["capability"]["cpu_capability"] == hardware.detect("cpu").cpu_capability


def test_backend_loads_in_the_auto_precision(embedded_backend):
    import torch

    from vista_distill.backends.transformers import TransformersBackend

    want = choose_dtype("auto", hardware.detect("cpu"))
    b = TransformersBackend(dtype="auto", batch_size=2)
    assert b.torch_dtype == getattr(torch, want.dtype) == next(b.model.parameters()).dtype
    assert b.hardware.to_dict()["dtype_reason"] == want.reason


def test_check_reports_each_role_and_flags_emulated_training(capsys):
    from vista_distill.cli import main

    recipe = str(ROOT / "recipes" / "demo-cpu.yaml")
    cap = hardware.detect()
    assert main(["check", "--config", recipe]) == 0
    assert "human labels: no model runs" in capsys.readouterr().out    # the demo's teacher
    assert main(["check", "--config", recipe, "teacher.backend=transformers"]) == 0
    out = capsys.readouterr().out
    assert cap.describe() in out and all(r in out for r in ("teacher (distill)", "training", "student, base"))
    if cap.device == "cpu":   # the demo recipe trains on the CPU even where a GPU is visible
        assert out.count(choose_dtype("auto", cap).reason) == 3
    forced = main(["check", "--config", recipe, "student.dtype=bfloat16", "train.bf16=true"])
    out = capsys.readouterr().out
    assert forced == (0 if cap.native_bf16 else 1)
    assert ("problem: training computes in bfloat16" in out) == (not cap.native_bf16)


def test_busy_cores_sees_a_real_spinning_process():
    """A process spinning on one core is counted as busy within half a second (the load average would
    need a minute), and auto threads then leave that core to it."""
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 20: pass"])
    try:
        import time

        time.sleep(0.3)
        busy = hardware.busy_cores(1.0)
    finally:
        spinner.kill()
        spinner.wait()
    assert busy is not None and busy >= 0.7
    cores = hardware.usable_cores()
    assert choose_threads("auto", cores, busy).threads <= max(1, cores - 1)
