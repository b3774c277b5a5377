"""The stage trainer: TRL's ``SFTTrainer`` with class balance (:mod:`.balance`).

TRL builds the labels from the processed dataset's ``completion_mask`` (``completion_only_loss``), so prompt tokens get
``-100``. ``train.class_balance`` ``sampler`` replaces the train sampler with :class:`BalancedSampler`;
``train.micro_batch_size`` runs each step's examples in :class:`LengthSortedSteps` order, so its micro-batches hold
examples of similar length; ``weights`` multiplies each example's token losses by its class weight (a ``class_weight``
column, kept through collation), with TRL's normaliser. Eval loss is never weighted.

On a CPU, TRL's fused LM head projects every position of the batch through the vocabulary (it keeps only
the labelled ones on Triton devices, to spare Neuron recompilations); :func:`label_positions_only_on_cpu`
makes it keep only the labelled ones there too, which is most of a CPU step's time for short completions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .balance import BalancedSampler
from .silver_data import TrainError


def label_positions_only_on_cpu() -> bool:
    """Make TRL's fused LM head (``fused_lm_head=True``) score only the positions with a label on CPU, as it
    does on CUDA: with completion-only loss and one-word answers, projecting every prompt and padding
    position through the 49k-token vocabulary (forward and backward) was ~60% of a CPU training step
    (docs/performance.md, 'Training throughput'). Same loss (the other positions are masked out either way). Returns
    whether the switch is in place (False on a TRL without it: training works, only slower)."""
    import trl.trainer.utils as tu

    current = getattr(tu, "_use_triton", None)
    if current is None:
        return False
    if getattr(current, "_vista_cpu_compact", False):
        return True

    def compact(device: Any) -> bool:   # consulted only for the choice of positions, not for the kernels
        return device.type == "cpu" or current(device)

    compact._vista_cpu_compact = True   # type: ignore[attr-defined]
    tu._use_triton = compact
    return True


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


def trainer_class():
    """``SFTTrainer`` subclass with class-balanced sampling / loss weights (built lazily: TRL is heavy)."""
    import torch
    from trl import SFTTrainer

    label_positions_only_on_cpu()

    class VistaSFTTrainer(SFTTrainer):
        def __init__(self, *args: Any, sample_weights: Sequence[float] | None = None, sort_steps: bool = False,
                     **kwargs: Any) -> None:
            self.sample_weights, self.sort_steps = sample_weights, sort_steps
            super().__init__(*args, **kwargs)
            self.data_collator = _KeepWeights(self.data_collator)

        def _get_train_sampler(self, train_dataset=None):
            if self.sample_weights is None:
                return super()._get_train_sampler(train_dataset)
            return BalancedSampler(self.sample_weights, seed=self.args.seed)

        def get_train_dataloader(self):
            # wrapped after accelerate prepared the loader: it swaps a RandomSampler for its seeded one, which a
            # wrapper would hide (another order of examples than the unsplit batch's)
            loader = super().get_train_dataloader()
            if self.sort_steps:
                from accelerate.data_loader import get_sampler

                lengths = [len(ids) for ids in self.train_dataset["input_ids"]]
                loader.set_sampler(LengthSortedSteps(get_sampler(loader), lengths, self.args.train_batch_size
                                                     * self.args.gradient_accumulation_steps))
            return loader

        def _set_signature_columns_if_needed(self) -> None:
            super()._set_signature_columns_if_needed()
            if "class_weight" not in self._signature_columns:
                self._signature_columns = [*self._signature_columns, "class_weight"]

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            weights = inputs.pop("class_weight", None)
            if weights is None or not model.training:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if self.padding_free or "attention_mask" not in inputs:
                raise TrainError("train.class_balance=weights needs padded batches (no padding_free/packing)")
            # TRL's nll path with a per-example weight on each token's loss; same normaliser (tokens).
            inputs["use_cache"] = False
            if self.aux_loss_enabled:
                inputs["output_router_logits"] = True
            outputs = model(**inputs, fused_lm_head=True)
            per_token = -outputs.log_probs * weights.to(outputs.log_probs.dtype)[:, None]
            num_tokens = outputs.label_mask.sum() if num_items_in_batch is None else num_items_in_batch
            loss = per_token.sum() / torch.as_tensor(num_tokens).clamp(min=1)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * (self.accelerator.num_processes // self.get_tp_size())
            if self.aux_loss_enabled:  # MoE students, as in TRL
                steps = self.current_gradient_accumulation_steps if num_items_in_batch is not None else 1
                loss = loss + self.router_aux_loss_coef * outputs.aux_loss / steps
            n_valid = self.accelerator.gather_for_metrics(outputs.label_mask.sum()).sum()
            if n_valid > 0 and outputs.is_top1 is not None:
                correct = self.accelerator.gather_for_metrics(outputs.is_top1.sum()).sum()
                self._metrics["train"]["mean_token_accuracy"].append((correct / n_valid).item())
            self._total_train_tokens += self.accelerator.gather_for_metrics(
                inputs["attention_mask"].sum()).sum().item() // self._tp_size
            self._metrics["train"]["num_tokens"] = [self._total_train_tokens]
            return (loss, outputs) if return_outputs else loss

    return VistaSFTTrainer


class _KeepWeights:
    """Wraps TRL's collator so a ``class_weight`` column survives collation as a float tensor."""

    def __init__(self, base: Any) -> None:
        self.base = base

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        if not examples or "class_weight" not in examples[0]:
            return self.base(examples)
        weights = [ex["class_weight"] for ex in examples]
        batch = self.base([{k: v for k, v in ex.items() if k != "class_weight"} for ex in examples])
        batch["class_weight"] = torch.tensor(weights, dtype=torch.float32)
        return batch
