"""Stage adapters: finding each stage's PEFT adapter folder, loading them, and merging them for inference.

:class:`MergedStages` merges each stage's LoRA into its own copy of the weights it adapts and swaps those copies in
per stage, so a forward runs plain linear layers. That is exact up to float rounding where the model computes in
float32 (the default there: ``merge_adapters="auto"``). In bf16 the rounding of the merged weight to bf16's 8-bit
mantissa keeps a bit or two of an adapter's small delta and changes what a small student says (docs/performance.md,
'CPU kinds and precision'): there it is opt-in (``merge_adapters=True``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.vocabulary import ALL_STAGES

log = logging.getLogger(__name__)


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
        broken = [s for s in ALL_STAGES if (root / s).is_dir() and s not in found]
        if broken:   # its stage would silently run on the base model, with no adapter and no head
            raise FileNotFoundError(f"{root / broken[0]}: the {broken[0]} folder has no adapter_config.json; restore "
                                    f"it, train the stage again, or remove the folder to run {broken[0]} on the base "
                                    "model")
        if not found:
            raise FileNotFoundError(
                f"{root}: no stage adapters found "
                f"(expected {', '.join(f'{s}/adapter_config.json' for s in ALL_STAGES)})"
            )
    for stage, path in found.items():
        if not (path / "adapter_config.json").exists():
            raise FileNotFoundError(f"{path}: not a PEFT adapter (no adapter_config.json) for {stage}")
        check_stage_folder(stage, path)
    return found


WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
MAX_LORA_SCALE = 1024.0   # lora_alpha / r; PEFT's recipes use 1-4, and a larger scale only flips verdicts


def check_stage_folder(stage: str, path: Path) -> None:
    """A stage's adapter folder, checked before PEFT reads it: ``adapter_config.json`` a LoRA config with a positive
    rank and a finite, sane scale; the weights file there, readable, every tensor finite. A ``SchemaError`` names the
    stage's file and what is wrong (PEFT's own errors name neither, or take a folder without weights for a Hub id)."""
    import math

    from ..data.io import SchemaError

    config = path / "adapter_config.json"
    try:
        c = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise SchemaError(config, f"{stage}: not a PEFT adapter config ({' '.join(str(e).split())[:120]}); train "
                                  "the stage again") from None
    if not isinstance(c, dict):
        raise SchemaError(config, f"{stage}: expected a JSON object (a PEFT adapter config)")
    if c.get("peft_type", "LORA") != "LORA":
        raise SchemaError(config, f"{stage}: a {c.get('peft_type')!r} adapter; the stages take LoRA", field="peft_type")
    r, alpha = c.get("r"), c.get("lora_alpha", 8)
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise SchemaError(config, f"{stage}: expected a positive integer rank, got {json.dumps(r)[:40]}", field="r")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha <= 0 \
            or alpha / r > MAX_LORA_SCALE:
        raise SchemaError(config, f"{stage}: expected a positive lora_alpha at most {MAX_LORA_SCALE:g} x r, got "
                                  f"{json.dumps(alpha)[:40]}", field="lora_alpha")
    weights = next((path / w for w in WEIGHTS if (path / w).is_file()), None)
    if weights is None:
        raise SchemaError(path, f"{stage}: no adapter weights ({' or '.join(WEIGHTS)}); train the stage again")
    if weights.suffix == ".safetensors":
        _check_weights(stage, weights)


def _check_weights(stage: str, weights: Path) -> None:
    """Every tensor of a safetensors file readable and finite (NaN or Infinity weights flip verdicts silently)."""
    import torch
    from safetensors import safe_open

    from ..data.io import SchemaError

    try:
        with safe_open(str(weights), framework="pt") as f:
            for key in f.keys():   # noqa: SIM118 (safe_open is not a mapping)
                t = f.get_tensor(key)
                if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                    raise SchemaError(weights, f"{stage}: tensor {key} holds NaN or Infinity; train the stage again")
    except SchemaError:
        raise
    except Exception as e:  # noqa: BLE001 - safetensors' errors (header, sizes, dtypes) as the stage's one line
        raise SchemaError(weights, f"{stage}: unreadable adapter weights ({' '.join(str(e).split())[:160]}); "
                                   "train the stage again") from None


def adapters_in_dtype(model: Any, dtype: Any) -> None:
    """Cast the LoRA weights to the base model's compute dtype. PEFT keeps them in float32, so on a GPU every LoRA
    forward casts its input and output (docs/performance.md, 'GPU figures'); on a CPU they stay float32."""
    for name, param in model.named_parameters():
        if "lora_" in name and param.dtype != dtype and param.dtype.is_floating_point:
            param.data = param.data.to(dtype)


MERGE_MEMORY_SHARE = 0.25   # the stages' merged copies may take this share of the device's memory


class MergedStages:
    """A plain model (PEFT's wrappers removed) and, per stage, its LoRA merged into a copy of each weight it adapts
    (``W + scale * B @ A`` in float32, stored in the weight's dtype); :meth:`activate` swaps a stage's copies in
    (a stage without an adapter gets the base weights). Build it with :meth:`from_peft`, which says None where the
    adapters hold anything but plain LoRA on linear layers, or where the copies would not fit."""

    def __init__(self, model: Any, weights: list[tuple[Any, Any, dict[str, Any]]]) -> None:
        self.model = model
        self._weights = weights   # (linear layer, its base weight, {stage: merged weight})
        self.stages = sorted({stage for _, _, merged in weights for stage in merged})
        self.active: str | None = None

    @classmethod
    def from_peft(cls, peft_model: Any, memory_share: float = MERGE_MEMORY_SHARE) -> MergedStages | None:
        import torch
        from peft.tuners.lora import Linear as LoraLinear
        from peft.tuners.lora import LoraLayer

        from ..runtime.hardware import device_memory_bytes

        configs = peft_model.peft_config.values()
        if any(getattr(c, "use_dora", False) or getattr(c, "modules_to_save", None) or getattr(c, "lora_bias", False)
               for c in configs):
            return None
        layers = [m for m in peft_model.modules() if isinstance(m, LoraLayer)]
        if not layers or any(type(m) is not LoraLinear for m in layers):   # 4-bit, embedding, conv: keep PEFT
            return None
        base = [m.get_base_layer().weight for m in layers]
        extra = sum(w.numel() * w.element_size() * len(m.lora_A) for m, w in zip(layers, base))
        if extra > memory_share * device_memory_bytes(base[0].device):
            log.info("stage adapters not merged: %.1f GB of merged weights", extra / 1e9)
            return None
        weights = []
        with torch.no_grad():
            for m, w in zip(layers, base):
                merged = {stage: (w.float() + m.get_delta_weight(stage).float()).to(w.dtype) for stage in m.lora_A}
                weights.append((m.get_base_layer(), w.data, merged))
        return cls(peft_model.base_model.unload(), weights)

    def activate(self, stage: str | None) -> None:
        """Swap ``stage``'s merged weights in (None, or a stage without an adapter on a layer: its base weight)."""
        if stage == self.active:
            return
        for layer, base, merged in self._weights:
            layer.weight.data = merged.get(stage, base)
        self.active = stage


def merged_stages(peft_model: Any, merge: bool | str, dtype: Any) -> MergedStages | None:
    """:class:`MergedStages` of ``peft_model`` where ``merge`` asks for it: True, or ``auto`` where the model
    computes in float32 (merging is exact there up to float rounding; in half precision it moves the labels)."""
    import torch

    if merge not in (True, False, "auto"):
        raise ValueError(f"merge_adapters: {merge!r} (expected true, false or auto)")
    return MergedStages.from_peft(peft_model) if merge is True or (merge == "auto" and dtype == torch.float32) \
        else None


def load_stage_adapters(model: Any, adapters: Mapping[str, Path], dtype: Any, merge: bool | str = "auto",
                        on_gpu: bool = False, four_bit: bool = False) -> tuple[Any, MergedStages | None]:
    """``model`` with the stage adapters (:func:`with_stage_adapters`; cast to ``dtype`` on a GPU) and, where
    :func:`merged_stages` merges them (never over 4-bit weights), their :class:`MergedStages`, whose plain model
    is returned instead."""
    if not adapters:
        return model, None
    model = with_stage_adapters(model, adapters, dtype if on_gpu else None)
    merged = None if four_bit else merged_stages(model, merge, dtype)
    return (model, None) if merged is None else (merged.model, merged)


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

    from ..data.io import SchemaError
    from .model_loading import quiet_peft_wrap

    first = next(iter(adapters))
    with quiet_peft_wrap():
        for stage, p in adapters.items():
            try:
                if stage == first:
                    model = PeftModel.from_pretrained(model, str(p), adapter_name=first)
                else:
                    model.load_adapter(str(p), adapter_name=stage)
            except Exception as e:  # noqa: BLE001 - PEFT's errors (shapes, module names) as the stage's one line
                raise SchemaError(Path(p) / "adapter_config.json",
                                  f"{stage}: PEFT cannot load this adapter onto the base model "
                                  f"({type(e).__name__}: {' '.join(str(e).split())[:200]}); was it trained on "
                                  "another base model?") from None
    _check_loaded(model, adapters)
    if dtype is not None:
        adapters_in_dtype(model, dtype)
    return model


def _check_loaded(model: Any, adapters: Mapping[str, Path]) -> None:
    """Each stage's LoRA tensors in its file are the ones PEFT put on the model (PEFT leaves a tensor the file lacks
    at its initial value, with a warning at most)."""
    from safetensors import safe_open

    from ..data.io import SchemaError

    names = [n for n, _ in model.named_parameters() if "lora_" in n]
    for stage, p in adapters.items():
        weights = Path(p) / WEIGHTS[0]
        if not weights.is_file():
            continue
        with safe_open(str(weights), framework="pt") as f:
            saved = {k for k in f.keys() if "lora_" in k}   # noqa: SIM118 (safe_open is not a mapping)
        loaded = {n.replace(f".{stage}.", ".") for n in names if f".{stage}." in n}
        if saved != loaded:
            odd = sorted(saved - loaded) or sorted(loaded - saved)
            raise SchemaError(weights, f"{stage}: its LoRA tensors do not match the adapter config on this base "
                                       f"model ({len(saved)} saved, {len(loaded)} expected; e.g. {odd[0]}); train the "
                                       "stage again")


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


# What trained_with reads of a training summary: (field, its JSON type, in words); null is allowed for each.
_SUMMARY_FIELDS = (("base_model_arg", str, "a string"), ("silver", dict, "an object"),
                   ("hyperparameters", dict, "an object"))


def _training_summary(f: Path, error: type[ValueError]) -> dict[str, Any]:
    """A stage's ``training_summary.json``, the fields :func:`trained_with` reads checked; ``error`` names the file
    and field (SchemaError)."""
    try:
        d = json.loads(f.read_text())
    except ValueError as e:
        raise error(f, f"not valid JSON ({e}); delete it or train the stage again") from e
    if not isinstance(d, dict):
        raise error(f, f"expected a JSON object (a training summary), got {type(d).__name__}")
    for key, tp, what in _SUMMARY_FIELDS:
        if d.get(key) is not None and not isinstance(d[key], tp):
            raise error(f, f"expected {what} or null, got {type(d[key]).__name__}", field=key)
    styles = (d.get("silver") or {}).get("prompt_style")
    if styles is not None and not (isinstance(styles, list) and all(isinstance(s, str) for s in styles)):
        raise error(f, "expected a list of strings or null", field="silver.prompt_style")
    return d


def trained_with(adapters: Mapping[str, Path]) -> TrainedWith:
    """:class:`TrainedWith` from the stage folders' training summaries (absent ones tell nothing); stages that
    disagree on the base model are an error naming both."""
    from ..data.io import SchemaError  # a ValueError: bad input, the CLI's one-line error

    seen: dict[str, dict[str, Any]] = {}
    for stage, path in adapters.items():
        f = Path(path) / "training_summary.json"
        if f.exists():
            seen[stage] = _training_summary(f, SchemaError)
    models = {s: d.get("base_model_arg") for s, d in seen.items()}
    if len(set(models.values())) > 1:
        raise SchemaError(None, f"stage adapters trained on different base models: {models}")
    styles = [st for d in seen.values() for st in (d.get("silver") or {}).get("prompt_style") or []]
    return TrainedWith(
        model=next(iter(models.values()), None),
        prompt_style=styles[0] if styles else None,
        load_in_4bit=any(bool((d.get("hyperparameters") or {}).get("load_in_4bit")) for d in seen.values()),
    )
