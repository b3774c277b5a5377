"""The Hugging Face configs of a stage, from the recipe: ``SFTConfig`` (TRL), ``LoraConfig`` (PEFT),
the 4-bit ``BitsAndBytesConfig`` of QLoRA, and the precision they train in on this machine."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..backends.model_loading import four_bit_config
from ..config import Recipe, RecipeError

log = logging.getLogger(__name__)


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

    auto/auto: bf16 weights and autocast where ``choose_dtype`` picks bf16 (native, and on a CPU measured
    faster); fp16 autocast on GPUs
    without bf16; float32 otherwise. An explicit ``train.bf16: true`` is honoured where it can run (a CPU
    without native bf16 emulates it: a warning says so); on a GPU without bf16 it falls back to fp16."""
    from ..runtime.hardware import choose_dtype

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
    layers, targets = lora.layers_to_transform, lora.target_modules
    if layers is not None:
        config = _model_config(recipe)
        layers = sorted({i % config.num_hidden_layers for i in layers})
        if targets == "all-linear":   # PEFT takes layers_to_transform with a list of module names only
            targets = decoder_linear_names(config)
    return LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                      target_modules=targets, bias="none", task_type="CAUSAL_LM", layers_to_transform=layers)


def _model_config(recipe: Recipe):
    from transformers import AutoConfig

    from ..backends.model_loading import resolve_model

    return AutoConfig.from_pretrained(resolve_model(recipe.student.model))


def decoder_linear_names(config) -> list[str]:
    """Names of the linear layers inside the decoder blocks (what ``all-linear`` adapts), read from the
    architecture built on the meta device (no weights)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sorted({name.rsplit(".", 1)[-1] for name, mod in model.named_modules()
                   if isinstance(mod, torch.nn.Linear) and ".layers." in f".{name}"})


def build_quantization_config(recipe: Recipe, precision: TrainPrecision):
    """4-bit NF4 (double quantisation) for QLoRA, or None; computes and stores in the training dtype."""
    if not recipe.student.load_in_4bit:
        return None
    return four_bit_config(precision.compute_dtype, quant_storage=precision.compute_dtype)


def build_sft_config(recipe: Recipe, output_dir: str | Path, eos_token: str, has_eval: bool, resuming: bool,
                     precision: TrainPrecision | None = None):
    """``SFTConfig`` from ``recipe.train``; ``train.options`` may set any other SFTConfig field.

    ``precision``: decided by :func:`training_precision` on this machine when not given."""
    from trl import SFTConfig

    from ..runtime.hardware import detect

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
    evaluate = has_eval and t.eval_steps > 0
    kwargs: dict[str, Any] = {
        "output_dir": str(output_dir), "learning_rate": t.learning_rate,
        "num_train_epochs": t.num_train_epochs, "max_steps": t.max_steps,
        "per_device_train_batch_size": t.per_device_train_batch_size,
        "per_device_eval_batch_size": t.per_device_train_batch_size,
        "gradient_accumulation_steps": t.gradient_accumulation_steps, "max_length": t.max_length,
        "gradient_checkpointing": t.gradient_checkpointing, "bf16": bf16, "fp16": fp16, "use_cpu": t.use_cpu,
        "logging_steps": t.logging_steps, "save_strategy": "steps", "save_steps": t.save_steps,
        "save_total_limit": t.save_total_limit, "eval_strategy": "steps" if evaluate else "no",
        "eval_steps": t.eval_steps if t.eval_steps > 0 else None, "eval_on_start": evaluate and not resuming,
        "seed": t.seed, "completion_only_loss": True, "eos_token": eos_token, "model_init_kwargs": init_kwargs,
        "report_to": "none", "dataloader_num_workers": 0, "logging_first_step": True,
        # every column reaches the collator (TRL's reads its own keys): train/trainer.py's weights keep class_weight
        "remove_unused_columns": False,
        # the quiet terminal (progress.quiet_libraries): no per-step bar, the loss lines only
        "disable_tqdm": bool(os.environ.get("VISTA_DISTILL_QUIET")),
    }
    if "activation_checkpointing" in SFTConfig.__dataclass_fields__:  # transformers >= 5.x renamed it
        kwargs["activation_checkpointing"] = kwargs.pop("gradient_checkpointing")
    unknown = set(t.options) - {f for f in SFTConfig.__dataclass_fields__}
    if unknown:
        raise RecipeError(f"{recipe.path}: train.options {sorted(unknown)} are not SFTConfig fields")
    if t.options.get("model_init_kwargs"):
        init_kwargs.update(t.options["model_init_kwargs"])
    kwargs.update({k: v for k, v in t.options.items() if k != "model_init_kwargs"})
    kwargs.update(micro_batches(recipe))
    return SFTConfig(**kwargs)


def micro_batches(recipe: Recipe) -> dict[str, int]:
    """The SFTConfig batch fields that run ``train.per_device_train_batch_size`` as micro-batches of
    ``train.micro_batch_size`` (more accumulation steps, the same examples per optimizer step); {} without."""
    t = recipe.train
    micro, batch = t.micro_batch_size, t.per_device_train_batch_size
    if micro is None or micro == batch:
        return {}
    if micro < 1 or batch % micro:
        raise RecipeError(f"{recipe.path}: train.micro_batch_size {micro} must divide "
                          f"train.per_device_train_batch_size {batch}")
    return {"per_device_train_batch_size": micro,
            "gradient_accumulation_steps": t.gradient_accumulation_steps * (batch // micro)}


def training_hardware(recipe: Recipe, announce: bool = False):
    """Decide (and apply) this machine's training precision and threads; ``(TrainPrecision, RunHardware)``."""
    from ..runtime.hardware import PrecisionChoice, RunHardware, apply_threads, current_threads, detect

    cap = detect(training_device(recipe))
    precision = training_precision(recipe, cap)
    t = recipe.train
    threads = apply_threads(t.cpu_threads) if t.cpu_threads is not None else current_threads()
    hw = RunHardware(PrecisionChoice(precision.model_dtype, recipe.student.dtype, precision.reason,
                                     precision.native), threads, cap,
                     {"bf16_autocast": precision.bf16, "fp16_autocast": precision.fp16})
    if not precision.native:
        from ..runtime.hardware import EMULATED_BF16_NOTE

        log.warning("%s: training in %s on %s: %s; student.dtype=auto train.bf16=auto trains at full speed",
                    recipe.path, precision.compute_dtype, cap.describe(), EMULATED_BF16_NOTE)
    if announce:
        print(f"train: {hw.line()}; autocast {precision.compute_dtype}", file=sys.stderr, flush=True)
    return precision, hw
