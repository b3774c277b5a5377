"""How the local backend calls a transformers model: the keyword its KV cache goes by, and the attention
registered on CPU (grouped-query SDPA, short half-precision queries; ``TransformersBackend`` uses both)."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def cache_keyword(model: Any) -> str:
    """The keyword a model's forward and generate take their KV cache by: ``cache`` since transformers renamed
    ``past_key_values`` (which forward drops in 5.40 and generate in 6.0), the old name before."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def output_cache(out: Any) -> Any:
    """The KV cache a forward returned, under either name."""
    return out["cache"] if "cache" in out else out.past_key_values


GQA_SDPA = "vista_sdpa_gqa"


SHORT_QUERY = 4


def _short_query_attention(query, key, value, attention_mask, scaling: float | None):
    """Attention of a few query tokens (a decode step, a label's continuation) over a long cache, as two
    grouped matmuls with float32 scores: torch's CPU SDPA kernel takes 5-9x longer for one bf16 query token
    than this (0.58 against 4.98 ms for 8 rows over 1,500 keys on a 2-core AMD EPYC with AVX512-BF16;
    bench/results/attention_short_query_*.md) and was most of a few-shot decode step. Scores and softmax are
    float32, so the result matches SDPA's to its own rounding; the value product runs in the input dtype."""
    import torch

    b, h, q, d = query.shape
    hk, n = key.shape[1], key.shape[2]
    g = h // hk
    grouped = query.reshape(b, hk, g * q, d)   # query heads h*g..h*g+g-1 share key/value head h
    scores = torch.matmul(grouped.float(), key.transpose(-1, -2).float())
    scores.mul_(scaling if scaling is not None else d ** -0.5)
    if attention_mask is not None:
        mask = attention_mask[:, :, :, :n].expand(b, -1, q, n)
        if mask.shape[1] == 1:
            mask = mask.unsqueeze(2).expand(b, 1, g, q, n).reshape(b, 1, g * q, n)
        else:   # a mask per query head, grouped like the queries
            mask = mask.reshape(b, hk, g * q, n)
        if mask.dtype == torch.bool:   # a row with nothing to attend to (padding) gets uniform weights, not NaN
            scores.masked_fill_(~mask, torch.finfo(torch.float32).min)
        else:
            scores.add_(mask.float())
    weights = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(weights, value).reshape(b, h, q, d)
    return out.transpose(1, 2).contiguous()


def _sdpa_gqa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
              is_causal: bool | None = None, **kwargs: Any):
    """transformers' SDPA attention, with two CPU paths of its own: a masked multi-token forward of a
    grouped-query model runs SDPA with ``enable_gqa`` instead of first copying each key/value head
    ``num_key_value_groups`` times (transformers copies because CUDA's fused kernels refuse masked GQA; torch's
    CPU kernel takes it, and the copies were a third of the attention time of few-shot label scoring on a
    2-core CPU, bench/results/profile_scorer_*.md); and a few half-precision query tokens (decoding, label
    continuations) run :func:`_short_query_attention`. Everything else goes to transformers' own function."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    special = (any(kwargs.get(k) is not None for k in ("position_bias", "cache", "softcap"))
               or kwargs.get("output_attentions") or (dropout and module.training))
    q = query.shape[2]
    if (not special and query.device.type == "cpu" and query.dtype in (torch.bfloat16, torch.float16)
            and (q == 1 or (q <= SHORT_QUERY and attention_mask is not None))
            and query.shape[1] % key.shape[1] == 0):
        return _short_query_attention(query, key, value, attention_mask, scaling), None
    plain = (getattr(module, "num_key_value_groups", 1) > 1 and q > 1 and attention_mask is not None
             and not special)
    if not plain:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                           dropout_p=dropout, scale=scaling, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def use_gqa_sdpa(model: Any) -> bool:
    """Switch a model running transformers' SDPA attention to :func:`_sdpa_gqa` (same masks); True if switched."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    AttentionInterface.register(GQA_SDPA, _sdpa_gqa)
    AttentionMaskInterface.register(GQA_SDPA, sdpa_mask)
    try:
        model.set_attn_implementation(GQA_SDPA)
    except (ValueError, AttributeError) as err:   # an architecture that cannot take it keeps plain SDPA
        log.debug("GQA SDPA not set: %s", err)
        return False
    return True
