"""Every shipped 7-8B recipe's flow on a tiny random model of its real architecture.

For each recipe (Qwen3-8B, Llama-3.1-8B, Mistral-7B; bf16-style LoRA and 4-bit QLoRA): the recipe file
itself, with the human labels as teacher, the bundled sample as material and a two-layer random model of
the recipe's architecture (tests/helpers.py) as student, goes through ``check`` -> ``distill`` ->
``train --stage all`` -> ``score`` with its three adapters -> ``eval``. The model-specific paths (Qwen3's
q/k norms and thinking switch, Llama 3.1's rope scaling and header template, Mistral's template without a
system role and a sliding window, ``all-linear`` LoRA targets, sdpa attention, NF4 on CPU) run on every
commit. One recipe also trains under ``accelerate launch --num_processes 2`` on CPU (gloo): the DDP path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, SAMPLE, build_tiny_model, family_of, tiny_recipe

RECIPES = sorted(p for p in (ROOT / "recipes").glob("*.yaml") if p.stem.endswith("gb"))


@pytest.fixture(autouse=True)
def one_cpu_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny")
    return {fam: build_tiny_model(fam, root / fam) for fam in ("qwen3", "llama-3.1", "mistral")}




@pytest.mark.parametrize("src", RECIPES, ids=lambda p: p.stem)
def test_recipe_flow_on_its_tiny_architecture(src, tmp_path, tiny_models, capsys):
    from vista_distill.cli import main
    from vista_distill.config import load_recipe

    family = family_of(src.stem)
    model = tiny_models[family]
    recipe_path = tiny_recipe(src, tmp_path, model)
    recipe = load_recipe(recipe_path)

    assert main(["check", "--config", str(recipe_path)]) == 0
    out = capsys.readouterr().out
    assert "student template: renders the VISTA prompt" in out and "memory from" in out
    if family == "qwen3":   # thinking is off: the generation prompt closes an empty think block
        assert "<think>\\n\\n</think>\\n\\n'" in out

    assert main(["distill", "--config", str(recipe_path), "--no-progress"]) == 0
    assert main(["train", "--config", str(recipe_path), "--stage", "all"]) == 0
    for stage in ("stage1", "stage2", "stage3"):
        folder = tmp_path / "ck" / stage
        summary = json.loads((folder / "training_summary.json").read_text())
        assert summary["results"]["global_step"] == 2
        assert summary["hyperparameters"]["load_in_4bit"] is recipe.student.load_in_4bit
        adapter = json.loads((folder / "adapter_config.json").read_text())
        kinds = {name.rsplit(".", 1)[-1] for name in adapter["target_modules"]}   # all-linear, resolved
        assert kinds == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
        assert adapter["r"] == recipe.lora.r

    # score with the recipe's student and its three adapters
    scored = tmp_path / "scored.jsonl"
    assert main(["score", "--config", str(recipe_path), "--input", str(SAMPLE), "--output", str(scored),
                 "--max-new-tokens", "stage1=24", "--batch-size", "4"]) == 0
    records = [json.loads(line) for line in scored.read_text().splitlines()]
    summary = json.loads(scored.with_name("scored.summary.json").read_text())
    assert len(records) == summary["assistant_turns"] > 0
    # a random model never ends its list: every decomposition was retried with a doubled budget, still cut,
    # flagged, and its cut-off last line counted, not kept, unless the loop rules stopped it first
    from vista_distill.backends.list_generation import list_stop_reason

    looped = [r for r in records if not r["stage1_truncated"]]
    assert summary["stage1_truncated_turns"] == len(records) - len(looped) >= 1
    assert all(list_stop_reason(r["stage1_raw"]) == "loop" and r["claims_dropped"].get("looping_line") for r in looped)
    assert summary["claims_dropped"].get("truncated_line", 0) >= 1
    assert all(r["verdicts"] for r in records if r["scored"])

    from vista_distill.backends.transformers import TransformersBackend

    backend = TransformersBackend(str(model), adapters=tmp_path / "ck", dtype="float32",
                                  load_in_4bit=recipe.student.load_in_4bit,
                                  attn_implementation=recipe.student.attn_implementation)
    assert set(backend.adapters) == {"stage1", "stage2", "stage3"}
    # float32 merges the stage adapters into copies of the weights (a plain model); over 4-bit weights PEFT stays
    assert (backend.merged is None) == bool(recipe.student.load_in_4bit)
    base = backend.model.get_base_model() if backend.merged is None else backend.model
    if backend.merged is not None:
        assert backend.merged.stages == ["stage1", "stage2", "stage3"]
    assert type(base).__name__ == json.loads((model / "config.json").read_text())["architectures"][0]
    attn = base.model.layers[0].self_attn
    if family == "qwen3":
        assert hasattr(attn, "q_norm") and hasattr(attn, "k_norm")
    if family == "mistral":
        assert base.config.sliding_window == 64
    if recipe.student.load_in_4bit:
        assert type(attn.q_proj.base_layer).__name__ == "Linear4bit"
    del backend

    assert main(["eval", "--config", str(recipe_path), "--input", str(SAMPLE), "--no-progress"]) == 0
    results = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert {n for n, s in results["systems"].items() if s["status"] == "ok"} == {"student", "base"}


def test_ddp_on_two_cpu_processes_shards_data_and_saves_one_adapter(tmp_path, tiny_models):
    """``accelerate launch --config_file recipes/accelerate/ddp.yaml --num_processes 2`` on CPU (torch picks
    gloo without CUDA): the README's multi-GPU command. Each process draws its own shard of the examples; one
    adapter is saved and the scorer loads it. (bf16 mixed precision is the config's GPU setting, switched
    off here: this CPU has no native bf16.)"""
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.cli import main

    src = ROOT / "recipes" / "llama-3.1-8b-lora-80gb.yaml"
    recipe_path = tiny_recipe(src, tmp_path, tiny_models["llama-3.1"])
    assert main(["distill", "--config", str(recipe_path), "--no-progress"]) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(ROOT / "recipes" / "accelerate" / "ddp.yaml"),
            "--num_processes",
            "2",
            "--mixed_precision",
            "no",
            str(ROOT / "train" / "stage2.py"),
            "--config",
            str(recipe_path),
            "train.max_steps=3",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = tmp_path / "ck" / "stage2"
    summary = json.loads((out / "training_summary.json").read_text())
    assert summary["results"]["global_step"] == 3
    assert summary["distributed"]["world_size"] == 2
    assert summary["distributed"]["examples_per_step"] == 2 * 2   # batch 2 on each of 2 processes
    n = summary["silver"]["train_examples"]
    assert summary["distributed"]["process_batches_per_epoch"] == -(-n // 4)   # sharded: not ceil(n / 2)
    assert sorted(p.name for p in out.glob("adapter_model*.safetensors")) == ["adapter_model.safetensors"]
    backend = TransformersBackend(str(tiny_models["llama-3.1"]), adapters=tmp_path / "ck", dtype="float32")
    assert set(backend.adapters) == {"stage2"}
