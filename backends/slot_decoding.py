"""Greedy decoding in slots: the rows of a batch share one preallocated cache after the shared prefix, and a row
that finishes hands its slot to the next waiting request (continuous batching, on one CPU process).

Hugging Face's ``generate`` runs a batch until its longest row ends: on the demo's stage 1 (16 rows, lists of 51
tokens on average and up to 179) a decode step computed 5.8 live rows on average. Here a freed slot is refilled at
once: the new request's prompt is run as its own small batch over a copy of the prefix cache, and its keys and
values are written into the slot's row just before the shared write position, left-padded; a 4D mask and per-row
positions keep every row's attention and rotary positions what they would be alone. On a CPU the mask is only as
wide as the written columns, and the model's attention (``model_calls._sdpa_gqa``) reads no key beyond it. On a GPU
the mask spans the whole cache (its unwritten columns masked), so every decode step of a wave has the same shapes
and is replayed from one captured CUDA graph: a step launches once instead of several hundred kernels from Python.
"""

from __future__ import annotations

import copy
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

# A slot is refilled only while the request could still reach its token budget before the cache ends; the cache
# holds this many budgets after the longest prompt (more: fewer rounds, but longer rows of padding to attend over).
HORIZON_BUDGETS = 3


def static_prefix_cache(config: Any, prefix_cache: Any, batch: int, max_len: int) -> Any:
    """A preallocated cache for ``batch`` rows holding the prefix, or None where the model's layers are not
    all plain full-attention layers. Generating into it avoids the per-token ``torch.cat`` of a dynamic
    cache, which was 60% of a decode step on a 2-core CPU (bench/results/decode_cache_*.md)."""
    from transformers import StaticCache
    from transformers.cache_utils import StaticLayer

    try:
        cache = StaticCache(config=config, max_cache_len=max_len)
    except Exception:  # noqa: BLE001 - an architecture StaticCache cannot describe keeps the dynamic path
        return None
    if len(cache.layers) != len(prefix_cache.layers) or any(type(x) is not StaticLayer for x in cache.layers):
        return None
    for src, dst in zip(prefix_cache.layers, cache.layers):
        k = src.keys.expand(batch, -1, -1, -1)
        v = src.values.expand(batch, -1, -1, -1)
        dst.lazy_initialization(k, v)
        n = k.shape[2]
        dst.keys[:, :, :n] = k
        dst.values[:, :, :n] = v
        dst.cumulative_length.fill_(n)
    return cache


def slots_supported(model: Any) -> bool:
    """Whether ``model`` can decode in slots: only plain full-attention layers in a static cache (no sliding
    windows), and on a CPU the attention that reads a mask narrower than its cache (``model_calls._sdpa_gqa``); on
    a GPU, torch's SDPA or the eager attention over a mask as wide as the cache."""
    from transformers import StaticCache
    from transformers.cache_utils import StaticLayer

    from .model_calls import GQA_SDPA

    attention = getattr(model.config, "_attn_implementation", None)
    on_gpu = next(model.parameters()).device.type == "cuda"
    if attention != GQA_SDPA and not (on_gpu and attention in ("sdpa", "eager")):
        return False
    try:
        layers = StaticCache(config=model.config, max_cache_len=1).layers
    except Exception:  # noqa: BLE001 - an architecture StaticCache cannot describe keeps generate
        return False
    return bool(layers) and all(type(x) is StaticLayer for x in layers)


@dataclass
class _Slot:
    request: int                 # index into the suffixes
    position: int                # rotary position of the next token fed
    tokens: list[int] = field(default_factory=list)


@dataclass
class Decoded:
    """One request's greedy continuation: its tokens (an end-of-sequence token excluded) and why it ended:
    ``eos``, ``stopped`` (the stop rule) or ``length`` (its budget)."""

    tokens: list[int]
    reason: str


class _GraphedStep:
    """One wave's decode step captured as a CUDA graph: token ids and positions go into static buffers, the mask
    is a view of the wave's key buffer (edited in place between steps), and a replay writes the new keys and values
    into the static cache and advances it exactly as the eager step would."""

    def __init__(self, forward: Callable[..., Any], rows: int, mask: Any, cache: Any, device: Any) -> None:
        import torch

        self.ids = torch.zeros(rows, 1, dtype=torch.long, device=device)
        self.positions = torch.zeros(rows, 1, dtype=torch.long, device=device)
        lengths = [layer.cumulative_length.clone() for layer in cache.layers]
        try:
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):   # warm-up (cuBLAS workspaces); it writes to columns not yet attended
                forward(self.ids, self.positions, mask, cache)
            torch.cuda.current_stream(device).wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.logits = forward(self.ids, self.positions, mask, cache)
        finally:
            for layer, n in zip(cache.layers, lengths):   # the warm-up advanced the cache: put its length back
                layer.cumulative_length.copy_(n)

    def __call__(self, ids: Any, positions: Any) -> Any:
        self.ids.copy_(ids, non_blocking=True)
        self.positions.copy_(positions, non_blocking=True)
        self.graph.replay()
        return self.logits


def decode_in_slots(model: Any, cache_kw: str, make_cache: Callable[[int, int], Any], prefix_cache: Any,
                    prefix_len: int, suffixes: Sequence[Sequence[int]], max_new: int, slots: int,
                    eos_ids: Sequence[int], pad_id: int,
                    ban: Callable[[list[int], Any], None] | None = None,
                    stop: Callable[[list[int]], bool] | None = None,
                    on_done: Callable[[int], object] | None = None,
                    stats: dict[str, Any] | None = None,
                    full_mask: bool | None = None, graphs: bool | None = None) -> list[Decoded]:
    """Greedy continuations of ``prefix + suffix`` for every suffix, ``slots`` rows at a time.

    ``make_cache(rows, length)``: a static cache of ``rows`` rows and ``length`` positions holding the prefix;
    ``prefix_cache``: the prefix's dynamic cache (one row), copied for each refill; ``ban(tokens, scores)``
    edits a row's next-token scores in place; ``stop(tokens)`` ends a row after its newest token; ``on_done(i)``
    is told as each request finishes; ``stats`` counts decode steps, the rows they ran and refills.
    ``full_mask``: decode steps attend over a mask as wide as the cache (default: on a GPU); ``graphs``: replay
    each wave's decode step from a CUDA graph (default: on a GPU; needs the full mask)."""
    import torch

    device = next(model.parameters()).device
    on_gpu = device.type == "cuda"
    graphs = on_gpu if graphs is None else graphs
    full_mask = (on_gpu if full_mask is None else full_mask) or graphs   # a graph needs one shape per wave
    eos = set(eos_ids)
    out: list[Decoded | None] = [None] * len(suffixes)
    queue = deque(sorted(range(len(suffixes)), key=lambda i: -len(suffixes[i])))  # longest first: later ones fit

    def forward(ids, positions, mask4d, cache):
        o = model(input_ids=ids, position_ids=positions, attention_mask=mask4d, **{cache_kw: cache}, use_cache=True,
                  logits_to_keep=1)
        return o.logits[:, -1].float()

    def prompt_block(chosen: list[int]):
        """Left-padded ids, key mask and positions of the chosen requests' suffixes."""
        width = max(len(suffixes[i]) for i in chosen)
        ids = torch.full((len(chosen), width), pad_id, dtype=torch.long)
        valid = torch.zeros(len(chosen), width, dtype=torch.bool)
        for r, i in enumerate(chosen):
            s = suffixes[i]
            ids[r, width - len(s):] = torch.tensor(list(s), dtype=torch.long)
            valid[r, width - len(s):] = True
        positions = (prefix_len + valid.long().cumsum(-1) - 1).clamp(min=prefix_len)
        return ids.to(device), valid.to(device), positions.to(device)

    def block_mask(valid, width: int):
        """(rows, 1, width, prefix + width): the prefix, then causal over the block's own valid keys."""
        rows = valid.shape[0]
        causal = torch.ones(width, width, dtype=torch.bool, device=device).tril()
        own = causal[None] & valid[:, None, :]
        head = torch.ones(rows, width, prefix_len, dtype=torch.bool, device=device)
        return torch.cat([head, own], dim=-1)[:, None]

    def next_tokens(pending: list[tuple[int, Any]]) -> list[tuple[int, int]]:
        """(row, greedy token) of each pending row: bans applied in place, then one argmax and one copy to the host."""
        if not pending:
            return []
        rows_logits = torch.stack([lg for _, lg in pending])
        if ban is not None:
            for j, (r, _) in enumerate(pending):
                ban(rows[r].tokens, rows_logits[j])
        return list(zip([r for r, _ in pending], rows_logits.argmax(-1).tolist()))

    def accept(slot: _Slot, token: int) -> Decoded | None:
        if token in eos:
            return Decoded(slot.tokens, "eos")
        slot.tokens.append(token)
        if stop is not None and stop(slot.tokens):
            return Decoded(slot.tokens, "stopped")
        if len(slot.tokens) >= max_new:
            return Decoded(slot.tokens, "length")
        return None

    count = stats if stats is not None else {}
    for k in ("decode_steps", "decode_rows", "refills"):
        count.setdefault(k, 0)
    while queue:
        wave = [queue.popleft() for _ in range(min(slots, len(queue)))]
        width = len(suffixes[wave[0]])
        length = prefix_len + width + HORIZON_BUDGETS * max_new
        cache = make_cache(len(wave), length)
        keys = torch.zeros(len(wave), length, dtype=torch.bool, device=device)   # what each row may attend to
        keys[:, :prefix_len] = True
        ids, valid, positions = prompt_block(wave)
        keys[:, prefix_len:prefix_len + width] = valid
        mask = block_mask(valid, width)
        if full_mask:   # attention that reads every cached key needs the unwritten ones masked
            mask = torch.nn.functional.pad(mask, (0, length - mask.shape[-1]), value=False)
        with torch.inference_mode():
            logits = forward(ids, positions, mask, cache)
        write = prefix_len + width   # the next column every row writes
        rows: list[_Slot | None] = [_Slot(i, int(positions[r, -1]) + 1) for r, i in enumerate(wave)]
        pending = list(enumerate(logits))
        step: _GraphedStep | None = None
        while True:
            free = []
            for r, token in next_tokens(pending):
                slot = rows[r]
                done = accept(slot, token)
                if done is not None:
                    out[slot.request] = done
                    if on_done is not None:
                        on_done(slot.request)
                    rows[r] = None
                    free.append(r)
            pending = []
            # refill freed slots while a new request can still reach its budget before the cache ends
            if free and queue and write + max_new <= length:
                count["refills"] += 1
                chosen = [queue.popleft() for _ in range(min(len(free), len(queue)))]
                targets = free[:len(chosen)]
                ids, valid, positions = prompt_block(chosen)
                w = ids.shape[1]
                small = copy.deepcopy(prefix_cache)
                small.batch_repeat_interleave(len(chosen))
                with torch.inference_mode():
                    logits = forward(ids, positions, block_mask(valid, w), small)
                index = torch.tensor(targets, device=device)
                for src, dst in zip(small.layers, cache.layers):
                    dst.keys[index, :, write - w:write] = src.keys[:, :, prefix_len:prefix_len + w]
                    dst.values[index, :, write - w:write] = src.values[:, :, prefix_len:prefix_len + w]
                keys[index, prefix_len:] = False
                keys[index, write - w:write] = valid
                for r, i, pos, row_logits in zip(targets, chosen, positions[:, -1].tolist(), logits):
                    rows[r] = _Slot(i, pos + 1)
                    pending.append((r, row_logits))
                continue   # a refilled row may end at its first token: settle before the next step
            live = [r for r, s in enumerate(rows) if s is not None]
            if not live:
                break
            count["decode_steps"] += 1
            count["decode_rows"] += len(live)
            step_ids = torch.full((len(rows), 1), pad_id, dtype=torch.long)
            step_pos = torch.zeros(len(rows), 1, dtype=torch.long)
            for r in live:
                step_ids[r, 0] = rows[r].tokens[-1]
                step_pos[r, 0] = rows[r].position
                rows[r].position += 1
            keys[:, write] = True   # an idle row attends to its own column: no row without keys
            with torch.inference_mode():
                if graphs and step is None:
                    try:
                        step = _GraphedStep(forward, len(rows), keys[:, None, None, :], cache, device)
                    except RuntimeError as e:   # an op that cannot be captured: this call decodes eagerly
                        log.warning("decode step not captured as a CUDA graph (%s); decoding eagerly", e)
                        graphs = False
                if graphs and step is not None:
                    logits = step(step_ids.to(device), step_pos.to(device))
                else:
                    mask = keys[:, None, None, :] if full_mask else keys[:, None, None, :write + 1]
                    logits = forward(step_ids.to(device), step_pos.to(device), mask, cache)
            write += 1
            pending = [(r, logits[r]) for r in live]
    return out  # type: ignore[return-value]
