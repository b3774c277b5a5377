"""train/: tokenisation (completion-only loss, end-of-turn EOS), class balance, errors, recipes, and real training
runs on a tiny random model of the embedded SmolLM2's architecture and tokenizer: interrupted with SIGKILL, resumed
under accelerate, loaded by the scorer; micro-batches, time budgets, 4-bit QLoRA. The embedded model itself trains in
the demo's tests (test_demo.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from helpers import ROOT, distill_sample

from vista_distill.config import load_recipe
from vista_distill.data.silver import SilverDataError
from vista_distill.runtime import hardware
from vista_distill.train.balance import BalancedSampler, class_weights
from vista_distill.train.encoding import encode_split, end_of_turn
from vista_distill.train.hf_configs import (
    build_lora_config,
    build_quantization_config,
    build_sft_config,
    training_precision,
)
from vista_distill.train.model_card import SUMMARY_NAME
from vista_distill.train.run import (
    RUN_INFO,
    StageRun,
    last_checkpoint,
    prepare_stage,
    stage_output_dir,
    train_stage,
)
from vista_distill.train.silver_data import STAGES, TrainError, load_silver


def copy_silver(src: Path, dst: Path, repeat: int = 1,
                edit: Callable[[str, list[dict]], list[dict]] | None = None) -> Path:
    """A copy of the silver data in ``src`` (stage folders and manifest) with each stage's train rows
    repeated ``repeat`` times and then passed through ``edit(stage, rows)``."""
    from datasets import Dataset, DatasetDict, load_from_disk

    for stage in STAGES:
        dd = load_from_disk(str(src / stage))
        rows = dd["train"].to_list() * repeat
        rows = edit(stage, rows) if edit is not None else rows
        train = Dataset.from_list(rows, features=dd["train"].features)
        DatasetDict({**dd, "train": train}).save_to_disk(str(dst / stage))
    shutil.copy(src / "manifest.json", dst / "manifest.json")
    return dst


@pytest.fixture(autouse=True)
def one_cpu_thread():
    """One torch thread: on a shared 2-core machine, OpenMP threads waiting for a busy core made
    training steps ~4x slower than a single thread."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def silver(tmp_path_factory) -> Path:
    """Silver data exported by distill/ from the bundled sample dialogues (labels teacher);
    train rows repeated so a few steps see each example more than once."""
    tmp = tmp_path_factory.mktemp("silver")
    return copy_silver(distill_sample(tmp / "distilled"), tmp / "silver", repeat=2)


def write_recipe(tmp: Path, silver: Path, model: Path | None = None, **train: object) -> Path:
    """The CPU recipe, small enough for tests, on ``model`` (the tiny random SmolLM2 of the tests of training
    mechanics) or the embedded model."""
    raw = yaml.safe_load((ROOT / "recipes" / "smollm2-135m-cpu.yaml").read_text())
    raw["name"] = "tiny"
    if model is not None:
        raw["student"]["model"] = str(model)
    raw["train"].update({
        "output_dir": str(tmp / "ck"), "silver_dir": str(silver), "max_length": 384, "learning_rate": 1e-3,
        "per_device_train_batch_size": 2, "logging_steps": 1, "eval_steps": 0, "save_steps": 100,
        "max_steps": 2,
        **train,
    })
    path = tmp / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from vista_distill.backends.model_loading import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(None))


# ------------------------------------------------------------------------------------------------
# Tokenisation: what the trainer sees
# ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stage2_run(tmp_path_factory, silver, tiny_smollm2) -> StageRun:
    """A prepared (untrained) stage 2 trainer with the CPU recipe's defaults (class_balance weights), on the tiny
    random SmolLM2 (the embedded model's tokenizer and chat template)."""
    return prepare_stage(load_recipe(write_recipe(tmp_path_factory.mktemp("prep"), silver, tiny_smollm2)), "stage2")


def test_training_example_matches_scorer_prompt_and_ends_with_trained_eos(stage2_run, tiny_smollm2):
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.pipeline.protocol import Request

    backend = TransformersBackend(str(tiny_smollm2), dtype="float32")

    run = stage2_run
    tok = run.trainer.processing_class
    eot_id = tok.convert_tokens_to_ids("<|im_end|>")
    assert run.eos_token == "<|im_end|>"
    raw = run.silver["train"]
    for i in range(3):
        ex = run.trainer.train_dataset[i]
        ids, labels = ex["input_ids"], ex["labels"]
        # the last token is the template's end-of-turn token, and it is trained on
        assert ids[-1] == eot_id and labels[-1] == eot_id
        # prompt tokens are exactly what the scorer's backend feeds the model, and are masked
        request = Request("stage2", tuple(raw[i]["prompt"]), labels=("VERIFIED",))
        prefix, suffix = backend._encode(request)
        n = len(prefix) + len(suffix)
        assert ids[:n] == prefix + suffix
        assert set(labels[:n]) == {-100}
        # completion = the answer, then <|im_end|>
        assert tok.decode(labels[n:]) == raw[i]["completion"][0]["content"] + "<|im_end|>"
    # after collation (pad token == eos here) the real EOS label stays, padding is -100
    a, b = run.trainer.train_dataset[0], run.trainer.train_dataset[1]
    batch = run.trainer.data_collator([a, b])
    short = 0 if len(a["input_ids"]) < len(b["input_ids"]) else 1
    n_short = min(len(a["input_ids"]), len(b["input_ids"]))
    assert batch["labels"][short, n_short - 1].item() == eot_id
    assert (batch["labels"][short, n_short:] == -100).all()
    assert "class_weight" in batch  # recipe default: class_balance weights


def test_weighted_loss_equals_trl_loss_for_unit_weights(stage2_run):
    import torch

    trainer = stage2_run.trainer
    trainer.model.train()
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(2)])
    plain = {k: v for k, v in batch.items() if k != "class_weight"}
    with torch.no_grad():
        ref = trainer.compute_loss(trainer.model, dict(plain))
        ones = trainer.compute_loss(trainer.model, {**plain, "class_weight": torch.ones(2)})
        skew = trainer.compute_loss(trainer.model, {**plain, "class_weight": torch.tensor([3.0, 0.0])})
    assert abs(ones.item() - ref.item()) < 1e-4
    assert abs(skew.item() - ref.item()) > 1e-3


def test_cpu_loss_from_labelled_positions_only_equals_the_full_projection(stage2_run, monkeypatch):
    """On CPU the stage's forward projects only the labelled positions (train/trainer.py StageForward); loss,
    gradients and token accuracy are those of TRL's own fused head, which projects every position there, and fewer
    positions run."""
    import torch
    from trl.kernels import ChunkedLogProbFunction

    trainer, model = stage2_run.trainer, stage2_run.trainer.model
    assert trainer.label_positions_only   # the default
    model.train()
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(3)])
    batch.pop("class_weight", None)
    seen: list[int] = []
    original = ChunkedLogProbFunction.apply
    monkeypatch.setattr(ChunkedLogProbFunction, "apply", lambda h, *a: seen.append(h.shape[0]) or original(h, *a))
    lora = [p for n, p in model.named_parameters() if p.requires_grad]

    def run(labelled_only: bool):
        trainer.label_positions_only = labelled_only
        try:
            model.zero_grad(set_to_none=True)
            out = model(**dict(batch), fused_lm_head=True)
            out.loss.backward()
            return out.loss.item(), [p.grad.clone() for p in lora], out.is_top1
        finally:
            trainer.label_positions_only = True

    loss_c, grads_c, top_c = run(True)
    loss_f, grads_f, top_f = run(False)   # TRL's own choice: every position on CPU
    labelled = int((batch["labels"][:, 1:] != -100).sum())
    assert seen == [labelled, batch["labels"][:, 1:].numel()] and labelled < seen[1] / 5
    assert abs(loss_c - loss_f) < 1e-5 * max(1.0, abs(loss_f))
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(grads_c, grads_f))
    assert torch.equal(top_c, top_f)
    model.zero_grad(set_to_none=True)


def test_weighted_stage_refuses_the_settings_that_would_drop_its_weights(stage2_run):
    from vista_distill.train.trainer import check_weighted

    trainer = stage2_run.trainer
    assert "class_weight" in trainer.train_dataset.column_names and not trainer.args.remove_unused_columns
    check_weighted(trainer.args, trainer.train_dataset)   # the recipe's own settings pass
    for field, value, what in [("remove_unused_columns", True, "remove_unused_columns=true"),
                               ("packing", True, "padding_free/packing"), ("loss_type", "dft", "loss_type 'dft'"),
                               ("label_smoothing_factor", 0.1, "label_smoothing_factor")]:
        before = getattr(trainer.args, field)
        setattr(trainer.args, field, value)
        try:
            with pytest.raises(TrainError, match=rf"class_balance=weights does not combine with .*{re.escape(what)}"):
                check_weighted(trainer.args, trainer.train_dataset)
        finally:
            setattr(trainer.args, field, before)


def test_over_long_examples_are_dropped_not_truncated(silver, tokenizer):
    from datasets import load_from_disk

    ds = load_from_disk(str(silver / "stage2"))["train"]
    eot_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    full, dropped = encode_split(ds, tokenizer, eot_id, None)
    assert dropped == 0
    lengths = sorted(len(r) for r in full["input_ids"])
    cut = lengths[len(lengths) // 2]
    kept, dropped = encode_split(ds, tokenizer, eot_id, cut)
    assert dropped == sum(n > cut for n in lengths) > 0
    assert all(r[-1] == eot_id for r in kept["input_ids"])


def test_end_of_turn_is_the_templates_closing_token(tokenizer):
    assert end_of_turn(tokenizer) == ("<|im_end|>", tokenizer.convert_tokens_to_ids("<|im_end|>"))


# ------------------------------------------------------------------------------------------------
# Class balance
# ------------------------------------------------------------------------------------------------

def test_class_weights_inverse_frequency_mean_one_and_capped():
    labels = ["LACKING EVIDENCE"] * 8 + ["CONTRADICTED"] * 2
    w = class_weights(labels, cap=10.0)
    assert w["CONTRADICTED"] == pytest.approx(4 * w["LACKING EVIDENCE"])
    assert sum(w[x] for x in labels) / len(labels) == pytest.approx(1.0)
    labels = ["OUT-OF-SCOPE"] * 99 + ["ABSTENTION"]
    w = class_weights(labels, cap=5.0)
    assert w["ABSTENTION"] == pytest.approx(5 * w["OUT-OF-SCOPE"])
    assert sum(w[x] for x in labels) / len(labels) == pytest.approx(1.0)


def test_balanced_sampler_draws_rare_class_about_half_the_time_and_replays_per_epoch():
    labels = ["VERIFIED"] * 90 + ["UNVERIFIABLE"] * 10
    w = class_weights(labels, cap=100.0)
    sampler = BalancedSampler([w[x] for x in labels], seed=3)
    draws = list(sampler)
    assert len(draws) == 100
    rare = sum(labels[i] == "UNVERIFIABLE" for i in draws)
    assert 35 <= rare <= 65
    assert list(sampler) == draws           # same epoch, same order (resume replays it)
    sampler.set_epoch(1)
    assert list(sampler) != draws


# ------------------------------------------------------------------------------------------------
# Errors name the file, record and expectation
# ------------------------------------------------------------------------------------------------

def test_missing_silver_folder_names_path_and_layout(tmp_path):
    recipe = load_recipe(write_recipe(tmp_path, tmp_path / "nowhere"))
    with pytest.raises(SilverDataError,
                       match=r"nowhere/stage2: no silver data for stage2 \(expected a datasets"):
        prepare_stage(recipe, "stage2")


def test_bad_silver_row_names_split_row_and_conversation(tmp_path, silver):
    def bad_first_stage2_row(stage: str, rows: list[dict]) -> list[dict]:
        if stage == "stage2":
            rows[0] = {**rows[0], "label": "MAYBE"}
        return rows

    copy_silver(silver, tmp_path / "silver", edit=bad_first_stage2_row)
    with pytest.raises(SilverDataError,
                       match=r"stage2\[train\] row 0 \(conversation .+\): label 'MAYBE' is not one"):
        load_silver(tmp_path / "silver", "stage2")


def test_resume_refuses_checkpoints_from_other_silver_data(tmp_path, silver):
    recipe = load_recipe(write_recipe(tmp_path, silver))
    out = stage_output_dir(recipe, "stage2")
    (out / "checkpoint-1").mkdir(parents=True)
    (out / "checkpoint-1" / "trainer_state.json").write_text("{}")
    (out / RUN_INFO).write_text(json.dumps({"silver_fingerprint": "older", "base_model": None}))
    with pytest.raises(TrainError, match=r"another run \(silver_fingerprint 'older' then, .* now\); set "
                                             r"train.resume=false"):
        prepare_stage(recipe, "stage2")


def test_last_checkpoint_skips_a_torn_one(tmp_path):
    (tmp_path / "checkpoint-2").mkdir()
    (tmp_path / "checkpoint-2" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-4").mkdir()
    (tmp_path / "checkpoint-4" / "trainer_state.json").write_text('{"glob')
    assert last_checkpoint(tmp_path) == tmp_path / "checkpoint-2"


# ------------------------------------------------------------------------------------------------
# Recipes and launch configs
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", sorted((ROOT / "recipes").glob("*.yaml")), ids=lambda p: p.stem)
def test_recipe_builds_trainer_configs(path):
    recipe = load_recipe(path, ["train.use_cpu=true"])
    args = build_sft_config(recipe, "/tmp/unused", "<|im_end|>", has_eval=True, resuming=False)
    assert args.completion_only_loss is True and args.max_length == recipe.train.max_length
    lora = build_lora_config(recipe)
    targets = lora.target_modules
    if recipe.lora.layers_to_transform is not None and recipe.lora.target_modules == "all-linear":
        # PEFT takes layers_to_transform with module names only: all-linear becomes the decoder's linear layers
        assert {"q_proj", "v_proj", "down_proj"} <= set(targets) and "lm_head" not in targets
        assert lora.layers_to_transform and max(lora.layers_to_transform) < 30
    else:
        assert targets in ("all-linear", set(recipe.lora.target_modules or []))
    precision = training_precision(recipe, hardware.detect("cpu"))
    assert (args.bf16, args.fp16) == (precision.bf16, precision.fp16)
    assert args.model_init_kwargs["dtype"] == precision.model_dtype
    q = build_quantization_config(recipe, precision)
    assert (q is not None) == ("qlora" in path.stem) == recipe.student.load_in_4bit
    assert ("cpu" in path.stem) == (recipe.student.model is None)
    if "cpu" not in path.stem:
        assert "Expected peak GPU memory" in path.read_text()
        assert load_recipe(path).train.silver_dir == load_recipe(path).distill.output_dir


def test_cpu_recipe_settings():
    r = load_recipe(ROOT / "recipes" / "smollm2-135m-cpu.yaml")
    assert (r.student.model, r.train.bf16, r.train.use_cpu, r.lora.dropout) == (None, "auto", True, 0.0)
    raw = yaml.safe_load((ROOT / "recipes" / "smollm2-135m-cpu.yaml").read_text())
    assert "gradient_checkpointing" in raw["train"]


@pytest.mark.parametrize("name,kind",
                         [("ddp", "MULTI_GPU"), ("fsdp", "FSDP"), ("deepspeed_zero3", "DEEPSPEED")])
def test_accelerate_configs(name, kind):
    cfg = yaml.safe_load((ROOT / "recipes" / "accelerate" / f"{name}.yaml").read_text())
    assert cfg["distributed_type"] == kind and cfg["mixed_precision"] == "bf16"


def test_stage_script_runs_from_a_clone_without_the_package_dir_on_path():
    out = subprocess.run([sys.executable, str(ROOT / "train" / "stage3.py"), "--help"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 0 and "--config" in out.stdout and "stage3" in out.stdout


# ------------------------------------------------------------------------------------------------
# Real training: kill, resume, load into the scorer
# ------------------------------------------------------------------------------------------------

STEPS = 24   # the killed training run's planned steps (a checkpoint every 2)


def _wait_for_checkpoint(proc: subprocess.Popen, folder: Path, timeout: float) -> Path:
    deadline = time.time() + timeout
    while time.time() < deadline:
        ckpt = last_checkpoint(folder)
        if ckpt is not None:
            return ckpt
        if proc.poll() is not None:
            raise AssertionError(f"training exited ({proc.returncode}) before writing a checkpoint:\n"
                                 f"{proc.stdout.read() if proc.stdout else ''}")
        time.sleep(0.2)
    raise AssertionError(f"no checkpoint in {folder} after {timeout}s")


def test_sigkill_then_resume_then_scorer_loads_adapter(tmp_path, silver, tiny_smollm2):
    from vista_distill.pipeline.protocol import Request
    from vista_distill.scorer import VistaScorer

    # the tiny random SmolLM2 trains a step in milliseconds: enough steps that the kill lands mid-run, and a learning
    # rate that moves its near-uniform labels
    recipe_path = write_recipe(tmp_path, silver, tiny_smollm2, max_steps=STEPS, save_steps=2, eval_steps=STEPS,
                               learning_rate=0.05)
    out = tmp_path / "ck" / "stage2"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "train" / "stage2.py"), "--config", str(recipe_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=tmp_path)
    try:
        ckpt = _wait_for_checkpoint(proc, out, timeout=300)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "adapter_config.json").exists(), "the killed run must not have finished"
    killed_at = int(ckpt.name.split("-")[1])
    assert killed_at < STEPS

    # resume under accelerate launch, as users run it
    res = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--num_machines", "1",
         "--mixed_precision", "no", "--dynamo_backend", "no", str(ROOT / "train" / "stage2.py"),
         "--config", str(recipe_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=240, check=False)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    summary = json.loads((out / SUMMARY_NAME).read_text())
    assert summary["resumed_from"] is not None
    assert int(Path(summary["resumed_from"]).name.split("-")[1]) >= killed_at
    assert summary["results"]["global_step"] == STEPS
    # the log history of the killed run came back with the checkpoint: every step has a loss
    assert [int(s) for s, row in summary["results"]["curve"].items() if "loss" in row] == list(range(1, STEPS + 1))
    card = (out / "README.md").read_text()
    assert "| teacher | labels |" in card and summary["silver"]["fingerprint"] in card and "eval loss" in card
    assert (out / "adapter_model.safetensors").exists() and (out / "tokenizer_config.json").exists()

    # the scorer loads the adapters folder; its stage 2 answers move away from the base model's (the same
    # backend answers a stage without an adapter, here "stage4", on the bare base model): the trained labels' tokens
    # are far more likely (class-balanced, the tiny model learns no preference between the two)
    from datasets import load_from_disk

    scorer = VistaScorer(str(tiny_smollm2), adapters=tmp_path / "ck")
    assert scorer.config.style == "compact" and set(scorer.backend.adapters) == {"stage2"}
    rows = load_from_disk(str(silver / "stage2"))["validation"].select(range(3))
    labels = ("VERIFIED", "UNVERIFIABLE")
    tuned = scorer.backend.run([Request("stage2", tuple(r["prompt"]), labels=labels) for r in rows])
    base = scorer.backend.run([Request("stage4", tuple(r["prompt"]), labels=labels) for r in rows])
    gain = min(t.meta["logprobs"][lab] - b.meta["logprobs"][lab] for t, b in zip(tuned, base) for lab in labels)
    assert gain > 1.0, f"adapter barely changed stage 2 label log-likelihoods (least gain {gain:.4f} nats)"


def test_cli_trains_all_stages_in_order_with_cards(tmp_path, silver, capsys, tiny_smollm2):
    from vista_distill.backends.transformers import find_stage_adapters
    from vista_distill.cli import main

    recipe = write_recipe(tmp_path, silver, tiny_smollm2)
    assert main(["train", "--config", str(recipe), "--stage", "all", "--train.max_steps", "1",
                 "train.max_length=256"]) == 0
    printed = [ln.split("]")[0] for ln in capsys.readouterr().out.splitlines() if ln.startswith("[stage")]
    assert printed == ["[stage1", "[stage2", "[stage3"]
    for stage in STAGES:
        summary = json.loads((tmp_path / "ck" / stage / SUMMARY_NAME).read_text())
        assert summary["results"]["global_step"] == 1 and summary["hyperparameters"]["max_length"] == 256
        assert summary["class_balance"]["mode"] == ("none" if stage == "stage1" else "weights")
    assert set(find_stage_adapters(tmp_path / "ck")) == set(STAGES)


def test_qlora_trains_a_4bit_model_on_cpu(tmp_path, silver):
    """QLoRA end to end on a tiny random model of the SmolLM2 architecture (4-bit NF4 on CPU), with the
    class-balanced sampler."""
    import torch
    from accelerate.data_loader import get_sampler
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from vista_distill.backends.model_loading import resolve_model

    base = resolve_model(None)
    cfg = AutoConfig.from_pretrained(base)
    cfg.update({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 16})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path / "tiny-model")
    AutoTokenizer.from_pretrained(base).save_pretrained(tmp_path / "tiny-model")
    recipe = load_recipe(write_recipe(tmp_path, silver), [f"student.model={tmp_path / 'tiny-model'}",
                                                          "student.load_in_4bit=true", "train.max_steps=2",
                                                          "train.class_balance=sampler"])
    run = prepare_stage(recipe, "stage3")
    q_proj = run.trainer.model.base_model.model.model.layers[0].self_attn.q_proj
    assert type(q_proj.base_layer).__name__ == "Linear4bit"
    sampler = get_sampler(run.trainer.get_train_dataloader())   # the weighted draw, seeded like the run
    assert isinstance(sampler, BalancedSampler) and sampler.seed == run.trainer.args.seed
    assert sampler.weights == list(run.trainer.sample_weights) and len(set(sampler.weights)) > 1
    del run
    summary = train_stage(recipe, "stage3")
    assert summary["hyperparameters"]["load_in_4bit"] is True and summary["results"]["global_step"] == 2
    assert summary["class_balance"]["mode"] == "sampler"
    assert (tmp_path / "ck" / "stage3" / "adapter_model.safetensors").exists()
    # the sampler's prior: whether to undo it was chosen on the silver validation split, and the choice kept
    from vista_distill.backends.label_prior import PRIOR_FILE, LabelPrior, sampler_shift

    chosen = summary["label_prior"]
    assert chosen["examples"] > 0 and chosen["shift"] == sampler_shift(summary["class_balance"]["weights"])
    assert chosen["applied"] == (chosen["accuracy_with_prior"] > chosen["accuracy_as_trained"])
    assert (tmp_path / "ck" / "stage3" / PRIOR_FILE).exists()
    assert (LabelPrior.load(tmp_path / "ck" / "stage3") is not None) == chosen["applied"]


def test_train_sources_keeps_one_sources_examples_per_stage(tmp_path, silver, tiny_smollm2):
    """``train.per_stage.stage2.sources``: stage 2 trains on the named source's examples only (the demo's
    stage 2 on FaithDial alone); other stages keep all; a source with no example is refused by name."""
    def relabel(stage: str, rows: list[dict]) -> list[dict]:
        return [{**r, "source": "Other" if i % 2 else "Other+swapped"} if i % 3 == 0 else r for i, r in enumerate(rows)]

    mixed = copy_silver(silver, tmp_path / "mixed", edit=relabel)
    present = sorted(set(load_silver(mixed, "stage2")["train"]["source"]))
    assert "Other" in present and "Other+swapped" in present and len(present) == 3
    # a source's rows made by rule (distill/augment.py) go with it
    n_other = sum(s.startswith("Other") for s in load_silver(mixed, "stage2")["train"]["source"])
    path = write_recipe(tmp_path, mixed, tiny_smollm2, max_length=4096, class_balance="none",
                        per_stage={"stage2": {"sources": ["Other"]}})
    recipe = load_recipe(path)
    run = prepare_stage(recipe, "stage2")
    assert len(run.trainer.train_dataset) == n_other
    assert len(prepare_stage(recipe, "stage3").trainer.train_dataset) == len(load_silver(mixed, "stage3")["train"])
    bad = load_recipe(write_recipe(tmp_path, mixed, tiny_smollm2, per_stage={"stage2": {"sources": ["FaithDail"]}}))
    with pytest.raises(TrainError, match=r"FaithDail.*sources present: \['Other', 'Other\+swapped', "):
        prepare_stage(bad, "stage2")


def test_max_minutes_stops_a_stage_early_saves_it_and_counts_it_done(tmp_path, silver, capsys, tiny_smollm2):
    """``train.max_minutes``: the stage ends at the first step past its budget (here any step), the adapter of that
    step is saved, the summary says so, and a second run takes the stage as done instead of training on."""
    recipe = load_recipe(write_recipe(tmp_path, silver, tiny_smollm2),
                         ["train.max_steps=3", "train.max_minutes=0.0001", "train.max_length=256"])
    summary = train_stage(recipe, "stage3")
    assert summary["results"]["global_step"] == 1 and summary["results"]["planned_steps"] == 3   # done and planned
    assert summary["time_budget"] == {"max_minutes": 0.0001, "planned_steps": 3, "stopped_at_step": 1}
    assert (tmp_path / "ck" / "stage3" / "adapter_model.safetensors").exists()
    assert "stopped by train.max_minutes=0.0001 after 1 of 3 steps" in capsys.readouterr().out
    again = train_stage(recipe, "stage3")
    assert again["results"]["global_step"] == 1 and "already trained (1 steps)" in capsys.readouterr().out
    (tmp_path / "b").mkdir()
    unbounded = load_recipe(write_recipe(tmp_path / "b", silver, tiny_smollm2),
                            ["train.max_steps=2", "train.max_minutes=60", "train.max_length=256"])
    done = train_stage(unbounded, "stage3")
    assert done["results"]["global_step"] == done["results"]["planned_steps"] == 2
    assert done["time_budget"]["stopped_at_step"] is None


def test_length_sorted_steps_reorder_within_a_step_only():
    from vista_distill.train.trainer import LengthSortedSteps

    lengths = [50, 10, 40, 30, 20, 60, 5]
    order = list(LengthSortedSteps([0, 1, 2, 3, 4, 5, 6], lengths, step=3))
    assert order == [1, 2, 0, 4, 3, 5, 6]   # runs {0,1,2} {3,4,5} {6}, each by length
    assert len(LengthSortedSteps(range(7), lengths, step=3)) == 7


def test_micro_batches_train_the_same_steps_with_less_padding(tmp_path, silver, tiny_smollm2):
    """``train.micro_batch_size``: a batch of 4 run as length-sorted micro-batches of 1 (4 accumulation steps)
    sees the same examples in each optimizer step, pads fewer tokens, and trains the same adapter (float32, plain
    SGD: Adam's first steps are the sign of each gradient, which float rounding flips where a gradient is ~0)."""
    import torch
    from safetensors.torch import load_file

    adapters, steps, padded = {}, {}, {}
    for micro in (None, 1):
        (tmp_path / str(micro)).mkdir()
        recipe = load_recipe(write_recipe(tmp_path / str(micro), silver, tiny_smollm2, per_device_train_batch_size=4,
                                          micro_batch_size=micro, class_balance="none", max_steps=2,
                                          learning_rate=0.05, options={"optim": "sgd"}),
                             ["student.dtype=float32", "train.bf16=false"])
        trainer = prepare_stage(recipe, "stage2").trainer
        args = trainer.args
        assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == \
            ((4, 1) if micro is None else (1, 4))
        batches = list(trainer.get_train_dataloader())[:8 // args.per_device_train_batch_size]
        per_step = 4 // args.per_device_train_batch_size
        steps[micro] = [sorted(tuple(row[m.bool()].tolist()) for b in batches[k:k + per_step]
                               for row, m in zip(b["input_ids"], b["attention_mask"]))
                        for k in range(0, len(batches), per_step)]
        padded[micro] = sum(b["input_ids"].numel() for b in batches)
        del trainer
        train_stage(recipe, "stage2")
        adapters[micro] = load_file(str(tmp_path / str(micro) / "ck" / "stage2" / "adapter_model.safetensors"))
    assert steps[1] == steps[None] and len(steps[1]) == 2
    assert padded[1] < padded[None]
    assert adapters[1].keys() == adapters[None].keys()
    # LoRA B starts at zero, so after SGD it is the sum of the updates: the same to float rounding
    b_full = torch.cat([w.flatten() for n, w in sorted(adapters[None].items()) if "lora_B" in n])
    b_micro = torch.cat([w.flatten() for n, w in sorted(adapters[1].items()) if "lora_B" in n])
    assert b_full.norm() > 0
    assert (b_micro - b_full).norm() < 1e-4 * b_full.norm()
    for name, weight in adapters[None].items():
        assert (adapters[1][name] - weight).norm() <= 1e-3 * weight.norm(), name


def test_micro_batch_size_must_divide_the_batch(tmp_path, silver):
    from vista_distill.config import RecipeError

    recipe = load_recipe(write_recipe(tmp_path, silver, per_device_train_batch_size=4, micro_batch_size=3))
    with pytest.raises(RecipeError, match="micro_batch_size 3 must divide train.per_device_train_batch_size 4"):
        build_sft_config(recipe, tmp_path / "out", "<|im_end|>", has_eval=False, resuming=False)
