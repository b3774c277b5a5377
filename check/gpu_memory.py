"""Peak GPU memory estimates for a recipe, from the student's ``config.json`` alone (no weights).

Used by ``vista-distill check`` to compare what a recipe will need with what its name promises
(``-24gb``, ``-80gb``). The estimate is deliberately simple and errs high: weights in their storage
dtype (NF4 linear layers at 4.5 bits with double quantisation, embeddings and ``lm_head`` kept in
16 bits), LoRA weights, gradients and optimizer state in float32, activations at the recipe's batch
size and ``max_length`` (checkpointed layer inputs plus one layer's recomputation, or every layer's
activations without checkpointing), the logits the loss is computed from in float32 with their
gradient, and a fixed CUDA context. Scoring adds the KV cache of ``eval.batch_size`` prompts.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

GIB = 1024**3
CUDA_CONTEXT_GIB = 1.0           # context, cuBLAS workspace, allocator slack
ARCHITECTURES = Path(__file__).resolve().parents[1] / "recipes" / "architectures"   # the package root's recipes/
PROMISE = re.compile(r"-(\d+)gb\b", re.IGNORECASE)
# Adam moments in float32 (8 bytes/param); bitsandbytes' 8-bit optimizers keep 2 bytes/param.
OPTIM_BYTES = {"8bit": 2.0, "default": 8.0}


@dataclass
class Shape:
    """What the estimate needs from a causal LM config."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> Shape:
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        return cls(layers=int(cfg["num_hidden_layers"]), hidden=hidden, intermediate=int(cfg["intermediate_size"]),
                   heads=heads, kv_heads=int(cfg.get("num_key_value_heads") or heads),
                   head_dim=int(cfg.get("head_dim") or hidden // heads), vocab=int(cfg["vocab_size"]),
                   tied=bool(cfg.get("tie_word_embeddings", False)))

    def linears(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each linear layer of one decoder layer."""
        h, q, kv, i = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim, self.intermediate
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
                "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    @property
    def linear_params(self) -> int:
        return self.layers * sum(a * b for a, b in self.linears().values())

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def params(self) -> int:
        return self.linear_params + self.embedding_params + self.layers * 2 * self.hidden + self.hidden


@dataclass
class Estimate:
    """Peak GPU memory (GiB) by part, and the total."""

    weights: float
    lora: float
    activations: float
    logits: float
    kv_cache: float
    context: float

    @property
    def total(self) -> float:
        return self.weights + self.lora + self.activations + self.logits + self.kv_cache + self.context

    def line(self) -> str:
        parts = [f"{k} {v:.1f}" for k, v in asdict(self).items() if v >= 0.05]
        return f"~{self.total:.1f} GiB ({', '.join(parts)})"


def find_config(model: str | None) -> tuple[dict[str, Any] | None, str]:
    """The student's ``config.json``: a local folder, the shipped architecture file for a known Hub id,
    or the Hugging Face cache. Returns (config or None, where it came from)."""
    if model is None:
        from ..backends.model_loading import resolve_model

        model = str(resolve_model(None))
    local = Path(model).expanduser()
    if (local / "config.json").exists():
        return json.loads((local / "config.json").read_text()), str(local / "config.json")
    shipped = ARCHITECTURES / f"{model.replace('/', '--')}.json"
    if shipped.exists():
        return json.loads(shipped.read_text()), str(shipped.relative_to(ARCHITECTURES.parents[1]))
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
    except Exception:  # noqa: BLE001 - not a valid repo id, no cache
        cached = None
    if isinstance(cached, str):
        return json.loads(Path(cached).read_text()), cached
    return None, f"no config.json for {model!r} here (not a folder, not in {ARCHITECTURES.name}/, not in the HF cache)"


def lora_params(shape: Shape, r: int, targets: str | list[str]) -> int:
    names = shape.linears()
    want = set(names) if targets == "all-linear" else set(targets) & set(names)
    return shape.layers * sum(r * (names[n][0] + names[n][1]) for n in want)


def training_estimate(shape: Shape, *, batch: int, length: int, load_in_4bit: bool, r: int,
                      targets: str | list[str], checkpointing: bool, optim: str = "") -> Estimate:
    lin_bytes = 4.5 / 8 if load_in_4bit else 2.0
    weights = shape.linear_params * lin_bytes + (shape.embedding_params + shape.layers * 2 * shape.hidden) * 2.0
    n_lora = lora_params(shape, r, targets)
    optim_bytes = OPTIM_BYTES["8bit" if "8bit" in optim else "default"]
    lora = n_lora * (4 + 4 + optim_bytes)
    tokens = batch * length
    # 16-bit activations per layer (Korthikanti et al. 2022, sdpa/flash attention: no seq^2 term):
    # ~34 * hidden bytes per token, plus the MLP's wider intermediates.
    per_layer = tokens * (34 * shape.hidden + 4 * shape.intermediate)
    if checkpointing:
        activations = tokens * shape.hidden * 2 * shape.layers + per_layer
    else:
        activations = per_layer * shape.layers
    logits = tokens * shape.vocab * (2 + 4 + 4)     # 16-bit logits, float32 upcast for the loss, its gradient
    return Estimate(weights / GIB, lora / GIB, activations / GIB, logits / GIB, 0.0, CUDA_CONTEXT_GIB)


def scoring_estimate(shape: Shape, *, batch: int, length: int, load_in_4bit: bool, r: int,
                     targets: str | list[str], adapters: int = 3) -> Estimate:
    lin_bytes = 4.5 / 8 if load_in_4bit else 2.0
    weights = shape.linear_params * lin_bytes + (shape.embedding_params + shape.layers * 2 * shape.hidden) * 2.0
    lora = adapters * lora_params(shape, r, targets) * 2.0
    kv = batch * length * shape.layers * 2 * shape.kv_heads * shape.head_dim * 2.0
    activations = batch * length * (shape.hidden + shape.intermediate) * 2 * 2.0   # one layer's forward at a time
    logits = batch * shape.vocab * 4.0 * 2                                         # last-position logits
    return Estimate(weights / GIB, lora / GIB, activations / GIB, logits / GIB, kv / GIB, CUDA_CONTEXT_GIB)


def promised_gib(recipe_name: str) -> float | None:
    """The GPU memory a recipe's name promises (``qwen3-8b-qlora-24gb`` -> 24), or None."""
    m = PROMISE.search(recipe_name)
    return float(m.group(1)) if m else None


def rows_per_forward(t: Any) -> int:
    """The examples one forward and backward pass holds: ``train.micro_batch_size`` where it splits the batch."""
    return t.micro_batch_size or t.per_device_train_batch_size


def largest_training(recipe: Any) -> tuple[str, Any]:
    """The stage whose train settings (``train.per_stage`` applied) hold the most tokens per forward pass, and
    those."""
    stages = [(s, recipe.for_stage(s).train) for s in recipe.adapter_stages()]
    return max(stages, key=lambda st: rows_per_forward(st[1]) * st[1].max_length)


def recipe_estimates(recipe: Any, scoring_length: int = 2048) -> tuple[dict[str, Estimate] | None, str]:
    """Training (its largest stage, :func:`largest_training`) and scoring estimates of a recipe's student, and
    where its config came from."""
    cfg, where = find_config(recipe.student.model)
    if cfg is None:
        return None, where
    shape = Shape.from_config(cfg)
    t, lo = largest_training(recipe)[1], recipe.lora
    optim = str(t.options.get("optim", ""))
    return {
        "training": training_estimate(shape, batch=rows_per_forward(t), length=t.max_length,
                                      load_in_4bit=recipe.student.load_in_4bit, r=lo.r, targets=lo.target_modules,
                                      checkpointing=t.gradient_checkpointing, optim=optim),
        "scoring": scoring_estimate(shape, batch=recipe.eval.batch_size, length=scoring_length,
                                    load_in_4bit=recipe.student.load_in_4bit, r=lo.r, targets=lo.target_modules),
    }, where
