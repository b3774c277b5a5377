"""Local transformers backend: any causal LM, optional 4-bit loading, one PEFT adapter per stage,
batched greedy generation, label scoring by log-likelihood, and reuse of the shared few-shot prefix.

The instructions and worked examples of a stage are identical in every request, so their KV cache is
computed once (per adapter) and shared; each request only pays for its own target message.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..pipeline.labels import answer
from ..pipeline.protocol import LabelScores, Request, Response
from ..pipeline.render import THINKING_OFF
from .adapters import find_stage_adapters, load_stage_adapters
from .backend_options import BackendOptions, load_causal_lm
from .evidence_head import EvidenceHead
from .forward_paths import (
    GQA_SDPA,
    batches,
    cache_keyword,
    float32_head,
    output_cache,
    resolve_prefill_tokens,
    shared_prefix,
)
from .label_memo import LabelMemo, memo_key
from .label_prior import LabelPrior
from .list_generation import ListMarkerFormat, RepeatedLineStop, list_stop_reason
from .model_loading import encode_prompt, eos_ids, resolve_model, token_span
from .slot_decoding import Greedy, SharedPrefix, decode_in_slots, slots_supported, static_prefix_cache

log = logging.getLogger(__name__)


class TransformersBackend:
    """A causal LM (path or hub id) plus optional per-stage LoRA adapters, switched, never reloaded."""

    def __init__(self, model: str | None = None, adapters: str | Path | Mapping[str, str | Path] | None = None, *,
                 options: BackendOptions | None = None, **settings: Any) -> None:
        """``model``: a path or hub id (None: the embedded model); ``adapters``: a checkpoints folder or
        ``{stage: dir}``; the settings (:class:`.backend_options.BackendOptions`' fields) as ``options``, as
        keywords, or both (the keywords win)."""
        opts = dataclasses.replace(options or BackendOptions(), **settings)
        self.model_path = resolve_model(model)
        self.name = f"transformers:{model or 'embedded'}"
        self._set_hardware(opts)
        self._keep_settings(opts)
        self.tokenizer, model_obj = load_causal_lm(self.model_path, opts, self.device, self.torch_dtype)
        self._attach_adapters(model_obj, adapters, opts)
        self._load_heads()
        self._read_model_facts()
        self._init_caches(opts.label_memo)

    def _set_hardware(self, opts: BackendOptions) -> None:
        """Device, precision and threads (set before the model loads), logged in one line."""
        import torch

        from ..runtime.hardware import RunHardware, apply_threads, current_threads, detect, resolve_dtype

        self.device = opts.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.precision = resolve_dtype(opts.dtype, self.device)
        self.torch_dtype = self.precision.torch_dtype
        thread_choice = apply_threads(opts.threads) if opts.threads is not None else current_threads()
        self.hardware = RunHardware(self.precision, thread_choice, detect(self.device))
        log.info("%s: %s", self.name, self.hardware.line())

    def _keep_settings(self, opts: BackendOptions) -> None:
        """The settings a run reads: batching, the chat template's variables, evidence features, CUDA graphs."""
        self.batch_size, self.use_prefix_cache = opts.batch_size, opts.prefix_cache
        self.prefill_tokens = resolve_prefill_tokens(opts.prefill_tokens, self.device)
        kwargs = opts.chat_template_kwargs
        self.chat_template_kwargs = dict(THINKING_OFF if kwargs is None else kwargs)
        self.evidence_features, self.cuda_graphs = opts.evidence_features, opts.cuda_graphs

    def _attach_adapters(self, model_obj, adapters: str | Path | Mapping[str, str | Path] | None,
                         opts: BackendOptions) -> None:
        """The stage adapters on the loaded model (merged where :func:`.adapters.merged_stages` says), in eval
        mode."""
        self.adapters = find_stage_adapters(adapters)
        # where named calibrations of these adapters are kept (backends/calibration.py): the stage 2 folder's parent
        self.adapter_folder = Path(self.adapters["stage2"]).parent if "stage2" in self.adapters else None
        model_obj, self.merged = load_stage_adapters(model_obj, self.adapters, self.torch_dtype, opts.merge_adapters,
                                                     on_gpu=self.device.startswith("cuda"), four_bit=opts.load_in_4bit)
        self.model = model_obj.eval()

    def _load_heads(self) -> None:
        """What each stage adapter folder holds beside its weights: an evidence head, a label prior."""
        self.heads = {st: h for st, p in self.adapters.items() if (h := EvidenceHead.load(p)) is not None}
        self.priors = {st: q for st, p in self.adapters.items() if (q := LabelPrior.load(p)) is not None}

    def _read_model_facts(self) -> None:
        """What the model tells about itself: its end tokens, its forward's cache keyword, its context length."""
        self.eos_ids = eos_ids(self.tokenizer, self.model)
        self.cache_kw = cache_keyword(self.model)
        self.max_context: int | None = getattr(self.model.config, "max_position_embeddings", None)

    def _init_caches(self, label_memo: int) -> None:
        """The caches, asked-once answers and counters a run fills."""
        self._label_token_ids: dict[tuple[str, ...], list[list[int]]] = {}
        self._head32_cache: dict[str, Any] = {}   # the LM head's weight in float32 (forward_paths.float32_head)
        self._prefixes: OrderedDict[tuple, object] = OrderedDict()
        self._label_answers = LabelMemo(label_memo)   # label answers by (stage, prompt ids, labels); 0: none kept
        self._sliding: bool | None = None
        self._static_ok: bool | None = None   # slot_decoding.slots_supported(model), asked once
        self.progress: Callable[[int], object] | None = None  # told how many requests each chunk finished
        self.stats = {"prompt_tokens": 0, "completion_tokens": 0, "prefix_tokens_reused": 0, "forward_s": 0.0,
                      "decode_steps": 0, "decode_rows": 0, "refills": 0, "decode_s": 0.0, "prompt_s": 0.0,
                      "twin_requests": 0, "memo_hits": 0}

    served = False

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model_path": str(self.model_path), "dtype": str(self.torch_dtype),
                "device": self.device, "adapters": {k: str(v) for k, v in self.adapters.items()} or None,
                "merged_adapters": self.merged is not None, "batch_size": self.batch_size}

    # -- adapters -----------------------------------------------------------------------------
    def _adapter_context(self, stage: str):
        """Activate the stage's adapter (merged weights or PEFT's); stages without one run on the bare base model."""
        if self.merged is not None:
            self.merged.activate(stage)
        elif stage in self.adapters:
            self.model.set_adapter(stage)
        elif self.adapters:
            return self.model.disable_adapter()
        return contextlib.nullcontext()

    # -- tokenisation ------------------------------------------------------------------------
    def _encode(self, request: Request) -> tuple[list[int], list[int]]:
        """(shared prefix ids, request-specific suffix ids) of the rendered prompt."""
        return encode_prompt(self.tokenizer, request.messages, self.chat_template_kwargs,
                             split_prefix=self.use_prefix_cache)

    def _prefix_cache(self, stage: str, prefix: tuple[int, ...]):
        import torch
        from transformers import DynamicCache

        key = (stage if stage in self.adapters else None, prefix)
        if key in self._prefixes:
            self._prefixes.move_to_end(key)
            return self._prefixes[key]
        cache = DynamicCache(config=self.model.config)
        with torch.inference_mode():
            self.model(input_ids=torch.tensor([prefix], device=self.device), **{self.cache_kw: cache}, use_cache=True,
                       logits_to_keep=1)
        self._prefixes[key] = cache
        while len(self._prefixes) > 8:
            self._prefixes.popitem(last=False)
        return cache

    def _batch_inputs(self, stage: str, prefix: tuple[int, ...], suffixes: list[list[int]],
                      max_new_tokens: int | None = None):
        """input ids ``[prefix][pad..][suffix]`` with mask and positions, plus a batch copy of the prefix cache
        (preallocated for ``max_new_tokens`` more when generating)."""
        import torch

        width = max(len(s) for s in suffixes)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(suffixes), len(prefix) + width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        if prefix:
            ids[:, : len(prefix)] = torch.tensor(prefix)
            mask[:, : len(prefix)] = 1
        for i, s in enumerate(suffixes):
            ids[i, ids.shape[1] - len(s):] = torch.tensor(s)
            mask[i, ids.shape[1] - len(s):] = 1
        cache = None
        if prefix:
            shared = self._prefix_cache(stage, prefix)
            if max_new_tokens is not None:
                cache = static_prefix_cache(self.model.config, shared, len(suffixes), ids.shape[1] + max_new_tokens)
            if cache is None:
                cache = copy.deepcopy(shared)
                cache.batch_repeat_interleave(len(suffixes))
            self.stats["prefix_tokens_reused"] += len(prefix) * len(suffixes)
        return ids.to(self.device), mask.to(self.device), cache

    # -- public API ----------------------------------------------------------------------------
    def run(self, requests: list[Request]) -> list[Response]:
        """The pipeline's verb: generation and label answers (pipeline/labels.py ``answer``, from the two below)."""
        return answer(self, requests)

    def generate(self, requests: list[Request]) -> list[Response]:
        """Free generation of each request (greedy; the list stop rules with ``stop_on_repeat``)."""
        return self._forward(requests, {})   # type: ignore[return-value]

    def label_logprobs(self, requests: list[Request], claims: list[bool]) -> list[LabelScores]:
        """Each label's summed log-probability; where ``claims[i]``, the claim tokens' mean log-probability in the
        prompt and in its empty-reference twin (run beside it, answered from the memo when scored before)."""
        n_asked = len(requests)
        twins: dict[int, int] = {}
        extra = []
        for i, r in enumerate(requests):
            if claims[i] and r.twin:
                twins[i] = n_asked + len(extra)
                extra.append(dataclasses.replace(r, messages=r.twin, twin=()))
        self.stats["twin_requests"] += len(extra)
        with_claim = {i: requests[i].fields.claim for i in twins} | {j: requests[i].fields.claim
                                                                      for i, j in twins.items()}
        out: list[LabelScores] = self._forward([*requests, *extra], with_claim, n_asked)   # type: ignore[assignment]
        for i, j in twins.items():
            out[i].twin_logprob = out[j].claim_logprob
        return out[:n_asked]

    def _forward(self, requests: list[Request], claims: dict[int, str], n_asked: int | None = None
                 ) -> list[Response | LabelScores]:
        """Group by (stage, prefix, mode), run in length-sorted batches, return in request order: a Response per
        generation request, a LabelScores per label request (``claims``: index -> the claim whose tokens' mean
        log-probability is asked). Progress counts the first ``n_asked`` requests (the others are twins)."""
        n_asked = len(requests) if n_asked is None else n_asked
        encoded = [self._encode(r) for r in requests]
        groups: dict[tuple, list[int]] = {}
        out: list[Any] = [None] * len(requests)
        scored: dict[int, tuple] = {}   # label request -> its key in the memo of label answers
        asked: set[tuple] = set()
        for i, (r, (prefix, suffix)) in enumerate(zip(requests, encoded)):
            if (why := self._too_long(r, len(prefix) + len(suffix))) is not None:
                meta = {"error": why, "finish_reason": "too_long"}
                out[i] = (LabelScores(None, prompt_tokens=len(prefix) + len(suffix), meta=meta) if r.labels else
                          Response(text="", prompt_tokens=len(prefix) + len(suffix), meta=meta))
                continue
            if r.labels:   # a prompt scored before or earlier in this call is answered from the memo
                key = scored[i] = memo_key(r.stage, [*prefix, *suffix], r.labels, i in claims)
                if key in self._label_answers or key in asked:
                    continue
                asked.add(key)
            groups.setdefault((r.stage, tuple(prefix), r.labels, r.max_new_tokens, r.stop_on_repeat), []).append(i)
        if self.progress is not None and any(r is not None for r in out[:n_asked]):
            self.progress(sum(r is not None for r in out[:n_asked]))
        for group, idx in groups.items():
            self._run_group(group, idx, requests, encoded, claims, out, scored, n_asked)
        hits = self._label_answers.fill(out, scored)
        self.stats["memo_hits"] += len(hits)
        if self.progress is not None and any(i < n_asked for i in hits):
            self.progress(sum(i < n_asked for i in hits))
        return out

    def _run_group(self, group: tuple, idx: list[int], requests: list[Request], encoded: list, claims: dict[int, str],
                   out: list[Any], scored: dict[int, tuple], n_asked: int) -> None:
        """One (stage, prefix, labels, budget, stop rule) group's batches, their answers put in ``out``."""
        stage, prefix, labels, max_new, stop_repeat = group
        idx.sort(key=lambda i: len(encoded[i][1]))
        # generation in slots takes the whole group (a row's slot goes to the next request; each counts as it ends)
        slotted = not labels and self._slots_ok(stage, prefix)
        with self._adapter_context(stage):
            # label scoring stops at prefill_tokens padded tokens
            for chunk in [idx] if slotted else batches(idx, [len(encoded[i][1]) for i in idx], self.batch_size,
                                                       self.prefill_tokens if labels else None):
                suffixes = [encoded[i][1] for i in chunk]
                t0 = time.perf_counter()
                if labels:
                    res = self._score_labels(stage, prefix, suffixes, labels, [claims.get(i) for i in chunk])
                else:
                    res = self._generate(stage, prefix, suffixes, max_new, stop_repeat)
                self.stats["forward_s"] += time.perf_counter() - t0
                if self.progress is not None and not slotted:   # requests asked for, not twins
                    self.progress(sum(i < n_asked for i in chunk))
                for i, r in zip(chunk, res):
                    r.prompt_tokens = len(prefix) + len(encoded[i][1])
                    self.stats["prompt_tokens"] += r.prompt_tokens
                    self.stats["completion_tokens"] += getattr(r, "completion_tokens", 0)
                    out[i] = r
                    if i in scored:
                        self._label_answers.put(scored[i], r)

    def _too_long(self, request: Request, prompt_tokens: int) -> str | None:
        """Why a prompt cannot run (longer, with its answer, than the model's context), or None: such a request
        is answered with that error instead of allocating a mask the size of the prompt squared."""
        answer = max((len(x) for x in self._label_ids(request.labels)), default=0) if request.labels \
            else request.max_new_tokens
        if self.max_context is None or prompt_tokens + answer <= self.max_context:
            return None
        return (f"prompt of {prompt_tokens:,} tokens (+{answer} to answer) is longer than the model's context of "
                f"{self.max_context:,} tokens: not run")

    def _label_ids(self, labels: Sequence[str]) -> list[list[int]]:
        """Each label's token ids, tokenized once per label set (asked for every label request)."""
        key = tuple(labels)
        if key not in self._label_token_ids:
            self._label_token_ids[key] = [self.tokenizer(lab, add_special_tokens=False)["input_ids"] for lab in key]
        return self._label_token_ids[key]

    def _generate(self, stage: str, prefix: tuple[int, ...], suffixes: list[list[int]], max_new: int,
                  stop_on_repeat: bool = False) -> list[Response]:
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        if self._slots_ok(stage, prefix):
            return self._generate_in_slots(stage, prefix, suffixes, max_new, stop_on_repeat)
        ids, mask, cache = self._batch_inputs(stage, prefix, suffixes, max_new_tokens=max_new)
        stopping = StoppingCriteriaList([RepeatedLineStop(self, ids.shape[1])]) if stop_on_repeat else None
        processors = LogitsProcessorList([ListMarkerFormat(self, ids.shape[1])]) if stop_on_repeat else None
        with torch.inference_mode(), self._shared(prefix):
            seqs = self.model.generate(
                input_ids=ids, attention_mask=mask, **{self.cache_kw: cache}, max_new_tokens=max_new,
                do_sample=False, temperature=None, top_p=None, top_k=None, stopping_criteria=stopping,
                # a static cache on a GPU makes generate compile the forward anew per cache length (gpu_random_8b)
                disable_compile=True, logits_processor=processors,
                pad_token_id=self.tokenizer.pad_token_id, eos_token_id=self.eos_ids,
            )
        ends = set(self.eos_ids) | {self.tokenizer.pad_token_id}   # a row stopped early is padded after its stop
        results = []
        for row in seqs[:, ids.shape[1]:].tolist():
            n = next((j for j, t in enumerate(row) if t in ends), len(row))
            results.append(self._generated(row[:n], n == len(row), min(n + 1, len(row)), stop_on_repeat))
        return results

    def _generated(self, tokens: list[int], at_budget: bool, completion_tokens: int,
                   stop_on_repeat: bool) -> Response:
        """A generation's response. The finish reason is judged from the text, not from what follows it, so a row
        stopped inside a batch (then padded) and the same row alone (where generation simply ends) agree."""
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        finish = (stop_on_repeat and list_stop_reason(text)) or ("length" if at_budget else "stop")
        return Response(text=text.strip(), completion_tokens=completion_tokens, meta={"finish_reason": finish})

    def _slots_ok(self, stage: str, prefix: tuple[int, ...]) -> bool:
        """Whether generation may run in refilled slots (:func:`.slot_decoding.slots_supported`; a shared prefix)."""
        if self._static_ok is None:
            self._static_ok = slots_supported(self.model)
        return bool(prefix) and self._static_ok

    def _generate_in_slots(self, stage: str, prefix: tuple[int, ...], suffixes: list[list[int]], max_new: int,
                           stop_on_repeat: bool) -> list[Response]:
        import torch

        shared = self._prefix_cache(stage, prefix)
        stop = RepeatedLineStop(self, 0).row_done if stop_on_repeat else None
        ban = ListMarkerFormat(self, 0).apply if stop_on_repeat else None
        with torch.inference_mode(), self._shared(prefix):
            decoded = decode_in_slots(
                SharedPrefix(self.model, self.cache_kw, shared, len(prefix)), suffixes,
                Greedy(max_new, self.eos_ids, self.tokenizer.pad_token_id, ban=ban, stop=stop), self.batch_size,
                on_done=None if self.progress is None else (lambda _: self.progress(1)), stats=self.stats,
                graphs=None if self.cuda_graphs else False)
        self.stats["prefix_tokens_reused"] += len(prefix) * len(suffixes)
        return [self._generated(d.tokens, d.reason == "length", len(d.tokens) + (d.reason == "eos"), stop_on_repeat)
                for d in decoded]

    def _shared(self, prefix: tuple[int, ...]):
        """The shared-prefix attention context for a batch continuing ``prefix`` (off for sliding-window models,
        whose caches drop old positions, and on other devices)."""
        if self._sliding is None:
            from transformers import DynamicCache

            self._sliding = any(getattr(x, "is_sliding", False) for x in DynamicCache(config=self.model.config).layers)
        on = bool(prefix) and not self._sliding and str(self.device).startswith("cpu")
        return shared_prefix(len(prefix)) if on else contextlib.nullcontext()

    def _score_labels(self, stage: str, prefix: tuple[int, ...], suffixes: list[list[int]],
                      labels: tuple[str, ...], claims: Sequence[str | None] | None = None) -> list[LabelScores]:
        """Each request's summed log-probability of each label's tokens; where ``claims`` names a request's claim,
        also its tokens' mean log-probability."""
        import torch

        label_ids = self._label_ids(labels)
        spans = [token_span(self.tokenizer, s, c) for s, c in zip(suffixes, claims or [None] * len(suffixes))]
        keep = max([d + 1 for d, _ in filter(None, spans)], default=1)
        ids, mask, cache = self._batch_inputs(stage, prefix, suffixes)
        n = ids.shape[0]
        past = len(prefix)
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        claim_lp: list[float | None] = [None] * n
        with torch.inference_mode(), float32_head(self.model, self._head32_cache), self._shared(prefix):
            # logits of the last position only (and of a claim's positions where asked): the full (batch x
            # length x vocabulary) matrix is ~20% of a 135M model's forward compute and most of its memory
            # traffic, and only those rows are read
            out = self.model(input_ids=ids[:, past:], attention_mask=mask, position_ids=positions[:, past:],
                             **{self.cache_kw: cache}, use_cache=True, logits_to_keep=keep)
            first = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
            for r, span in enumerate(spans):
                if span is not None:   # logits at kept index keep-1-d predict the token d from the end
                    d, k = span
                    rows = torch.arange(keep - 1 - d, keep - 1 - d + k, device=out.logits.device)
                    lp = torch.log_softmax(out.logits[r, rows].float(), dim=-1)
                    tgt = ids[r, ids.shape[1] - d: ids.shape[1] - d + k].to(lp.device)
                    claim_lp[r] = float(lp[torch.arange(k), tgt].mean())
            cache = output_cache(out)
            # A sliding-window layer past its window cannot be cropped back (Mistral v0.1, Gemma...), and a
            # packed 4D mask would bypass its window: there each label continues from its own copy of the cache.
            sliding = any(getattr(layer, "is_sliding", False) for layer in getattr(cache, "layers", ()))
            last_pos = positions[:, -1:]
            scores = torch.zeros(n, len(labels))
            for j, lab in enumerate(label_ids):
                scores[:, j] = first[:, lab[0]].cpu()
            longer = [j for j, lab in enumerate(label_ids) if len(lab) > 1]
            if longer and not sliding:
                scores += self._continuations(label_ids, longer, mask, last_pos, cache)
            for j in longer if sliding else ():
                lab = label_ids[j]
                cont = torch.tensor([lab[:-1]], device=self.device).expand(n, -1)
                ext = torch.cat([mask, torch.ones_like(cont)], dim=1)
                pos = last_pos + 1 + torch.arange(cont.shape[1], device=self.device)
                o = self.model(input_ids=cont, attention_mask=ext, position_ids=pos,
                               **{self.cache_kw: copy.deepcopy(cache)}, use_cache=True)
                lp = torch.log_softmax(o.logits.float(), dim=-1)
                tgt = torch.tensor(lab[1:], device=self.device)
                scores[:, j] += lp[:, torch.arange(len(lab) - 1), tgt].sum(-1).cpu()
        return [LabelScores([float(x) for x in row], claim_logprob=lp) for row, lp in zip(scores, claim_lp)]

    def _continuations(self, label_ids: list[list[int]], longer: list[int], mask, last_pos, cache):
        """Log-probability of every label's tokens after its first, for all labels in one forward: the labels'
        continuations are packed side by side, each attending to the prompt and to its own earlier tokens
        only (a 4D mask) and numbered from the prompt's end, so one pass over the weights and the prompt's
        cache serves every label (one pass per label before: each re-read both)."""
        import torch

        n, past = mask.shape[0], mask.shape[1]
        ids, pos, seg = [], [], []
        for j in longer:
            lab = label_ids[j]
            ids += lab[:-1]
            pos += list(range(1, len(lab)))
            seg += [j] * (len(lab) - 1)
        t = len(ids)
        seg_t = torch.tensor(seg, device=self.device)
        own = (seg_t[:, None] == seg_t[None, :]) & torch.ones(t, t, dtype=torch.bool, device=self.device).tril()
        full = torch.cat([mask.bool()[:, None, None, :].expand(n, 1, t, past), own.expand(n, 1, t, t)], dim=-1)
        out = self.model(input_ids=torch.tensor([ids], device=self.device).expand(n, -1), attention_mask=full,
                         position_ids=last_pos + torch.tensor([pos], device=self.device), **{self.cache_kw: cache},
                         use_cache=True)
        lp = torch.log_softmax(out.logits.float(), dim=-1)
        extra = torch.zeros(n, len(label_ids))
        start = 0
        for j in longer:
            lab = label_ids[j]
            k = len(lab) - 1
            tgt = torch.tensor(lab[1:], device=self.device)
            extra[:, j] = lp[:, start + torch.arange(k, device=self.device), tgt].sum(-1).cpu()
            start += k
        cache.crop(-t)
        return extra


__all__ = ["BackendOptions", "GQA_SDPA", "TransformersBackend", "find_stage_adapters"]

