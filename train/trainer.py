"""The stage trainer: TRL's ``SFTTrainer`` with class balance (:mod:`.balance`), on TRL's public surface.

This module imports TRL and torch: only the training path imports it (``train/run.py``'s ``prepare_stage``).

TRL builds the labels from the processed dataset's ``completion_mask`` (``completion_only_loss``), so prompt tokens get
``-100``, and computes the loss with the fused LM head it adds to the model (``fused_lm_head=True``: per-token
log-probabilities, no logits). What the stage adds:

* ``train.class_balance`` ``sampler``: the train loader draws from :class:`BalancedSampler` (set on the loader
  ``get_train_dataloader`` returns);
* ``train.micro_batch_size``: each step's examples run in :class:`LengthSortedSteps` order, so its micro-batches hold
  examples of similar length;
* ``weights``: a ``class_weight`` column, kept through collation (``remove_unused_columns=False``: TRL's collator reads
  its own keys only; :class:`KeepWeights` makes the weights a tensor); in training, :class:`StageForward` multiplies
  each token's log-probability by its example's weight, so TRL's loss over them, with TRL's normaliser, is the
  weighted loss, and TRL logs its metrics as for any batch. Eval loss is never weighted;
* on a CPU, :class:`StageForward` projects only the labelled positions through the vocabulary (TRL keeps only them on
  Triton devices, and projects every one elsewhere): with one-word answers, projecting every prompt and padding
  position was about half of a CPU training step (``bench/results/train_loss_path/``). Same loss: the other
  positions are masked out either way.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from accelerate.data_loader import get_sampler
from peft import PeftModel
from torch.distributed.tensor import DTensor
from trl import SFTTrainer
from trl.kernels import ChunkedLogProbFunction
from trl.trainer.utils import FusedCausalLMOutput

from .balance import BalancedSampler
from .silver_data import TrainError

VOCAB_TILE = 32768                                   # vocabulary rows per projection tile (as TRL's fused head)
HEAD_OUTPUTS = ("log_probs", "entropy", "is_top1")   # what SFTTrainer asks its fused head for: loss and metrics
# head settings TRL's fused head applies and the labelled-positions path does not: such models keep TRL's path
SCALED_HEAD = ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling")


class LengthSortedSteps:
    """A sampler's indices, each run of ``step`` (the examples of one optimizer step: micro-batch size times
    accumulation steps) sorted by length, so that consecutive micro-batches pad less. Which examples an optimizer
    step sees, and so its summed loss and gradient, do not change: only their order within the step."""

    def __init__(self, sampler: Iterable[int], lengths: Sequence[int], step: int) -> None:
        self.sampler, self.lengths, self.step = sampler, lengths, step

    def __len__(self) -> int:
        return len(self.sampler)   # type: ignore[arg-type]

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        run: list[int] = []
        for i in self.sampler:
            run.append(i)
            if len(run) == self.step:
                yield from sorted(run, key=self.lengths.__getitem__)
                run = []
        yield from sorted(run, key=self.lengths.__getitem__)


class StageForward:
    """The forward of a stage's model, in place of the fused one TRL gave it (which it calls for all else).

    With ``fused_lm_head=True``: on a CPU (``label_positions_only``), the backbone's hidden states at the labelled
    positions only go through TRL's ``ChunkedLogProbFunction``, as TRL's own head does on Triton devices; and in
    training, a batch's ``class_weight`` multiplies each token's log-probability by its example's weight."""

    def __init__(self, model: Any) -> None:
        self.model, self.fused = model, model.forward
        self.__signature__ = inspect.signature(self.fused)   # the model's, which ``generate`` validates against
        config = model.config
        self.plain_head = config.get_text_config() is config and not getattr(config, "output_router_logits", False) \
            and all(getattr(config, name, None) is None for name in SCALED_HEAD)
        self.label_positions_only = True

    def __call__(self, *args: Any, fused_lm_head: bool = False, class_weight: torch.Tensor | None = None,
                 **kwargs: Any) -> Any:
        if fused_lm_head and self.compact(kwargs):
            out = self.labelled_positions(*args, **kwargs)
        else:
            out = self.fused(*args, fused_lm_head=fused_lm_head, **kwargs)
        if fused_lm_head and class_weight is not None and self.model.training:
            out.log_probs = out.log_probs * class_weight.to(out.log_probs.dtype)[:, None]
        return out

    def compact(self, kwargs: dict[str, Any]) -> bool:
        """Whether this call projects the labelled positions only (TRL's head projects every one off Triton)."""
        weight = self.model.get_output_embeddings().weight
        return self.label_positions_only and self.plain_head and kwargs.get("labels") is not None \
            and kwargs.get("shift_labels") is None and weight.device.type == "cpu" and weight.dim() == 2 \
            and not isinstance(weight, DTensor)

    def labelled_positions(self, *args: Any, labels: torch.Tensor, num_items_in_batch: Any = None,
                           **kwargs: Any) -> FusedCausalLMOutput:
        """TRL's fused head on the positions whose next-token label is not ``-100``: the same per-token outputs,
        zero elsewhere, and the same mean loss."""
        kwargs["use_cache"] = False
        hidden = self.model.base_model(*args, **kwargs).last_hidden_state[:, :-1]
        head = self.model.get_output_embeddings()
        hidden, labels = hidden.to(head.weight.device), labels[:, 1:].to(head.weight.device)
        mask = labels != -100
        per_token = ChunkedLogProbFunction.apply(hidden[mask], head.weight, head.bias, labels[mask], 1.0, VOCAB_TILE,
                                                 None, 1.0, HEAD_OUTPUTS)
        # masked_scatter keeps an all-masked batch connected to the model: a differentiable zero
        log_probs, entropy, _, _, is_top1 = (None if x is None else x.new_zeros(mask.shape).masked_scatter(mask, x)
                                             for x in per_token)
        loss = -log_probs.sum() / (mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch)
        return FusedCausalLMOutput(loss=loss, log_probs=log_probs, entropy=entropy, is_top1=is_top1, label_mask=mask)


class KeepWeights:
    """Wraps TRL's collator so a ``class_weight`` column survives collation as a float tensor."""

    def __init__(self, base: Callable[[list[dict[str, Any]]], dict[str, Any]]) -> None:
        self.base = base

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        if not examples or "class_weight" not in examples[0]:
            return self.base(examples)
        weights = [ex["class_weight"] for ex in examples]
        batch = self.base([{k: v for k, v in ex.items() if k != "class_weight"} for ex in examples])
        batch["class_weight"] = torch.tensor(weights, dtype=torch.float32)
        return batch


def check_weighted(args: Any, dataset: Any) -> None:
    """Refuse the settings under which a ``class_weight`` column would not weight the loss."""
    if "class_weight" not in (getattr(dataset, "column_names", None) or ()):
        return
    refused = {"train.options.remove_unused_columns=true (drops the class_weight column)": args.remove_unused_columns,
               "padding_free/packing (the weights are per padded row)": args.padding_free or args.packing,
               f"loss_type {args.loss_type!r} (weights weight the nll)": args.loss_type != "nll",
               "label_smoothing_factor > 0": args.label_smoothing_factor > 0}
    bad = [what for what, on in refused.items() if on]
    if bad:
        raise TrainError(f"train.class_balance=weights does not combine with {'; '.join(bad)}")


def batch_tokens(inputs: dict[str, Any], accelerator: Any) -> int:
    """The batch's tokens over every process, padding left out, as TRL's logged ``num_tokens`` counts them."""
    if "attention_mask" in inputs:
        local = inputs["attention_mask"].sum()
    else:   # padding-free: one packed row
        local = torch.tensor(inputs["position_ids"].size(1), device=inputs["position_ids"].device)
    parallel = accelerator.parallelism_config
    tp = parallel.tp_size if parallel is not None else 1   # tensor-parallel ranks share one batch
    return int(accelerator.gather_for_metrics(local).sum().item()) // tp


class VistaSFTTrainer(SFTTrainer):
    """``SFTTrainer`` with the stage's class balance (sampled or weighted), length-sorted micro-batches and CPU head
    (module docstring). ``train_tokens``: the tokens trained on so far in this process's run (padding left out)."""

    def __init__(self, *args: Any, sample_weights: Sequence[float] | None = None, sort_steps: bool = False,
                 **kwargs: Any) -> None:
        self.sample_weights, self.sort_steps, self.train_tokens = sample_weights, sort_steps, 0
        super().__init__(*args, **kwargs)
        check_weighted(self.args, self.train_dataset)
        self.data_collator = KeepWeights(self.data_collator)
        base = self.model.get_base_model() if isinstance(self.model, PeftModel) else self.model
        self.stage_forward = base.forward = StageForward(base)

    @property
    def label_positions_only(self) -> bool:
        """Whether the CPU head projects the labelled positions only (True; False: TRL's head, every position)."""
        return self.stage_forward.label_positions_only

    @label_positions_only.setter
    def label_positions_only(self, on: bool) -> None:
        self.stage_forward.label_positions_only = on

    def get_train_dataloader(self) -> Any:
        # the sampler is set on the loader accelerate prepared: it swaps a RandomSampler for its seeded one, which a
        # sampler given before would hide (another order of examples than the unsplit batch's)
        loader = super().get_train_dataloader()
        sampler = get_sampler(loader)
        if self.sample_weights is not None:
            sampler = BalancedSampler(self.sample_weights, seed=self.args.seed)
        if self.sort_steps:
            lengths = [len(ids) for ids in self.train_dataset["input_ids"]]
            sampler = LengthSortedSteps(sampler, lengths,
                                        self.args.train_batch_size * self.args.gradient_accumulation_steps)
        if sampler is not get_sampler(loader):
            loader.set_sampler(sampler)
        return loader

    def training_step(self, model: torch.nn.Module, inputs: dict[str, Any], num_items_in_batch: Any = None
                      ) -> torch.Tensor:
        self.train_tokens += batch_tokens(inputs, self.accelerator)
        return super().training_step(model, inputs, num_items_in_batch)
