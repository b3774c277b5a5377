"""Tiny randomly initialised models of the recipes' real architectures (Qwen3, Llama 3.1, Mistral).

Each keeps its architecture's class, attention layout (grouped-query heads, Qwen3's q/k norms, Llama 3.1's
rope scaling, a sliding window for Mistral), tied/untied embeddings and chat template, with two layers and
small widths; the tokenizer is the embedded SmolLM2 BPE plus the template's special tokens. Weights are
random: these exercise code paths, never accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCH = ROOT / "recipes" / "architectures"
TEMPLATES = Path(__file__).resolve().parent / "fixtures" / "architectures"

# recipe family -> (shipped config, template, special tokens: bos, eos, extra)
FAMILIES = {
    "qwen3": ("Qwen--Qwen3-8B.json", "qwen3.jinja",
              {"eos_token": "<|im_end|>", "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}),
    "llama-3.1": ("meta-llama--Llama-3.1-8B-Instruct.json", "llama3.1.jinja",
                  {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                   "additional_special_tokens": ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]}),
    "mistral": ("mistralai--Mistral-7B-Instruct-v0.3.json", "mistral-v0.3.jinja",
                {"bos_token": "<s>", "eos_token": "</s>", "additional_special_tokens": ["[INST]", "[/INST]"]}),
}
SHRINK = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 4096}


def family_of(recipe_name: str) -> str:
    return next(f for f in FAMILIES if recipe_name.startswith(f))


def build_tiny_model(family: str, out: Path, seed: int = 0) -> Path:
    """Write a tiny random model of ``family`` with its chat template into ``out``; return ``out``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from vista_distill.backends.model_loading import resolve_model

    config_file, template, special = FAMILIES[family]
    tok = AutoTokenizer.from_pretrained(resolve_model(None))
    tok.add_special_tokens(special)
    tok.chat_template = (TEMPLATES / template).read_text()
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    raw = json.loads((ARCH / config_file).read_text())
    raw.update(SHRINK, vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
               pad_token_id=tok.pad_token_id)
    if family == "qwen3":
        raw["max_window_layers"] = 2
    if family == "mistral":
        # v0.3 ships sliding_window null; Mistral's sliding-window attention (v0.1) is the code path worth
        # running, so the tiny model windows at 64 tokens, shorter than the prompts.
        raw["sliding_window"] = 64
    if family == "llama-3.1":
        raw["rope_scaling"] = {**raw["rope_scaling"], "original_max_position_embeddings": 512}
    model_type = raw.pop("model_type")
    cfg = AutoConfig.for_model(
        model_type, **{k: v for k, v in raw.items() if k not in ("architectures", "torch_dtype")}
    )
    cfg.architectures = raw["architectures"]
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def build_tiny_smollm2(out: Path, seed: int = 0) -> Path:
    """A tiny random model of the embedded SmolLM2's own architecture and tokenizer (Llama, tied embeddings, its
    chat template), for tests of run mechanics (rounds, journals, resumes, what is recorded) where the 135M model's
    prefills would only add minutes; ``out`` is returned."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from vista_distill.backends.model_loading import resolve_model

    embedded = resolve_model(None)
    cfg = AutoConfig.from_pretrained(embedded)
    for key, value in SHRINK.items():
        setattr(cfg, key, value)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(embedded).save_pretrained(out)
    return out
