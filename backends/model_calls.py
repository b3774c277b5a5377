"""How the local backend calls a transformers model: the keyword its KV cache goes by, and the grouped-query
attention registered on CPU (``TransformersBackend`` uses both)."""

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


def _sdpa_gqa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
              is_causal: bool | None = None, **kwargs: Any):
    """transformers' SDPA attention, except that a masked multi-token forward of a grouped-query model runs
    SDPA with ``enable_gqa`` instead of first copying each key/value head ``num_key_value_groups`` times.
    transformers copies there because CUDA's fused kernels refuse masked GQA; torch's CPU kernel takes it,
    and the copies were a third of the attention time of few-shot label scoring on a 2-core CPU
    (bench/results/profile_scorer_*.md). Everything else goes to transformers' own function."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    plain = (getattr(module, "num_key_value_groups", 1) > 1 and query.shape[2] > 1 and attention_mask is not None
             and not any(kwargs.get(k) is not None for k in ("position_bias", "cache", "softcap"))
             and not kwargs.get("output_attentions"))
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
