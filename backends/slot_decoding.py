"""Greedy decoding in slots: the rows of a batch share one preallocated cache after the shared prefix, and a row
that finishes hands its slot to the next waiting request (continuous batching, on one CPU process).

Hugging Face's ``generate`` runs a batch until its longest row ends: on the demo's stage 1 (16 rows, lists of 51
tokens on average and up to 179) a decode step computed 5.8 live rows on average. Here a freed slot is refilled at
once. Every row holds the shared prefix in columns ``0..p-1`` and then its own tokens at the columns of their rotary
positions (:class:`_Columns`, written by each layer's ``update``), so a row's attention is the causal mask over its
own columns and a decode step reads no further than its longest live row. Prompts run ahead in small batches over
copies of the prefix cache (:meth:`_Pool.prefill`) and are copied into freed rows; once no request is waiting, the
cache sheds idle rows. On a CPU the mask is only as wide as the step needs, and the model's attention
(``forward_paths._sdpa_gqa``) reads no key beyond it. On a GPU the mask spans the whole cache, so every decode step has
the same shapes and is replayed from one captured CUDA graph: a step launches once instead of several hundred
kernels from Python.
"""

from __future__ import annotations

import copy
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

# A refill's prompt batch takes queued prompts until it holds this many tokens (512 and 2,048 ran stage 1 equally
# fast on a 2-core CPU, each prompt alone ~1.5 s slower in 37: docs/performance.md, 'Decoding').
PREFILL_TOKENS = 512


def static_prefix_cache(config: Any, prefix_cache: Any, batch: int, max_len: int) -> Any:
    """A preallocated cache for ``batch`` rows holding the prefix, or None where the model's layers are not
    all plain full-attention layers. Generating into it avoids the per-token ``torch.cat`` of a dynamic
    cache, which was 60% of a decode step on a 2-core CPU (docs/performance.md, 'Decoding')."""
    from transformers import StaticCache
    from transformers.cache_utils import StaticLayer

    try:
        cache = StaticCache(config=config, max_cache_len=max_len)
    except Exception:  # noqa: BLE001 - an architecture StaticCache cannot describe keeps the dynamic path
        return None
    if len(cache.layers) != len(prefix_cache.layers) or any(type(x) is not StaticLayer for x in cache.layers):
        return None
    _fill_prefix(cache, prefix_cache, batch)
    return cache


def _fill_prefix(cache: Any, prefix_cache: Any, batch: int) -> None:
    """Every one of ``batch`` rows of the preallocated ``cache`` holds the one-row ``prefix_cache``."""
    for src, dst in zip(prefix_cache.layers, cache.layers):
        k = src.keys.expand(batch, -1, -1, -1)
        v = src.values.expand(batch, -1, -1, -1)
        dst.lazy_initialization(k, v)
        n = k.shape[2]
        dst.keys[:, :, :n] = k
        dst.values[:, :, :n] = v
        dst.cumulative_length.fill_(n)


class _Columns:
    """Where the next forward writes: ``at[r, j]`` is the cache column of row ``r``'s ``j``-th new token (its rotary
    position: a row's tokens sit at the columns of their positions, the shared prefix first)."""

    def __init__(self) -> None:
        self.at: Any = None


def row_prefix_cache(config: Any, prefix_cache: Any, rows: int, length: int, where: _Columns) -> Any:
    """A preallocated cache of ``rows`` rows and ``length`` columns holding the prefix in every row, whose layers
    write each row's new keys and values at that row's own columns (``where.at``), or None where the model's
    layers are not all plain full-attention layers."""
    from transformers import StaticCache
    from transformers.cache_utils import Cache, StaticLayer

    try:
        layers = StaticCache(config=config, max_cache_len=length).layers
    except Exception:  # noqa: BLE001 - an architecture StaticCache cannot describe keeps the dynamic path
        return None
    if len(layers) != len(prefix_cache.layers) or any(type(x) is not StaticLayer for x in layers):
        return None
    cache = Cache(layers=[_row_layer_class()(length, where) for _ in layers])
    _fill_prefix(cache, prefix_cache, rows)
    return cache


@functools.cache
def _row_layer_class() -> type:
    from transformers.cache_utils import StaticLayer

    class RowLayer(StaticLayer):
        """A static layer whose rows write at columns of their own (``where.at``), not at one shared length."""

        def __init__(self, max_cache_len: int, where: _Columns) -> None:
            super().__init__(max_cache_len=max_cache_len)
            self.where = where

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            import torch

            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            rows = torch.arange(self.keys.shape[0], device=self.keys.device)[:, None]
            self.keys[rows, :, self.where.at] = key_states.transpose(1, 2)
            self.values[rows, :, self.where.at] = value_states.transpose(1, 2)
            return self.keys, self.values

    return RowLayer


def slots_supported(model: Any) -> bool:
    """Whether ``model`` can decode in slots: only plain full-attention layers in a static cache (no sliding
    windows), and on a CPU the attention that reads a mask narrower than its cache (``forward_paths._sdpa_gqa``); on
    a GPU, torch's SDPA or the eager attention over a mask as wide as the cache."""
    from transformers import StaticCache
    from transformers.cache_utils import StaticLayer

    from .forward_paths import GQA_SDPA

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
class _Prompted:
    request: int                 # index into the suffixes
    row: int                     # its row in the block
    block: Any                   # the cache its prompt batch wrote (prefix + left-padded prompts)
    logits: Any                  # the next-token scores after its prompt


@dataclass
class Decoded:
    """One request's greedy continuation: its tokens (an end-of-sequence token excluded) and why it ended:
    ``eos``, ``stopped`` (the stop rule) or ``length`` (its budget)."""

    tokens: list[int]
    reason: str


def _step_mask(positions: Any, width: int) -> Any:
    """(rows, 1, q, width): a query at position ``p`` sees the columns ``0..p`` of its own row (a row's tokens sit
    at the columns of their positions, so this is the causal mask of each row alone)."""
    import torch

    return (torch.arange(width, device=positions.device) <= positions[..., None])[:, None]


class _GraphedStep:
    """The decode step captured as a CUDA graph: token ids and positions go into static buffers, the mask (as wide
    as the cache) is computed from the positions inside the graph, and a replay writes the new keys and values at
    each row's columns exactly as the eager step would."""

    def __init__(self, forward: Callable[..., Any], rows: int, width: int, cache: Any, where: _Columns,
                 device: Any) -> None:
        import torch

        self.ids = torch.zeros(rows, 1, dtype=torch.long, device=device)
        # the cache's last column, which no request reaches: the warm-up and the capture write only there
        self.positions = torch.full((rows, 1), width - 1, dtype=torch.long, device=device)
        where.at = self.positions   # the layers read the static buffer the replays fill

        def step() -> Any:
            return forward(self.ids, self.positions, _step_mask(self.positions, width), cache)

        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):   # warm-up (cuBLAS workspaces)
            step()
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits = step()

    def __call__(self, ids: Any, positions: Any) -> Any:
        self.ids.copy_(ids, non_blocking=True)
        self.positions.copy_(positions, non_blocking=True)
        self.graph.replay()
        return self.logits


@dataclass(frozen=True)
class SharedPrefix:
    """The model and the prompt prefix every row continues: the keyword its forward takes a cache by, the prefix's
    dynamic cache (one row; copied into every row and for each refill) and its length in tokens."""

    model: Any
    cache_kw: str
    cache: Any
    length: int


@dataclass(frozen=True)
class Greedy:
    """A row's greedy continuation: up to ``max_new`` tokens or one of ``eos_ids``; ``pad_id`` fills idle rows;
    ``ban(tokens, scores)`` edits its next-token scores in place; ``stop(tokens)`` ends it after its newest token."""

    max_new: int
    eos_ids: Sequence[int]
    pad_id: int
    ban: Callable[[list[int], Any], None] | None = None
    stop: Callable[[list[int]], bool] | None = None


def decode_in_slots(prefix: SharedPrefix, suffixes: Sequence[Sequence[int]], rule: Greedy, slots: int, *,
                    on_done: Callable[[int], object] | None = None, stats: dict[str, Any] | None = None,
                    full_mask: bool | None = None, graphs: bool | None = None) -> list[Decoded]:
    """Continuations of ``prefix + suffix`` by ``rule`` for every suffix, ``slots`` rows at a time (a model that
    :func:`slots_supported` accepts). ``on_done(i)`` is told as each request finishes; ``stats`` counts decode steps,
    the rows they ran and refills, and the seconds spent in decode steps (``decode_s``) and in prompt blocks
    (``prompt_s``; host-side time, so on a GPU only what the host waited for). ``full_mask``: decode steps attend over
    a mask as wide as the cache (default: on a GPU); ``graphs``: replay the decode step from a CUDA graph (default: on
    a GPU; needs the full mask)."""
    device = next(prefix.model.parameters()).device
    on_gpu = device.type == "cuda"
    graphs = on_gpu if graphs is None else graphs
    count = stats if stats is not None else {}
    count.update({k: count.get(k, 0) for k in ("decode_steps", "decode_rows", "refills", "decode_s", "prompt_s")})
    if not suffixes:
        return []
    decoder = _SlotDecoder(prefix, suffixes, rule, on_done, count, device, graphs,
                           (on_gpu if full_mask is None else full_mask) or graphs,   # a graph: one shape (full mask)
                           [None] * len(suffixes))
    longest_first = deque(sorted(range(len(suffixes)), key=lambda i: -len(suffixes[i])))
    _Pool.make(decoder, min(slots, len(suffixes))).run(longest_first)
    return decoder.out  # type: ignore[return-value]


@dataclass
class _SlotDecoder:
    """What one :func:`decode_in_slots` call shares: the model, the requests and their results."""

    prefix: SharedPrefix
    suffixes: Sequence[Sequence[int]]
    rule: Greedy
    on_done: Callable[[int], object] | None
    count: dict[str, Any]
    device: Any
    graphs: bool
    full_mask: bool
    out: list[Decoded | None]   # each request's result, by index

    def forward(self, ids: Any, positions: Any, mask4d: Any, cache: Any) -> Any:
        o = self.prefix.model(input_ids=ids, position_ids=positions, attention_mask=mask4d,
                              **{self.prefix.cache_kw: cache}, use_cache=True, logits_to_keep=1)
        return o.logits[:, -1].float()

    def prompt_block(self, chosen: list[int]) -> tuple[Any, Any, Any]:
        """Left-padded ids, key mask and positions of the chosen requests' suffixes."""
        import torch

        width = max(len(self.suffixes[i]) for i in chosen)
        ids = torch.full((len(chosen), width), self.rule.pad_id, dtype=torch.long)
        valid = torch.zeros(len(chosen), width, dtype=torch.bool)
        for r, i in enumerate(chosen):
            s = self.suffixes[i]
            ids[r, width - len(s):] = torch.tensor(list(s), dtype=torch.long)
            valid[r, width - len(s):] = True
        positions = (self.prefix.length + valid.long().cumsum(-1) - 1).clamp(min=self.prefix.length)
        return ids.to(self.device), valid.to(self.device), positions.to(self.device)

    def block_mask(self, valid: Any, width: int) -> Any:
        """(rows, 1, width, prefix + width): the prefix, then causal over the block's own valid keys."""
        import torch

        rows = valid.shape[0]
        causal = torch.ones(width, width, dtype=torch.bool, device=self.device).tril()
        own = causal[None] & valid[:, None, :]
        head = torch.ones(rows, width, self.prefix.length, dtype=torch.bool, device=self.device)
        return torch.cat([head, own], dim=-1)[:, None]

    def accept(self, slot: _Slot, token: int) -> Decoded | None:
        """``token`` appended to ``slot``: the request's result when it ends there, else None."""
        if token in self.rule.eos_ids:
            return Decoded(slot.tokens, "eos")
        slot.tokens.append(token)
        if self.rule.stop is not None and self.rule.stop(slot.tokens):
            return Decoded(slot.tokens, "stopped")
        if len(slot.tokens) >= self.rule.max_new:
            return Decoded(slot.tokens, "length")
        return None


class _Pool:
    """One preallocated cache of ``rows`` rows, decoded until every request has ended: a row that finishes is
    refilled from the queue at once. Each row keeps its tokens at the columns of their positions, so a decode step
    attends only as far as its longest live row, and once the queue is empty the cache sheds idle rows."""

    def __init__(self, d: _SlotDecoder, cache: Any, where: _Columns, length: int, rows: int) -> None:
        self.d, self.cache, self.where, self.length = d, cache, where, length
        self.rows: list[_Slot | None] = [None] * rows
        self.pending: list[tuple[int, Any]] = []
        self.ready: deque[_Prompted] = deque()   # requests whose prompts have run, waiting for a row
        self.graph: _GraphedStep | None = None

    @classmethod
    def make(cls, d: _SlotDecoder, rows: int) -> _Pool:
        # every row's prompt and budget fit, and one column more, which no request reaches (see _GraphedStep)
        length = d.prefix.length + max(len(s) for s in d.suffixes) + d.rule.max_new + 1
        where = _Columns()
        cache = row_prefix_cache(d.prefix.model.config, d.prefix.cache, rows, length, where)
        if cache is None:
            raise RuntimeError(f"{type(d.prefix.model).__name__}: its cache layers cannot be preallocated; "
                               "slot decoding needs slots_supported(model)")
        return cls(d, cache, where, length, rows)

    def run(self, queue: deque[int]) -> None:
        free = list(range(len(self.rows)))
        while True:
            if free and (queue or self.ready):
                self.refill(free, queue)
            elif not any(s is not None for s in self.rows):
                return
            else:
                if not queue and not self.ready and not self.d.graphs:
                    self.shed()
                self.step()
            free = self.settle()

    def settle(self) -> list[int]:
        """Each pending row's greedy token (bans applied in place, then one argmax and one copy to the host)
        accepted; the rows whose request ended, freed."""
        free: list[int] = []
        if not self.pending:
            return free
        import torch

        logits = torch.stack([lg for _, lg in self.pending])
        if self.d.rule.ban is not None:
            for j, (r, _) in enumerate(self.pending):
                self.d.rule.ban(self.rows[r].tokens, logits[j])
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
        """Freed rows take the next requests whose prompts have run (:meth:`prefill`), their keys and values
        copied in at the columns of their positions."""
        import torch

        d = self.d
        d.count["refills"] += 1
        start = time.perf_counter()
        while len(self.ready) < len(free) and queue:
            self.prefill(queue, len(free) - len(self.ready))
        placed = [(r, self.ready.popleft()) for r in free[:len(self.ready)]]
        for block in {id(p.block): p.block for _, p in placed}.values():
            mine = [(r, p) for r, p in placed if p.block is block]
            width = block.layers[0].keys.shape[2] - d.prefix.length
            n = [len(d.suffixes[p.request]) for _, p in mine]
            src_rows = torch.tensor([p.row for (_, p), k in zip(mine, n) for _ in range(k)], device=d.device)
            src_cols = torch.tensor([d.prefix.length + width - k + j for k in n for j in range(k)], device=d.device)
            dst_rows = torch.tensor([r for (r, _), k in zip(mine, n) for _ in range(k)], device=d.device)
            dst_cols = torch.tensor([d.prefix.length + j for k in n for j in range(k)], device=d.device)
            for src, dst in zip(block.layers, self.cache.layers):
                dst.keys[dst_rows, :, dst_cols] = src.keys[src_rows, :, src_cols]
                dst.values[dst_rows, :, dst_cols] = src.values[src_rows, :, src_cols]
        for r, p in placed:
            self.rows[r] = _Slot(p.request, d.prefix.length + len(d.suffixes[p.request]))
            self.pending.append((r, p.logits))
        d.count["prompt_s"] += time.perf_counter() - start

    def prefill(self, queue: deque[int], need: int) -> None:
        """The next queued prompts, at least ``need`` and at least ``PREFILL_TOKENS`` tokens of them where the
        queue has them, run as one left-padded batch over copies of the prefix cache: a batch of several prompts
        runs at a better rate than one alone (764 against 1,026 tokens/s for one against four 112-token prompts on
        a 2-core CPU), and the rows not placed now wait in ``ready``."""
        import torch

        d = self.d
        chosen: list[int] = []
        while queue and (len(chosen) < need or sum(len(d.suffixes[i]) for i in chosen) < PREFILL_TOKENS):
            chosen.append(queue.popleft())
        ids, valid, positions = d.prompt_block(chosen)
        block = copy.deepcopy(d.prefix.cache)
        block.batch_repeat_interleave(len(chosen))
        with torch.inference_mode():
            logits = d.forward(ids, positions, d.block_mask(valid, ids.shape[1]), block)
        self.ready.extend(_Prompted(i, row, block, logits[row]) for row, i in enumerate(chosen))

    def shed(self) -> None:
        """With no request left to start, keep only the live rows once half of the rows are idle: a step's cost
        grows with its rows."""
        live = [r for r, s in enumerate(self.rows) if s is not None]
        if len(live) * 2 > len(self.rows):
            return
        import torch

        keep = torch.tensor(live, device=self.d.device)
        for layer in self.cache.layers:
            layer.keys, layer.values = layer.keys.index_select(0, keep), layer.values.index_select(0, keep)
            layer.batch_size = len(live)
        self.rows = [self.rows[r] for r in live]

    def step(self) -> None:
        """One decode step of every row (idle rows compute padding at the prefix's end), from the CUDA graph if
        there is one."""
        import torch

        d, rows = self.d, self.rows
        start = time.perf_counter()
        live = [r for r, s in enumerate(rows) if s is not None]
        d.count["decode_steps"] += 1
        d.count["decode_rows"] += len(live)
        step_ids = torch.full((len(rows), 1), d.rule.pad_id, dtype=torch.long)
        step_pos = torch.full((len(rows), 1), d.prefix.length, dtype=torch.long)
        for r in live:
            step_ids[r, 0] = rows[r].tokens[-1]
            step_pos[r, 0] = rows[r].position
            rows[r].position += 1
        with torch.inference_mode():
            if d.graphs and self.graph is None:
                try:
                    self.graph = _GraphedStep(d.forward, len(rows), self.length, self.cache, self.where, d.device)
                except RuntimeError as e:   # an op that cannot be captured: this call decodes eagerly
                    log.warning("decode step not captured as a CUDA graph (%s); decoding eagerly", e)
                    d.graphs = False
            if d.graphs and self.graph is not None:
                logits = self.graph(step_ids.to(d.device), step_pos.to(d.device))
            else:
                positions = step_pos.to(d.device)
                self.where.at = positions
                width = self.length if d.full_mask else int(step_pos.max()) + 1
                logits = d.forward(step_ids.to(d.device), positions, _step_mask(positions, width), self.cache)
        self.pending = [(r, logits[r]) for r in live]
        d.count["decode_s"] += time.perf_counter() - start
