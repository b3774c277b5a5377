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
    device = next(model.parameters()).device
    on_gpu = device.type == "cuda"
    graphs = on_gpu if graphs is None else graphs
    count = stats if stats is not None else {}
    for k in ("decode_steps", "decode_rows", "refills"):
        count.setdefault(k, 0)
    decoder = _SlotDecoder(model=model, cache_kw=cache_kw, prefix_cache=prefix_cache, prefix_len=prefix_len,
                           suffixes=suffixes, max_new=max_new, eos=set(eos_ids), pad_id=pad_id, ban=ban, stop=stop,
                           on_done=on_done, count=count, device=device, graphs=graphs,
                           full_mask=(on_gpu if full_mask is None else full_mask) or graphs)  # a graph: one shape
    queue = deque(sorted(range(len(suffixes)), key=lambda i: -len(suffixes[i])))  # longest first: later ones fit
    while queue:
        _Wave(decoder, [queue.popleft() for _ in range(min(slots, len(queue)))], make_cache).run(queue)
    return decoder.out  # type: ignore[return-value]


@dataclass
class _SlotDecoder:
    """What every wave of one :func:`decode_in_slots` call shares: the model, the requests and their results."""

    model: Any
    cache_kw: str
    prefix_cache: Any
    prefix_len: int
    suffixes: Sequence[Sequence[int]]
    max_new: int
    eos: set[int]
    pad_id: int
    ban: Callable[[list[int], Any], None] | None
    stop: Callable[[list[int]], bool] | None
    on_done: Callable[[int], object] | None
    count: dict[str, Any]
    device: Any
    graphs: bool
    full_mask: bool
    out: list[Decoded | None] = field(init=False)   # each request's result, by index

    def __post_init__(self) -> None:
        self.out = [None] * len(self.suffixes)

    def forward(self, ids: Any, positions: Any, mask4d: Any, cache: Any) -> Any:
        o = self.model(input_ids=ids, position_ids=positions, attention_mask=mask4d, **{self.cache_kw: cache},
                       use_cache=True, logits_to_keep=1)
        return o.logits[:, -1].float()

    def prompt_block(self, chosen: list[int]) -> tuple[Any, Any, Any]:
        """Left-padded ids, key mask and positions of the chosen requests' suffixes."""
        import torch

        width = max(len(self.suffixes[i]) for i in chosen)
        ids = torch.full((len(chosen), width), self.pad_id, dtype=torch.long)
        valid = torch.zeros(len(chosen), width, dtype=torch.bool)
        for r, i in enumerate(chosen):
            s = self.suffixes[i]
            ids[r, width - len(s):] = torch.tensor(list(s), dtype=torch.long)
            valid[r, width - len(s):] = True
        positions = (self.prefix_len + valid.long().cumsum(-1) - 1).clamp(min=self.prefix_len)
        return ids.to(self.device), valid.to(self.device), positions.to(self.device)

    def block_mask(self, valid: Any, width: int) -> Any:
        """(rows, 1, width, prefix + width): the prefix, then causal over the block's own valid keys."""
        import torch

        rows = valid.shape[0]
        causal = torch.ones(width, width, dtype=torch.bool, device=self.device).tril()
        own = causal[None] & valid[:, None, :]
        head = torch.ones(rows, width, self.prefix_len, dtype=torch.bool, device=self.device)
        return torch.cat([head, own], dim=-1)[:, None]

    def accept(self, slot: _Slot, token: int) -> Decoded | None:
        """``token`` appended to ``slot``: the request's result when it ends there, else None."""
        if token in self.eos:
            return Decoded(slot.tokens, "eos")
        slot.tokens.append(token)
        if self.stop is not None and self.stop(slot.tokens):
            return Decoded(slot.tokens, "stopped")
        if len(slot.tokens) >= self.max_new:
            return Decoded(slot.tokens, "length")
        return None


class _Wave:
    """One static cache of ``len(wave)`` rows, decoded until every row is idle: rows that finish are refilled from
    the queue while a new request can still reach its budget before the cache ends."""

    def __init__(self, d: _SlotDecoder, wave: list[int], make_cache: Callable[[int, int], Any]) -> None:
        import torch

        width = len(d.suffixes[wave[0]])   # the longest: the queue is sorted longest first
        self.d, self.length = d, d.prefix_len + width + int(HORIZON_BUDGETS * d.max_new)
        self.cache = make_cache(len(wave), self.length)
        self.keys = torch.zeros(len(wave), self.length, dtype=torch.bool, device=d.device)  # what each row may attend
        self.keys[:, :d.prefix_len] = True
        ids, valid, positions = d.prompt_block(wave)
        self.keys[:, d.prefix_len:d.prefix_len + width] = valid
        mask = d.block_mask(valid, width)
        if d.full_mask:   # attention that reads every cached key needs the unwritten ones masked
            mask = torch.nn.functional.pad(mask, (0, self.length - mask.shape[-1]), value=False)
        with torch.inference_mode():
            logits = d.forward(ids, positions, mask, self.cache)
        self.write = d.prefix_len + width   # the next column every row writes
        self.rows: list[_Slot | None] = [_Slot(i, int(positions[r, -1]) + 1) for r, i in enumerate(wave)]
        self.pending: list[tuple[int, Any]] = list(enumerate(logits))
        self.graph: _GraphedStep | None = None

    def run(self, queue: deque[int]) -> None:
        while True:
            free = self.settle()
            if free and queue and self.write + self.d.max_new <= self.length:
                self.refill(free, queue)
                continue   # a refilled row may end at its first token: settle before the next step
            if not any(s is not None for s in self.rows):
                return
            self.step()

    def settle(self) -> list[int]:
        """Each pending row's greedy token (bans applied in place, then one argmax and one copy to the host)
        accepted; the rows whose request ended, freed."""
        free: list[int] = []
        if not self.pending:
            return free
        import torch

        logits = torch.stack([lg for _, lg in self.pending])
        if self.d.ban is not None:
            for j, (r, _) in enumerate(self.pending):
                self.d.ban(self.rows[r].tokens, logits[j])
        for r, token in zip([r for r, _ in self.pending], logits.argmax(-1).tolist()):
            slot = self.rows[r]
            done = self.d.accept(slot, token)
            if done is not None:
                self.d.out[slot.request] = done
                if self.d.on_done is not None:
                    self.d.on_done(slot.request)
                self.rows[r] = None
                free.append(r)
        self.pending = []
        return free

    def refill(self, free: list[int], queue: deque[int]) -> None:
        """The next queued requests' prompts run as their own batch over copies of the prefix cache, and their keys
        and values written into the freed rows just before the shared write position, left-padded."""
        import torch

        d = self.d
        d.count["refills"] += 1
        chosen = [queue.popleft() for _ in range(min(len(free), len(queue)))]
        targets = free[:len(chosen)]
        ids, valid, positions = d.prompt_block(chosen)
        w = ids.shape[1]
        small = copy.deepcopy(d.prefix_cache)
        small.batch_repeat_interleave(len(chosen))
        with torch.inference_mode():
            logits = d.forward(ids, positions, d.block_mask(valid, w), small)
        index = torch.tensor(targets, device=d.device)
        for src, dst in zip(small.layers, self.cache.layers):
            dst.keys[index, :, self.write - w:self.write] = src.keys[:, :, d.prefix_len:d.prefix_len + w]
            dst.values[index, :, self.write - w:self.write] = src.values[:, :, d.prefix_len:d.prefix_len + w]
        self.keys[index, d.prefix_len:] = False
        self.keys[index, self.write - w:self.write] = valid
        for r, i, pos, row_logits in zip(targets, chosen, positions[:, -1].tolist(), logits):
            self.rows[r] = _Slot(i, pos + 1)
            self.pending.append((r, row_logits))

    def step(self) -> None:
        """One decode step of every live row (idle rows compute padding), from the wave's CUDA graph if it has one."""
        import torch

        d, rows = self.d, self.rows
        live = [r for r, s in enumerate(rows) if s is not None]
        d.count["decode_steps"] += 1
        d.count["decode_rows"] += len(live)
        step_ids = torch.full((len(rows), 1), d.pad_id, dtype=torch.long)
        step_pos = torch.zeros(len(rows), 1, dtype=torch.long)
        for r in live:
            step_ids[r, 0] = rows[r].tokens[-1]
            step_pos[r, 0] = rows[r].position
            rows[r].position += 1
        self.keys[:, self.write] = True   # an idle row attends to its own column: no row without keys
        with torch.inference_mode():
            if d.graphs and self.graph is None:
                try:
                    self.graph = _GraphedStep(d.forward, len(rows), self.keys[:, None, None, :], self.cache, d.device)
                except RuntimeError as e:   # an op that cannot be captured: this call decodes eagerly
                    log.warning("decode step not captured as a CUDA graph (%s); decoding eagerly", e)
                    d.graphs = False
            if d.graphs and self.graph is not None:
                logits = self.graph(step_ids.to(d.device), step_pos.to(d.device))
            else:
                mask = self.keys[:, None, None, :] if d.full_mask else self.keys[:, None, None, :self.write + 1]
                logits = d.forward(step_ids.to(d.device), step_pos.to(d.device), mask, self.cache)
        self.write += 1
        self.pending = [(r, logits[r]) for r in live]
