"""One shared training module for the three stage adapters (TRL ``SFTTrainer`` + PEFT LoRA/QLoRA).

``train/stage1.py``, ``stage2.py`` and ``stage3.py`` are thin entry points over :func:`main`, in the
style of TRL's ``trl/scripts/sft.py`` (typed configs from one YAML recipe plus dotted CLI overrides,
heavy imports inside functions)::

    accelerate launch train/stage2.py --config recipes/smollm2-135m-cpu.yaml [--train.max_steps 50]

What a stage does:

* reads ``<silver_dir>/<stage>/`` (a ``DatasetDict`` with ``train``/``test`` splits and conversational
  ``prompt``/``completion`` columns) and ``<silver_dir>/manifest.json``;
* renders each prompt with :func:`vista_distill.pipeline.prompts.render` (the student's own chat template, the
  renderer the scorer uses at inference) and tokenizes it exactly as ``TransformersBackend`` does, so
  training and inference see the same prompt ids; the completion is the answer's tokens plus the
  template's end-of-turn token (``<|im_end|>``, ``<|eot_id|>``, ``</s>``...), so the student stops;
* hands TRL a processed dataset (``input_ids`` + ``completion_mask``) with
  ``completion_only_loss=True``: TRL builds the labels, prompt tokens get ``-100``;
* drops examples longer than ``train.max_length`` instead of truncating them (a truncated completion
  would lose its end-of-turn token), counted in the model card;
* stages 2 and 3: ``train.class_balance`` ``weights`` (per-example loss weights, inverse class
  frequency, capped) or ``sampler`` (class-balanced sampling with replacement); eval loss is never
  weighted;
* writes ``<output_dir>/<stage>/``: the adapter, the tokenizer, ``README.md`` (model card) and
  ``training_summary.json``; checkpoints ``checkpoint-N/`` beside them, and a rerun resumes from the
  last complete one.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Recipe, RecipeError, load_recipe
from ..data.schema import STAGE2_LABELS, STAGE3_LABELS

log = logging.getLogger(__name__)

STAGES = ("stage1", "stage2", "stage3")
# Stages whose answers are labels: class balance applies.
STAGE_CLASSES: dict[str, tuple[str, ...]] = {"stage2": STAGE2_LABELS, "stage3": STAGE3_LABELS}
CLASS_BALANCE = ("none", "sampler", "weights")
REQUIRED_COLUMNS = ("prompt", "completion", "label")
SUMMARY_NAME = "training_summary.json"
# End-of-turn tokens of common chat templates, tried when the template's own token is not special.
KNOWN_END_TOKENS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "</s>", "<|endoftext|>")
_MARKER = "@@VISTA_ANSWER@@"


class TrainError(ValueError):
    """Bad training input (silver data, recipe): the message names the file, record and expectation."""


# --------------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------------

def silver_root(recipe: Recipe) -> Path:
    """Folder of the ``stage1/ stage2/ stage3/`` silver datasets (``train.silver_dir``, else
    ``distill.output_dir``)."""
    return Path(recipe.resolve(recipe.train.silver_dir or recipe.distill.output_dir))


def stage_output_dir(recipe: Recipe, stage: str) -> Path:
    """``checkpoints/<recipe>/<stage>/``: what the scorer's ``--adapters checkpoints/<recipe>`` reads."""
    return Path(recipe.resolve(recipe.train.output_dir)) / stage


def last_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest ``checkpoint-N`` whose ``trainer_state.json`` parses (a kill mid-save leaves it
    absent or torn)."""
    root = Path(output_dir)
    if not root.is_dir():
        return None
    found = []
    for p in root.iterdir():
        m = re.fullmatch(r"checkpoint-(\d+)", p.name)
        if m and p.is_dir():
            found.append((int(m.group(1)), p))
    for _, path in sorted(found, reverse=True):
        try:
            json.loads((path / "trainer_state.json").read_text())
        except (OSError, ValueError):
            log.warning("%s: incomplete checkpoint (no readable trainer_state.json), skipped", path)
            continue
        return path
    return None


# --------------------------------------------------------------------------------------------------
# Silver data
# --------------------------------------------------------------------------------------------------

def read_manifest(root: str | Path) -> dict[str, Any]:
    """``<silver_dir>/manifest.json`` or ``{}`` when there is none."""
    path = Path(root) / "manifest.json"
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise TrainError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise TrainError(f"{path}: expected a JSON object")
    return data


def load_silver(root: str | Path, stage: str):
    """The stage's ``DatasetDict`` (splits ``train`` and, optionally, ``test``), validated."""
    from datasets import DatasetDict, load_from_disk

    path = Path(root) / stage
    if not path.exists():
        raise TrainError(
            f"{path}: no silver data for {stage} (expected a datasets.DatasetDict saved with save_to_disk, "
            "splits train/test; write it with `vista-distill distill --config <recipe>` or set "
            "train.silver_dir)"
        )
    try:
        dd = load_from_disk(str(path))
    except Exception as e:  # datasets raises FileNotFoundError / ValueError / IndexError variants
        dd = _load_splits(path, e)
    if not isinstance(dd, DatasetDict):
        raise TrainError(f"{path}: expected a DatasetDict with splits train/test, got a single "
                         f"{type(dd).__name__}")
    if "train" not in dd:
        raise TrainError(f"{path}: no 'train' split (found {sorted(dd)})")
    for split, ds in dd.items():
        if len(ds):
            validate_rows(ds, stage, f"{path}[{split}]")
    return dd


def _load_splits(path: Path, error: Exception):
    """Split by split: datasets cannot reload an empty split it saved (no arrow shard); such a split
    is dropped."""
    from datasets import DatasetDict, load_from_disk

    try:
        names = json.loads((path / "dataset_dict.json").read_text())["splits"]
    except (OSError, ValueError, KeyError):
        raise TrainError(f"{path}: not a dataset saved with save_to_disk ({error})") from error
    splits = {}
    for name in names:
        try:
            splits[name] = load_from_disk(str(path / name))
        except Exception as e:
            if any((path / name).glob("*.arrow")):
                raise TrainError(f"{path / name}: cannot load split {name!r} ({e})") from e
            log.warning("%s: split %r is empty, ignored", path, name)
    return DatasetDict(splits)


def _answer(completion: Any) -> str | None:
    """The assistant answer of a ``completion`` cell (conversational list or plain string)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and len(completion) == 1 and isinstance(completion[0], Mapping):
        if completion[0].get("role") == "assistant" and isinstance(completion[0].get("content"), str):
            return completion[0]["content"]
    return None


def _is_message(m: Any) -> bool:
    return isinstance(m, Mapping) and isinstance(m.get("content"), str) and m.get("role") in (
        "system", "user", "assistant")


def validate_rows(ds, stage: str, where: str) -> None:
    """Check columns and every row; the error names the split, row, conversation and what was expected."""
    missing = [c for c in REQUIRED_COLUMNS if c not in ds.column_names]
    if missing:
        raise TrainError(f"{where}: missing column(s) {missing}; expected at least {list(REQUIRED_COLUMNS)}")
    classes = STAGE_CLASSES.get(stage)
    cols = ["prompt", "completion", "label"]
    cols += [c for c in ("stage", "conversation_id") if c in ds.column_names]
    for i, row in enumerate(ds.select_columns(cols)):
        rid = f"{where} row {i}"
        if "conversation_id" in row:
            rid += f" (conversation {row['conversation_id']})"
        if "stage" in row and row["stage"] not in (stage, None, ""):
            raise TrainError(f"{rid}: stage {row['stage']!r} in the {stage} dataset")
        prompt = row["prompt"]
        if not (isinstance(prompt, list) and prompt and all(_is_message(m) for m in prompt)) \
                or prompt[-1]["role"] != "user":
            raise TrainError(f"{rid}: prompt must be a list of {{role, content}} messages ending with a user "
                             "message")
        answer = _answer(row["completion"])
        if answer is None or not answer.strip():
            raise TrainError(f"{rid}: completion must be [{{'role': 'assistant', 'content': <non-empty "
                             "answer>}]")
        if classes is not None and row["label"] not in classes:
            raise TrainError(f"{rid}: label {row['label']!r} is not one of {list(classes)}")


# --------------------------------------------------------------------------------------------------
# Tokenisation: train exactly what the scorer sees
# --------------------------------------------------------------------------------------------------

def end_of_turn(tokenizer: Any) -> tuple[str, int]:
    """The token the chat template closes an assistant message with: ``(token, id)``.

    Found by rendering a probe answer; the first special (or known end-of-turn) token after it wins,
    else the tokenizer's EOS.
    """
    from ..pipeline.prompts import render

    probe = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
             {"role": "assistant", "content": _MARKER}]
    try:
        text = render(tokenizer, probe, add_generation_prompt=False)
    except Exception:  # templates that insist on alternation etc.: fall back to EOS below
        text = ""
    after = text[text.rfind(_MARKER) + len(_MARKER):] if _MARKER in text else ""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    vocab = tokenizer.get_vocab()
    known = {vocab[t] for t in KNOWN_END_TOKENS if t in vocab}
    for tid in tokenizer(after, add_special_tokens=False)["input_ids"] if after else []:
        if tid in special or tid in known:
            return tokenizer.convert_ids_to_tokens(tid), int(tid)
    if tokenizer.eos_token_id is None:
        name = getattr(tokenizer, "name_or_path", "tokenizer")
        raise TrainError(f"{name}: no end-of-turn token in the chat "
                         "template and no eos_token: the student could not learn to stop")
    return tokenizer.eos_token, int(tokenizer.eos_token_id)


def encode_example(tokenizer: Any, prompt: list[dict[str, str]], completion: Any,
                   eot_id: int, template_kwargs: Mapping[str, Any] | None = None) -> dict[str, list[int]]:
    """``input_ids`` and ``completion_mask`` of one example.

    Prompt ids are what ``TransformersBackend`` feeds the model (rendered with the generation prompt,
    ``add_special_tokens=False``); completion ids are the stripped answer tokenized on its own (as
    label scoring does) plus ``eot_id``.
    """
    from ..pipeline.prompts import render

    prompt_ids = tokenizer(render(tokenizer, list(prompt), template_kwargs=template_kwargs),
                           add_special_tokens=False)["input_ids"]
    answer = _answer(completion)
    if answer is None:
        raise TrainError(f"completion {completion!r}: expected [{{'role': 'assistant', 'content': ...}}]")
    completion_ids = tokenizer(answer.strip(), add_special_tokens=False)["input_ids"] + [eot_id]
    return {"input_ids": prompt_ids + completion_ids,
            "completion_mask": [0] * len(prompt_ids) + [1] * len(completion_ids)}


def encode_split(ds, tokenizer: Any, eot_id: int, max_length: int | None,
                 weights: Mapping[str, float] | None = None, template_kwargs: Mapping[str, Any] | None = None):
    """Tokenize a split; drop examples over ``max_length``. Returns ``(dataset, n_dropped)``.

    The result keeps ``input_ids``, ``completion_mask`` and ``label`` (plus ``class_weight`` when
    ``weights`` is given), in memory: the silver folder is never written to.
    """
    def fn(row: dict[str, Any]) -> dict[str, Any]:
        out = encode_example(tokenizer, row["prompt"], row["completion"], eot_id, template_kwargs)
        if weights is not None:
            out["class_weight"] = float(weights[row["label"]])
        return out

    drop = [c for c in ds.column_names if c != "label"]
    encoded = ds.map(fn, remove_columns=drop, keep_in_memory=True, desc="Tokenizing")
    n = len(encoded)
    if max_length is not None:
        encoded = encoded.filter(lambda r: len(r["input_ids"]) <= max_length, keep_in_memory=True)
    return encoded, n - len(encoded)


# --------------------------------------------------------------------------------------------------
# Class balance
# --------------------------------------------------------------------------------------------------

def class_weights(labels: Sequence[str], cap: float = 10.0) -> dict[str, float]:
    """Inverse-frequency weights ``n / (k * n_c)``, capped at ``cap`` times the smallest, renormalised
    so the mean weight per example is 1 (the loss keeps its scale)."""
    counts = Counter(labels)
    if not counts:
        return {}
    n, k = len(labels), len(counts)
    raw = {c: n / (k * m) for c, m in counts.items()}
    floor = min(raw.values())
    capped = {c: min(w, cap * floor) for c, w in raw.items()}
    mean = sum(capped[label] for label in labels) / n
    return {c: w / mean for c, w in sorted(capped.items())}


class BalancedSampler:
    """Draws ``len(weights)`` indices per epoch with replacement, probability proportional to ``weights``.

    Seeded per epoch (``set_epoch``, called by accelerate/Trainer), so a resumed run replays the same order.
    """

    def __init__(self, weights: Sequence[float], seed: int = 0) -> None:
        self.weights = list(weights)
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.weights)

    def __iter__(self) -> Iterator[int]:
        import torch

        g = torch.Generator().manual_seed(self.seed + self.epoch)
        w = torch.tensor(self.weights, dtype=torch.double)
        yield from torch.multinomial(w, len(self.weights), replacement=True, generator=g).tolist()


def _trainer_class():
    """``SFTTrainer`` subclass with class-balanced sampling / loss weights (built lazily: TRL is heavy)."""
    import torch
    from trl import SFTTrainer

    class VistaSFTTrainer(SFTTrainer):
        def __init__(self, *args: Any, sample_weights: Sequence[float] | None = None, **kwargs: Any) -> None:
            self.sample_weights = sample_weights
            super().__init__(*args, **kwargs)
            self.data_collator = _KeepWeights(self.data_collator)

        def _get_train_sampler(self, train_dataset=None):
            if self.sample_weights is None:
                return super()._get_train_sampler(train_dataset)
            return BalancedSampler(self.sample_weights, seed=self.args.seed)

        def _set_signature_columns_if_needed(self) -> None:
            super()._set_signature_columns_if_needed()
            if "class_weight" not in self._signature_columns:
                self._signature_columns = [*self._signature_columns, "class_weight"]

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            weights = inputs.pop("class_weight", None)
            if weights is None or not model.training:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if self.padding_free or "attention_mask" not in inputs:
                raise TrainError("train.class_balance=weights needs padded batches (no padding_free/packing)")
            # TRL's nll path with a per-example weight on each token's loss; same normaliser (tokens).
            inputs["use_cache"] = False
            if self.aux_loss_enabled:
                inputs["output_router_logits"] = True
            outputs = model(**inputs, fused_lm_head=True)
            per_token = -outputs.log_probs * weights.to(outputs.log_probs.dtype)[:, None]
            num_tokens = outputs.label_mask.sum() if num_items_in_batch is None else num_items_in_batch
            loss = per_token.sum() / torch.as_tensor(num_tokens).clamp(min=1)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * (self.accelerator.num_processes // self.get_tp_size())
            if self.aux_loss_enabled:  # MoE students, as in TRL
                steps = self.current_gradient_accumulation_steps if num_items_in_batch is not None else 1
                loss = loss + self.router_aux_loss_coef * outputs.aux_loss / steps
            n_valid = self.accelerator.gather_for_metrics(outputs.label_mask.sum()).sum()
            if n_valid > 0 and outputs.is_top1 is not None:
                correct = self.accelerator.gather_for_metrics(outputs.is_top1.sum()).sum()
                self._metrics["train"]["mean_token_accuracy"].append((correct / n_valid).item())
            self._total_train_tokens += self.accelerator.gather_for_metrics(
                inputs["attention_mask"].sum()).sum().item() // self._tp_size
            self._metrics["train"]["num_tokens"] = [self._total_train_tokens]
            return (loss, outputs) if return_outputs else loss

    return VistaSFTTrainer


class _KeepWeights:
    """Wraps TRL's collator so a ``class_weight`` column survives collation as a float tensor."""

    def __init__(self, base: Any) -> None:
        self.base = base

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        if not examples or "class_weight" not in examples[0]:
            return self.base(examples)
        weights = [ex["class_weight"] for ex in examples]
        batch = self.base([{k: v for k, v in ex.items() if k != "class_weight"} for ex in examples])
        batch["class_weight"] = torch.tensor(weights, dtype=torch.float32)
        return batch


# --------------------------------------------------------------------------------------------------
# Configs
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrainPrecision:
    """How a stage trains: the dtype the base model is loaded in and the autocast Trainer uses."""

    model_dtype: str                 # bfloat16 | float16 | float32
    bf16: bool                       # Trainer bf16 autocast
    fp16: bool                       # Trainer fp16 autocast (GPUs without bf16)
    reason: str
    native: bool = True              # False: the device emulates the chosen half precision (slow)

    @property
    def compute_dtype(self) -> str:
        return "bfloat16" if self.bf16 else "float16" if self.fp16 else "float32"


def training_device(recipe: Recipe) -> str:
    """cpu when ``train.use_cpu`` or no accelerator is visible, else the accelerator."""
    import torch

    if recipe.train.use_cpu or not _accelerator_available():
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "mps"


def training_precision(recipe: Recipe, cap) -> TrainPrecision:
    """``student.dtype`` and ``train.bf16`` resolved on the device ``cap`` (a :class:`hardware.Capability`).

    auto/auto: bf16 weights and autocast where the device computes bf16 natively; fp16 autocast on GPUs
    without bf16; float32 otherwise. An explicit ``train.bf16: true`` is honoured where it can run (a CPU
    without native bf16 emulates it: a warning says so); on a GPU without bf16 it falls back to fp16."""
    from ..hardware import choose_dtype

    where = f"{recipe.path or '<recipe>'}: student.dtype"
    try:
        p = choose_dtype(recipe.student.dtype, cap, where)
    except ValueError as e:
        raise RecipeError(str(e)) from None
    want = recipe.train.bf16
    reason = p.reason
    if want == "auto":
        bf16 = p.dtype == "bfloat16"
    elif want and cap.device == "cuda" and not cap.cuda_bf16:
        log.warning("%s: train.bf16 is true but %s; training with fp16 autocast", recipe.path, cap.describe())
        bf16, reason = False, f"{reason}; train.bf16 true but the GPU has no bf16 -> fp16 autocast"
    else:
        bf16 = bool(want)
        reason = f"{reason}; train.bf16={str(bf16).lower()} as requested"
    fp16 = not bf16 and p.dtype in ("float16", "bfloat16") and cap.device in ("cuda", "mps")
    model = "float32" if p.dtype == "bfloat16" and not bf16 and not fp16 else p.dtype
    if fp16 and model == "bfloat16":
        model = "float16"
    native = not (cap.device == "cpu" and (bf16 or model != "float32") and not cap.native_bf16)
    return TrainPrecision(model, bf16, fp16, reason, native)


def _accelerator_available() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return torch.cuda.is_available() or bool(mps is not None and mps.is_available())


def build_lora_config(recipe: Recipe):
    """PEFT ``LoraConfig`` from ``recipe.lora`` (all linear layers by default)."""
    from peft import LoraConfig

    lora = recipe.lora
    return LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                      target_modules=lora.target_modules, bias="none", task_type="CAUSAL_LM")


def build_quantization_config(recipe: Recipe, precision: TrainPrecision):
    """4-bit NF4 (double quantisation) for QLoRA, or None; computes and stores in the training dtype."""
    if not recipe.student.load_in_4bit:
        return None
    import torch
    from transformers import BitsAndBytesConfig

    dtype = getattr(torch, precision.compute_dtype)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=dtype, bnb_4bit_quant_storage=dtype)


def build_sft_config(recipe: Recipe, output_dir: str | Path, eos_token: str, has_eval: bool, resuming: bool,
                     precision: TrainPrecision | None = None):
    """``SFTConfig`` from ``recipe.train``; ``train.options`` may set any other SFTConfig field.

    ``precision``: decided by :func:`training_precision` on this machine when not given."""
    from trl import SFTConfig

    from ..hardware import detect

    t = recipe.train
    if not t.use_cpu and not _accelerator_available():
        raise RecipeError(f"{recipe.path}: train.use_cpu is false but no GPU is visible; run on a GPU "
                          "machine or override train.use_cpu=true")
    if precision is None:
        precision = training_precision(recipe, detect(training_device(recipe)))
    bf16, fp16 = precision.bf16, precision.fp16
    init_kwargs: dict[str, Any] = {"dtype": precision.model_dtype}
    if recipe.student.attn_implementation:
        init_kwargs["attn_implementation"] = recipe.student.attn_implementation
    kwargs: dict[str, Any] = dict(
        output_dir=str(output_dir), learning_rate=t.learning_rate, num_train_epochs=t.num_train_epochs,
        max_steps=t.max_steps, per_device_train_batch_size=t.per_device_train_batch_size,
        per_device_eval_batch_size=t.per_device_train_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps, max_length=t.max_length,
        gradient_checkpointing=t.gradient_checkpointing, bf16=bf16, fp16=fp16, use_cpu=t.use_cpu,
        logging_steps=t.logging_steps, save_strategy="steps", save_steps=t.save_steps,
        save_total_limit=t.save_total_limit, eval_strategy="steps" if has_eval and t.eval_steps > 0 else "no",
        eval_steps=t.eval_steps if t.eval_steps > 0 else None,
        eval_on_start=has_eval and t.eval_steps > 0 and not resuming,
        seed=t.seed, completion_only_loss=True, eos_token=eos_token, model_init_kwargs=init_kwargs,
        report_to="none", dataloader_num_workers=0, logging_first_step=True,
    )
    if "activation_checkpointing" in SFTConfig.__dataclass_fields__:  # transformers >= 5.x renamed it
        kwargs["activation_checkpointing"] = kwargs.pop("gradient_checkpointing")
    unknown = set(t.options) - {f for f in SFTConfig.__dataclass_fields__}
    if unknown:
        raise RecipeError(f"{recipe.path}: train.options {sorted(unknown)} are not SFTConfig fields")
    if t.options.get("model_init_kwargs"):
        init_kwargs.update(t.options["model_init_kwargs"])
    kwargs.update({k: v for k, v in t.options.items() if k != "model_init_kwargs"})
    return SFTConfig(**kwargs)


# --------------------------------------------------------------------------------------------------
# Model card
# --------------------------------------------------------------------------------------------------

def _fmt(x: Any) -> str:
    return f"{x:.4f}" if isinstance(x, float) else str(x)


def write_model_card(path: Path, summary: dict[str, Any]) -> None:
    """``README.md`` of an adapter: teacher, silver data, hyperparameters, loss curves."""
    s = summary
    hp = s["hyperparameters"]
    lines = [
        "---",
        f"base_model: {s['base_model']}",
        "library_name: peft",
        "tags: [vista-distill, vista, lora, sft, trl]",
        "---",
        "",
        f"# {s['recipe']} / {s['stage']}: VISTA {s['stage']} student adapter",
        "",
        f"LoRA adapter for stage {s['stage'][-1]} of the VISTA pipeline, trained by vista-distill on a "
        "teacher's silver data (compact student prompts). Use the folder above this one as the scorer's "
        "adapters:",
        "",
        "```bash",
        "vista-distill score --input dialogues.json --output out.jsonl --adapters "
        f"{Path(s['output_dir']).parent}" + (f" --model {s['base_model']}" if s["base_model_arg"] else ""),
        "```",
        "",
        "## Data",
        "",
        "| | |",
        "| --- | --- |",
        f"| teacher | {s['teacher']} |",
        f"| silver data | `{s['silver']['path']}` |",
        f"| silver fingerprint | `{s['silver']['fingerprint']}` |",
        f"| train / test examples | {s['silver']['train_examples']} / {s['silver']['test_examples']} |",
        f"| dropped (longer than max_length {hp['max_length']}) | {s['silver']['dropped_train']} train, "
        f"{s['silver']['dropped_test']} test |",
        f"| class balance | {s['class_balance']['mode']} |",
    ]
    if s["class_balance"]["counts"]:
        lines.append("")
        lines.append("| class | train examples | weight |")
        lines.append("| --- | ---: | ---: |")
        for c, n in s["class_balance"]["counts"].items():
            w = s["class_balance"]["weights"].get(c)
            lines.append(f"| {c} | {n} | {_fmt(w) if w is not None else '1'} |")
    lines += ["", "## Hyperparameters", "", "| | |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in hp.items()]
    hw = s.get("hardware")
    if hw:
        lines += ["", "## Hardware", "", "| | |", "| --- | --- |",
                  f"| device | {hw['device']}: {hw['device_name']} |",
                  f"| CPU | {hw['cpu']} (flags: {', '.join(hw['cpu_flags']) or 'n/a'}) |",
                  f"| precision | weights {hw['dtype']}, autocast "
                  f"{'bf16' if hw.get('bf16_autocast') else 'fp16' if hw.get('fp16_autocast') else 'none'} "
                  f"({hw['dtype_reason']}) |",
                  f"| threads | {hw['threads']} ({hw['threads_reason']}) |",
                  f"| torch | {hw['torch']} |"]
    r = s["results"]
    weighted = s["class_balance"]["mode"] == "weights" and s["class_balance"]["weights"]
    evals = (f"* eval loss: {_fmt(r['first_eval_loss'])} at step {r['first_eval_step']} -> "
             f"{_fmt(r['final_eval_loss'])} at step {r['final_eval_step']}"
             if r["final_eval_loss"] is not None else "* eval loss: no test split")
    lines += [
        "", "## Results", "",
        f"Steps {r['global_step']}, {r['train_tokens']} training tokens, {r['train_runtime_s']:.0f} s"
        + (f", resumed from `{Path(s['resumed_from']).name}`" if s.get("resumed_from") else "") + ".",
        "",
        f"* final train loss (last logged): {_fmt(r['final_train_loss'])}"
        + (" (class-weighted)" if weighted else ""),
        evals,
        "",
        "| step | train loss | eval loss |",
        "| ---: | ---: | ---: |",
    ]
    for step, row in sorted(r["curve"].items(), key=lambda kv: int(kv[0])):
        lines.append(f"| {step} | {_fmt(row.get('loss', ''))} | {_fmt(row.get('eval_loss', ''))} |")
    lines.append("")
    path.write_text("\n".join(lines))


def _curve(log_history: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    curve: dict[str, dict[str, float]] = {}
    for row in log_history:
        for key in ("loss", "eval_loss"):
            if key in row and "step" in row:
                curve.setdefault(str(row["step"]), {})[key] = float(row[key])
    return curve


# --------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------

@dataclass
class StageRun:
    """A prepared stage: the trainer and what the model card needs to know."""

    recipe: Recipe
    stage: str
    trainer: Any
    output_dir: Path
    silver_dir: Path
    manifest: dict[str, Any]
    silver: Any                      # the raw DatasetDict
    eos_token: str
    class_balance: str
    weights: dict[str, float]
    dropped: tuple[int, int]         # (train, test) examples over max_length
    resume: Path | None
    fingerprint: str                 # of the stage's silver data
    hardware: dict[str, Any] | None = None   # precision, threads and machine (hardware.RunHardware)


def training_hardware(recipe: Recipe, announce: bool = False):
    """Decide (and apply) this machine's training precision and threads; ``(TrainPrecision, RunHardware)``."""
    from ..hardware import PrecisionChoice, RunHardware, apply_threads, current_threads, detect

    cap = detect(training_device(recipe))
    precision = training_precision(recipe, cap)
    t = recipe.train
    threads = apply_threads(t.cpu_threads) if t.cpu_threads is not None else current_threads()
    hw = RunHardware(PrecisionChoice(precision.model_dtype, recipe.student.dtype, precision.reason,
                                     precision.native), threads, cap,
                     {"bf16_autocast": precision.bf16, "fp16_autocast": precision.fp16})
    if not precision.native:
        from ..hardware import EMULATED_BF16_NOTE

        log.warning("%s: training in %s on %s: %s; student.dtype=auto train.bf16=auto trains at full speed",
                    recipe.path, precision.compute_dtype, cap.describe(), EMULATED_BF16_NOTE)
    if announce:
        print(f"train: {hw.line()}; autocast {precision.compute_dtype}", file=sys.stderr, flush=True)
    return precision, hw


def prepare_stage(recipe: Recipe, stage: str) -> StageRun:
    """Load and tokenize the stage's silver data and build the trainer (model + LoRA); no training yet."""
    from transformers import AutoTokenizer

    from ..backends.models import resolve_model

    if stage not in STAGES:
        raise TrainError(f"unknown stage {stage!r}; expected one of {list(STAGES)}")
    t = recipe.train
    if t.class_balance not in CLASS_BALANCE:
        raise RecipeError(f"{recipe.path}: train.class_balance {t.class_balance!r}; expected one of "
                          f"{list(CLASS_BALANCE)}")
    precision, hw = training_hardware(recipe)
    root = silver_root(recipe)
    manifest = read_manifest(root)
    dd = load_silver(root, stage)
    out = stage_output_dir(recipe, stage)
    model_path = resolve_model(recipe.student.model)

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    eot, eot_id = end_of_turn(tokenizer)

    mode = t.class_balance if stage in STAGE_CLASSES else "none"
    weights = class_weights(list(dd["train"]["label"]), t.class_weight_cap) if mode != "none" else {}
    kw = recipe.student.chat_template_kwargs   # the same template variables the scorer renders with
    train_ds, dropped_train = encode_split(dd["train"], tokenizer, eot_id, t.max_length,
                                           weights if mode == "weights" else None, kw)
    if len(train_ds) == 0:
        raise TrainError(f"{root / stage}[train]: no example fits train.max_length={t.max_length}")
    test = dd["test"] if "test" in dd and len(dd["test"]) else None
    eval_ds, dropped_test = None, 0
    if test is not None:
        eval_ds, dropped_test = encode_split(test, tokenizer, eot_id, t.max_length, template_kwargs=kw)
    if eval_ds is not None and len(eval_ds) == 0:
        eval_ds = None
    sample_weights = [weights[lab] for lab in train_ds["label"]] if mode == "sampler" else None
    train_ds = train_ds.remove_columns("label")
    if eval_ds is not None:
        eval_ds = eval_ds.remove_columns("label")

    fingerprint = silver_fingerprint(dd, manifest, stage)
    resume = last_checkpoint(out) if t.resume else None
    if resume is not None:
        _check_same_run(out, {"silver_fingerprint": fingerprint, "base_model": recipe.student.model})
    args = build_sft_config(recipe, out, eot, has_eval=eval_ds is not None, resuming=resume is not None,
                            precision=precision)
    trainer = _trainer_class()(
        model=model_path, args=args, train_dataset=train_ds, eval_dataset=eval_ds, processing_class=tokenizer,
        peft_config=build_lora_config(recipe), sample_weights=sample_weights,
        quantization_config=build_quantization_config(recipe, precision),
    )
    return StageRun(recipe, stage, trainer, out, root, manifest, dd, eot, mode, weights,
                    (dropped_train, dropped_test), resume, fingerprint, hw.to_dict())


RUN_INFO = "run_info.json"


def silver_fingerprint(dd, manifest: Mapping[str, Any], stage: str) -> str:
    """The stage's fingerprint from the distill manifest, else the datasets' own fingerprints."""
    return (manifest.get("fingerprints") or {}).get(stage) or manifest.get("fingerprint") or "+".join(
        f"{split}:{ds._fingerprint}" for split, ds in sorted(dd.items()))


def _check_same_run(out: Path, info: dict[str, Any]) -> None:
    """Refuse to resume checkpoints made from other silver data or another base model."""
    path = out / RUN_INFO
    try:
        before = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    diff = {k: (before.get(k), v) for k, v in info.items() if before.get(k) != v}
    if diff:
        what = ", ".join(f"{k} {a!r} then, {b!r} now" for k, (a, b) in diff.items())
        raise TrainError(f"{out}: its checkpoints come from another run ({what}); set train.resume=false to "
                         "start over, or choose another train.output_dir")


def _finished(recipe: Recipe, stage: str) -> dict[str, Any] | None:
    """The saved summary when the stage's last checkpoint already completed the run these settings plan
    on the same silver data and base model; checked before any model is loaded.

    (The Trainer resumed from a final checkpoint would train one more step and overwrite the summary.)
    """
    t = recipe.train
    out = stage_output_dir(recipe, stage)
    resume = last_checkpoint(out) if t.resume else None
    if resume is None:
        return None
    try:
        state = json.loads((resume / "trainer_state.json").read_text())
        summary = json.loads((out / SUMMARY_NAME).read_text())
    except (OSError, ValueError):
        return None
    root = silver_root(recipe)
    hp = summary.get("hyperparameters") or {}
    planned = (t.num_train_epochs, t.options.get("max_steps", t.max_steps), t.per_device_train_batch_size,
               t.gradient_accumulation_steps, silver_fingerprint(load_silver(root, stage), read_manifest(root), stage),
               recipe.student.model)
    saved = (hp.get("num_train_epochs"), hp.get("max_steps"), hp.get("per_device_train_batch_size"),
             hp.get("gradient_accumulation_steps"), (summary.get("silver") or {}).get("fingerprint"),
             summary.get("base_model_arg"))
    step = state.get("global_step", 0)
    if planned == saved and step >= state.get("max_steps", step + 1) and \
            (summary.get("results") or {}).get("global_step") == step:
        return summary
    return None


def train_stage(recipe: Recipe, stage: str) -> dict[str, Any]:
    """Train (or resume) one stage's adapter; returns the training summary (also written to disk).

    A stage whose last checkpoint finished the planned run is not trained again: its summary is returned."""
    import gc

    import torch

    done = _finished(recipe, stage)
    if done is not None:
        from accelerate import PartialState

        if PartialState().is_main_process:
            print(f"[{stage}] already trained ({done['results']['global_step']} steps) in "
                  f"{stage_output_dir(recipe, stage)}; train.resume=false starts over", flush=True)
        return done
    run = prepare_stage(recipe, stage)
    trainer, out, t = run.trainer, run.output_dir, recipe.train
    if run.resume is not None:
        trainer.accelerator.print(f"[{stage}] resuming from {run.resume} (train.resume=false starts over)")
    if trainer.accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        (out / RUN_INFO).write_text(json.dumps({"silver_fingerprint": run.fingerprint,
                                                "base_model": recipe.student.model}, indent=2))
    start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=str(run.resume) if run.resume is not None else None)
    runtime = time.perf_counter() - start
    trainer.save_model(str(out))

    args = trainer.args
    history = trainer.state.log_history
    train_losses = [(r["step"], r["loss"]) for r in history if "loss" in r]
    evals = [(r["step"], r["eval_loss"]) for r in history if "eval_loss" in r]
    hp = {
        "learning_rate": t.learning_rate, "num_train_epochs": t.num_train_epochs, "max_steps": args.max_steps,
        "per_device_train_batch_size": t.per_device_train_batch_size,
        "gradient_accumulation_steps": t.gradient_accumulation_steps, "world_size": args.world_size,
        "max_length": t.max_length, "lora_r": recipe.lora.r, "lora_alpha": recipe.lora.alpha,
        "lora_dropout": recipe.lora.dropout, "target_modules": recipe.lora.target_modules,
        "load_in_4bit": recipe.student.load_in_4bit, "dtype": str(args.model_init_kwargs["dtype"]),
        "bf16": args.bf16, "fp16": args.fp16,
        "gradient_checkpointing": t.gradient_checkpointing, "seed": t.seed, "eos_token": run.eos_token,
        "trainable_params": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad),
    }
    dd, manifest = run.silver, run.manifest
    teachers = sorted(set(dd["train"]["teacher"])) if "teacher" in dd["train"].column_names else []
    eval_ds = trainer.eval_dataset
    summary: dict[str, Any] = {
        "recipe": recipe.name, "recipe_path": recipe.path, "stage": stage, "output_dir": str(out),
        # the embedded model is this checkpoint, dequantised from its Q4_1 GGUF
        "base_model": recipe.student.model or "HuggingFaceTB/SmolLM2-135M-Instruct",
        "base_model_arg": recipe.student.model,
        "teacher": manifest.get("teacher") or ", ".join(teachers) or "unknown",
        "silver": {
            "path": str(run.silver_dir / stage), "fingerprint": run.fingerprint,
            "manifest_fingerprint": manifest.get("fingerprint"),
            "train_examples": len(trainer.train_dataset),
            "test_examples": len(eval_ds) if eval_ds is not None else 0,
            "dropped_train": run.dropped[0], "dropped_test": run.dropped[1],
            "prompt_style": (sorted(set(dd["train"]["prompt_style"]))
                             if "prompt_style" in dd["train"].column_names else None),
        },
        "class_balance": {"mode": run.class_balance, "weights": run.weights,
                          "counts": dict(sorted(Counter(dd["train"]["label"]).items()))
                          if run.class_balance != "none" else {}},
        "hyperparameters": hp,
        # under DDP each process draws its own shard: batches per epoch per process shrink with world size
        "distributed": {"world_size": args.world_size,
                        "examples_per_step": t.per_device_train_batch_size * args.world_size
                        * t.gradient_accumulation_steps,
                        "process_batches_per_epoch": len(trainer.get_train_dataloader())},
        "hardware": run.hardware,
        "resumed_from": str(run.resume) if run.resume is not None else None,
        "results": {
            "global_step": trainer.state.global_step, "train_runtime_s": runtime,
            "train_tokens": int(getattr(trainer, "_total_train_tokens", 0)),
            "final_train_loss": train_losses[-1][1] if train_losses else None,
            "first_eval_step": evals[0][0] if evals else None,
            "first_eval_loss": evals[0][1] if evals else None,
            "final_eval_step": evals[-1][0] if evals else None,
            "final_eval_loss": evals[-1][1] if evals else None,
            "train_loss_mean": result.training_loss, "curve": _curve(history),
            "peak_cuda_memory_gb": (torch.cuda.max_memory_allocated() / 2**30
                                    if torch.cuda.is_available() else None),
        },
    }
    if trainer.accelerator.is_main_process:
        (out / SUMMARY_NAME).write_text(json.dumps(summary, indent=2, default=str))
        write_model_card(out / "README.md", summary)  # after save_model: PEFT writes its own README there
    trainer.accelerator.wait_for_everyone()
    del trainer, run
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return summary


def train_stages(recipe: Recipe, stages: Sequence[str] | str = "all") -> list[dict[str, Any]]:
    """Train stages in order (``"all"``: ``recipe.train.stages``)."""
    if stages == "all":
        todo = list(recipe.train.stages)
    else:
        todo = [stages] if isinstance(stages, str) else list(stages)
    bad = [s for s in todo if s not in STAGES]
    if bad:
        raise TrainError(f"unknown stage(s) {bad}; expected {list(STAGES)}")
    from accelerate import PartialState

    training_hardware(recipe, announce=PartialState().is_main_process)
    return [train_stage(recipe, s) for s in todo]


# --------------------------------------------------------------------------------------------------
# Entry point shared by train/stage{1,2,3}.py
# --------------------------------------------------------------------------------------------------

class OverridesParser(argparse.ArgumentParser):
    """Collects everything it does not know (``--train.lr 1e-4``, ``train.lr=1e-4``) into ``overrides``."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        ns, extra = super().parse_known_args(args, namespace)
        ns.overrides = list(getattr(ns, "overrides", None) or []) + list(extra)
        return ns, []


def make_parser(stage: str | None = None) -> argparse.ArgumentParser:
    prog = f"train/{stage}.py" if stage else "vista_distill.train.sft"
    p = OverridesParser(
        prog=prog, description=f"Train the {stage or 'stage'} LoRA adapter from a recipe's silver data.",
        epilog="Overrides: --section.key value or section.key=value, e.g. --train.max_steps 50 lora.r=8",
    )
    p.add_argument("--config", required=True, help="recipe YAML (recipes/*.yaml)")
    if stage is None:
        p.add_argument("--stage", default="all", choices=("all", *STAGES))
    return p


def main(stage: str | None = None, argv: list[str] | None = None) -> int:
    """``python train/stage2.py --config R.yaml [overrides]`` (also under ``accelerate launch``)."""
    args = make_parser(stage).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        recipe = load_recipe(args.config, args.overrides)
        summaries = train_stages(recipe, stage or args.stage)
    except (TrainError, RecipeError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for s in summaries:
        r = s["results"]
        ev = (f", eval loss {r['first_eval_loss']:.4f} -> {r['final_eval_loss']:.4f}"
              if r["final_eval_loss"] is not None else "")
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"[{s['stage']}] {r['global_step']} steps{ev}; adapter: {s['output_dir']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
