"""Stage adapters: finding each stage's PEFT adapter folder.

Tried and discarded: each stage's adapter merged into its own copy of the adapted weights, swapped
in per stage so the forward runs plain linear layers. In bf16 it changed what the student says: an adapter's delta
is small beside the weight it is added to, and rounding their sum to bf16's 8-bit mantissa keeps a bit or two of
it (the demo's student, merged in bf16, filed 95 of 132 dev claims OUT-OF-SCOPE against 66 of 114 unmerged;
bench/results/profile_scorer_amd-epyc-avx512-bf16_merged-bf16.json). In float32 it was exact and saved 1.5% of a
student turn (bench/results/profile_scorer_amd-epyc-avx512-bf16_float32-*.json): not worth a second weight path."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.vocabulary import ALL_STAGES


def find_stage_adapters(adapters: str | Path | Mapping[str, str | Path] | None) -> dict[str, Path]:
    """``{stage: adapter_dir}`` from a mapping or from a folder holding ``stage1/``, ``stage2/``, ..."""
    if adapters is None:
        return {}
    if isinstance(adapters, Mapping):
        found = {str(k): Path(v) for k, v in adapters.items()}
    else:
        root = Path(adapters)
        if not root.is_dir():
            raise FileNotFoundError(f"{root}: adapters folder not found")
        found = {s: root / s for s in ALL_STAGES if (root / s / "adapter_config.json").exists()}
        if not found:
            raise FileNotFoundError(
                f"{root}: no stage adapters found (expected {', '.join(f'{s}/adapter_config.json' for s in ALL_STAGES)})"
            )
    for stage, path in found.items():
        if not (path / "adapter_config.json").exists():
            raise FileNotFoundError(f"{path}: not a PEFT adapter (no adapter_config.json) for {stage}")
    return found


def adapters_in_dtype(model: Any, dtype: Any) -> None:
    """Cast the LoRA weights to the base model's compute dtype. PEFT keeps them in float32, so on a GPU every LoRA
    forward casts its input and output (623k casts in one random-init Qwen3-8B run, bench/results/gpu_random_8b); on
    a CPU they stay float32, where the records were measured."""
    for name, param in model.named_parameters():
        if "lora_" in name and param.dtype != dtype and param.dtype.is_floating_point:
            param.data = param.data.to(dtype)


@dataclass(frozen=True)
class TrainedWith:
    """What a folder of stage adapters says of its training (each stage's ``training_summary.json``): the base
    model argument (None: the embedded model), the student prompt style and whether the base was loaded in 4 bits."""

    model: str | None
    prompt_style: str | None
    load_in_4bit: bool


def with_stage_adapters(model: Any, adapters: Mapping[str, Path], dtype: Any = None) -> Any:
    """``model`` as a PEFT model holding one LoRA adapter per stage, named by stage (the first one active); with
    ``dtype``, the adapters' weights cast to it (:func:`adapters_in_dtype`; on a GPU)."""
    from peft import PeftModel

    from .model_loading import quiet_peft_wrap

    (first, path), *rest = adapters.items()
    with quiet_peft_wrap():
        model = PeftModel.from_pretrained(model, str(path), adapter_name=first)
        for stage, p in rest:
            model.load_adapter(str(p), adapter_name=stage)
    if dtype is not None:
        adapters_in_dtype(model, dtype)
    return model


def fetch_adapters(name_or_path: str | Path, revision: str | None = None) -> Path:
    """A local folder of stage adapters, or a Hub repository holding one, downloaded (or found in the cache) with
    huggingface_hub's ``snapshot_download``, without training checkpoints."""
    path = Path(name_or_path).expanduser()
    hub_id = str(name_or_path).count("/") == 1 and not str(name_or_path).startswith((".", "/", "~"))
    if path.is_dir():
        return path
    if path.exists() or not hub_id:
        raise FileNotFoundError(f"{path}: adapters folder not found (a local folder or a Hub id such as user/name)")
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(str(name_or_path), revision=revision,
                                  ignore_patterns=["*/checkpoint-*/*", "*/training_args.bin", "*/optimizer.pt"]))


def trained_with(adapters: Mapping[str, Path]) -> TrainedWith:
    """:class:`TrainedWith` from the stage folders' training summaries (absent ones tell nothing); stages that
    disagree on the base model are an error naming both."""
    seen: dict[str, dict[str, Any]] = {}
    for stage, path in adapters.items():
        f = Path(path) / "training_summary.json"
        if f.exists():
            seen[stage] = json.loads(f.read_text())
    models = {s: d.get("base_model_arg") for s, d in seen.items()}
    if len(set(models.values())) > 1:
        raise ValueError(f"stage adapters trained on different base models: {models}")
    styles = [st for d in seen.values() for st in (d.get("silver") or {}).get("prompt_style") or []]
    return TrainedWith(model=next(iter(models.values()), None), prompt_style=styles[0] if styles else None,
                       load_in_4bit=any(bool((d.get("hyperparameters") or {}).get("load_in_4bit")) for d in seen.values()))
