"""The paths a transformers forward takes in the local backend: the keyword its KV cache goes by, the attention
kernels registered on CPU (grouped-query SDPA, short half-precision queries, a prefix shared by every row), the
float32 LM head of label scoring, the CPU prefill budget and how label-scoring batches are cut
(``TransformersBackend`` uses all of them)."""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

# Key positions [0, n) that every row of the batch now running holds identically (the shared few-shot prefix,
# copied into each row's cache), set by the backend around its forwards: attention reads them once for all rows.
_SHARED_PREFIX: contextvars.ContextVar[int] = contextvars.ContextVar("shared_prefix", default=0)


@contextlib.contextmanager
def shared_prefix(n: int) -> Iterator[None]:
    """Tell the attention below that key positions ``[0, n)`` are the same in every row and seen by every query."""
    token = _SHARED_PREFIX.set(n)
    try:
        yield
    finally:
        _SHARED_PREFIX.reset(token)


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
SHARED_PREFIX_MIN = 256   # shorter shared prefixes: reading them per row costs less than the cascade's extra steps


def _short_query_attention(query, key, value, attention_mask, scaling: float | None):
    """Attention of a few query tokens (a decode step, a label's continuation) over a long cache, as two
    grouped matmuls with float32 scores: torch's CPU SDPA kernel takes 5-9x longer for one bf16 query token
    than this (docs/performance.md, 'Decoding') and was most of a few-shot decode step. Scores and softmax are
    float32, so the result matches SDPA's to its own rounding; the value product runs in the input dtype."""
    import torch

    b, h, q, d = query.shape
    hk, n = key.shape[1], key.shape[2]
    g = h // hk
    grouped = query.reshape(b, hk, g * q, d)   # query heads h*g..h*g+g-1 share key/value head h
    scores = torch.matmul(grouped.float(), key.transpose(-1, -2).float())
    scores.mul_(scaling if scaling is not None else d ** -0.5)
    if attention_mask is not None:
        mask = _grouped_mask(attention_mask, b, hk, g, q, n)
        if mask.dtype == torch.bool:   # a row with nothing to attend to (padding) gets uniform weights, not NaN
            scores.masked_fill_(~mask, torch.finfo(torch.float32).min)
        else:
            scores.add_(mask.float())
    weights = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(weights, value).reshape(b, h, q, d)
    return out.transpose(1, 2).contiguous()


def _grouped_mask(attention_mask, b: int, hk: int, g: int, q: int, n: int):
    """A (b, 1 or heads, q, n) mask laid out like grouped queries: (b, 1 or hk, g*q, n)."""
    mask = attention_mask[:, :, :, :n].expand(b, -1, q, n)
    if mask.shape[1] == 1:
        return mask.unsqueeze(2).expand(b, 1, g, q, n).reshape(b, 1, g * q, n)
    return mask.reshape(b, hk, g * q, n)   # a mask per query head, grouped like the queries


def _prefix_visible(attention_mask, p: int) -> bool:
    """Whether every query may see key positions ``[0, p)`` under ``attention_mask`` (None: no mask)."""
    import torch

    if attention_mask is None:
        return True
    head = attention_mask[..., :p]
    return bool(head.all()) if head.dtype == torch.bool else bool((head == 0).all())


def _prefix_attention(query, key, value, attention_mask, scaling: float | None, p: int):
    """Attention of a few query tokens where key positions ``[0, p)`` are the same in every row (the shared
    few-shot prefix, 1,100-2,700 tokens) and visible to every query: every row's queries meet row 0's prefix keys
    in one product, the rest per row, one softmax over both (cascade attention). A decode step read the prefix's
    keys and values once per row otherwise: 3.7x faster for 16 bf16 rows over a 1,500-token prefix (docs/performance.md,
    'Decoding'). Long queries are compute-bound, and two flash
    passes joined by log-sum-exp measured no faster there: they keep SDPA."""
    import torch

    b, h, q, d = query.shape
    hk, n = key.shape[1], key.shape[2]
    g = h // hk
    scale = scaling if scaling is not None else d ** -0.5
    rest_mask = None if attention_mask is None else attention_mask[:, :, :, p:n]
    stacked = query.reshape(b, hk, g * q, d).transpose(0, 1).reshape(hk, b * g * q, d)
    s_pre = torch.matmul(stacked.float(), key[0, :, :p].transpose(-1, -2).float())      # (hk, b*g*q, p)
    s_pre = s_pre.reshape(hk, b, g * q, p).transpose(0, 1)
    s_rest = torch.matmul(query.reshape(b, hk, g * q, d).float(), key[:, :, p:].transpose(-1, -2).float())
    if rest_mask is not None:
        m = _grouped_mask(rest_mask, b, hk, g, q, n - p)
        if m.dtype == torch.bool:
            s_rest.masked_fill_(~m, float("-inf"))
        else:
            s_rest.add_(m.float())
    weights = torch.softmax(torch.cat([s_pre, s_rest], dim=-1).mul_(scale), dim=-1).to(value.dtype)
    w_pre = weights[..., :p].transpose(0, 1).reshape(hk, b * g * q, p)
    out = torch.matmul(w_pre, value[0, :, :p]).reshape(hk, b, g * q, d).transpose(0, 1)
    out = out + torch.matmul(weights[..., p:], value[:, :, p:])
    return out.reshape(b, h, q, d).transpose(1, 2).contiguous()


def _sdpa_gqa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
              **kwargs: Any):
    """transformers' SDPA attention, with three CPU paths of its own: 1-4 query tokens after a shared prefix of
    ``SHARED_PREFIX_MIN``+ tokens (:func:`shared_prefix`) run :func:`_prefix_attention`; otherwise a few
    half-precision query tokens (decoding, label continuations) run :func:`_short_query_attention`; and a masked
    multi-token forward of a grouped-query model runs SDPA with ``enable_gqa`` instead of first copying each
    key/value head ``num_key_value_groups`` times (transformers copies because CUDA's fused kernels refuse masked
    GQA; torch's CPU kernel takes it, and the copies were a third of the attention time of few-shot label scoring
    on a 2-core CPU: docs/performance.md, 'The scorer's speed against its floor'). Everything else goes to
    transformers' own function, with the keywords it was given (``is_causal`` among them)."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if attention_mask is not None and attention_mask.dim() == 4 and attention_mask.shape[-1] < key.shape[2]:
        # a mask only as wide as the written columns of a preallocated cache (slot_decoding): read no key beyond
        key, value = key[:, :, :attention_mask.shape[-1]], value[:, :, :attention_mask.shape[-1]]
    special = (any(kwargs.get(k) is not None for k in ("position_bias", "cache", "softcap"))
               or kwargs.get("output_attentions") or (dropout and module.training))
    q = query.shape[2]
    p = _SHARED_PREFIX.get()
    if (p >= SHARED_PREFIX_MIN and q <= SHORT_QUERY and not special and query.device.type == "cpu"
            and query.shape[0] > 1 and key.shape[2] > p and query.shape[1] % key.shape[1] == 0
            and (q == 1 or attention_mask is not None) and _prefix_visible(attention_mask, p)):
        return _prefix_attention(query, key, value, attention_mask, scaling, p), None
    if (not special and query.device.type == "cpu" and query.dtype in (torch.bfloat16, torch.float16)
            and (q == 1 or (q <= SHORT_QUERY and attention_mask is not None))
            and query.shape[1] % key.shape[1] == 0):
        return _short_query_attention(query, key, value, attention_mask, scaling), None
    plain = (getattr(module, "num_key_value_groups", 1) > 1 and q > 1 and attention_mask is not None
             and not special)
    if not plain:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
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


def contiguous_head_input(model: Any) -> bool:
    """Make the LM head's input contiguous before it runs; True if the model has such a head.

    transformers slices the positions whose logits are kept (``hidden[:, -k:, :]``), and torch's linear takes a
    3D slice through a batched product with the weight expanded to every row: 16 rows of a 135M model's head
    copied 0.9 GB and took 631 ms in bf16 against 2.6 ms for the same product on a contiguous copy (2-core AMD EPYC
    with AVX512-BF16). Every label-scoring batch, prefix fill and slot refill paid it."""
    import torch

    head = model.get_output_embeddings()
    if not isinstance(head, torch.nn.Module):
        return False
    head.register_forward_pre_hook(lambda _module, args: (args[0].contiguous(), *args[1:]))
    return True


@contextlib.contextmanager
def float32_head(model: Any, keep: dict[str, Any]) -> Iterator[None]:
    """The LM head in float32 while labels are scored: a bf16 head's logits are spaced 0.06-0.125 apart at
    magnitudes 8-32, so a claim the model is unsure of got its label from rounding (and a label that moved with
    the batch's composition). Only the kept positions pass the head, so this costs little; the float32 copy of
    the weight is kept in ``keep`` when it is small (a 135M model's: 113 MB) and made per call otherwise."""
    import torch

    head = model.get_output_embeddings()
    w = getattr(head, "weight", None)
    if not isinstance(head, torch.nn.Linear) or w is None or w.dtype not in (torch.bfloat16, torch.float16):
        yield
        return
    if "weight" not in keep and w.numel() * 4 <= 512 * 2**20:
        keep["weight"] = w.detach().float()

    def forward(hidden):
        # the bf16 head does not run at all (a forward hook would let it run and discard its product), and the
        # kept positions are folded into one matrix first: a 3D slice of the hidden states made linear take a
        # batched product with the float32 weight copied once per row (16 x 113 MB, over a second a call)
        weight = keep["weight"] if "weight" in keep else head.weight.float()
        bias = None if head.bias is None else head.bias.float()
        flat = hidden.reshape(-1, hidden.shape[-1]).float()
        return torch.nn.functional.linear(flat, weight, bias).reshape(*hidden.shape[:-1], weight.shape[0])

    own = head.__dict__.get("forward")   # a forward set on the instance (accelerate's hooks) is put back after
    head.forward = forward
    try:
        yield
    finally:
        if own is None:
            del head.forward
        else:
            head.forward = own


# padded prompt tokens per label-scoring batch on a CPU: a CPU computes at about the same rate from one row up, and
# padding a short prompt to a long one's length is work (docs/performance.md, 'Label batches')
CPU_PREFILL_TOKENS = 2048


def resolve_prefill_tokens(value: int | str | None, device: str) -> int | None:
    """``TransformersBackend(prefill_tokens=...)``: ``auto`` is ``CPU_PREFILL_TOKENS`` on a CPU, no limit elsewhere."""
    if value == "auto":
        return CPU_PREFILL_TOKENS if device == "cpu" else None
    if value is not None and (not isinstance(value, int) or value < 1):
        raise ValueError(f"prefill_tokens must be a positive number of tokens, 'auto' or None; got {value!r}")
    return value


def batches(idx: list[int], lengths: list[int], batch_size: int, budget: int | None) -> list[list[int]]:
    """``idx`` (sorted by prompt length, ``lengths``) cut into batches of at most ``batch_size`` rows and, with a
    ``budget``, at most that many padded tokens (rows times the longest; one row at least)."""
    out: list[list[int]] = []
    for i, n in zip(idx, lengths):
        last = out[-1] if out else None
        # lengths ascend, so this row's length is the batch's padded length if it joins
        if last is None or len(last) >= batch_size or (budget is not None and (len(last) + 1) * n > budget):
            out.append([i])
        else:
            last.append(i)
    return out
