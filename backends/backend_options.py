"""The in-process backend's settings (:class:`BackendOptions`) and its loader (:func:`load_causal_lm`): the
tokenizer and the causal LM, on their device, with the CPU attention and LM-head paths of :mod:`.forward_paths`.
:class:`.transformers.TransformersBackend` takes the settings as keywords or as one ``options`` object."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .forward_paths import contiguous_head_input, use_gqa_sdpa


@dataclasses.dataclass(frozen=True)
class BackendOptions:
    """How :class:`.transformers.TransformersBackend` loads and runs its model.

    Hardware: ``dtype`` auto: chosen from the device (:mod:`runtime.hardware`); ``device``: None: ``cuda`` when there
    is one, else ``cpu``; ``threads``: None leaves torch's setting alone, ``auto`` or a number sets it
    (:func:`runtime.hardware.apply_threads`).

    Loading: ``load_in_4bit`` (bitsandbytes, :func:`.model_loading.four_bit_config`); ``attn_implementation``:
    transformers' (None: its default, and the grouped-query SDPA path on a CPU); ``merge_adapters``: see
    :func:`.adapters.merged_stages`; ``chat_template_kwargs``: template variables for every prompt (default:
    thinking off).

    Batching: ``batch_size``; ``prefix_cache``: the stage's shared few-shot prefix computed once; ``prefill_tokens``:
    a label-scoring batch stops growing before its rows times its longest prompt pass this many tokens; ``auto``:
    ``forward_paths.CPU_PREFILL_TOKENS`` on a CPU, none on a GPU (its batches fill the card); ``cuda_graphs``: on a
    GPU, replay stage 1's decode steps from CUDA graphs (:mod:`.slot_decoding`).

    Label scoring: a stage adapter folder with an ``evidence_head.json`` (:mod:`.evidence_head`) has its labels
    scored with the claim's pointwise mutual information with the reference; ``evidence_features``: compute that
    and the label margin for every label request (``meta["evidence"]``) even without a head (to fit one);
    ``label_memo``: label answers kept for prompts asked again (:mod:`.label_memo`; 0: none)."""

    dtype: str = "auto"
    device: str | None = None
    threads: int | str | None = None
    load_in_4bit: bool = False
    attn_implementation: str | None = None
    merge_adapters: bool | str = "auto"
    chat_template_kwargs: Mapping[str, Any] | None = None
    batch_size: int = 16
    prefix_cache: bool = True
    prefill_tokens: int | str | None = "auto"
    cuda_graphs: bool = True
    evidence_features: bool = False
    label_memo: int = 0


def load_causal_lm(model_path: str | Path, options: BackendOptions, device: str, torch_dtype: Any):
    """The tokenizer (padding with EOS where it has no pad token) and the model, in ``torch_dtype`` (4-bit when
    asked) on ``device``; on a CPU with transformers' default attention, grouped-query SDPA."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .model_loading import four_bit_config

    kwargs: dict = {"dtype": torch_dtype}
    if options.attn_implementation:
        kwargs["attn_implementation"] = options.attn_implementation
    if options.load_in_4bit:
        kwargs["quantization_config"] = four_bit_config(torch_dtype)
        kwargs["device_map"] = {"": device}
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
    if not options.load_in_4bit:
        model.to(device)
    if device == "cpu" and not options.attn_implementation:
        use_gqa_sdpa(model)
    contiguous_head_input(model)
    return tokenizer, model
