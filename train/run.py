"""Running a stage: prepare it (silver data tokenized, model + LoRA in a trainer), resume from its last
complete checkpoint, train, and write the adapter with its summary and model card.

What a stage does:

* reads ``<silver_dir>/<stage>/`` and ``<silver_dir>/manifest.json`` (:mod:`.silver_data`);
* tokenizes each example exactly as the scorer's ``TransformersBackend`` encodes prompts, the answer
  followed by the template's end-of-turn token (:mod:`.encoding`), and hands TRL the processed dataset
  (``input_ids`` + ``completion_mask``, ``completion_only_loss=True``);
* drops examples longer than ``train.max_length`` instead of truncating them (a truncated completion
  would lose its end-of-turn token), counted in the model card;
* stages 2 and 3: ``train.class_balance`` (:mod:`.balance`, :mod:`.trainer`);
* writes ``<output_dir>/<stage>/``: the adapter, the tokenizer, ``README.md`` (model card) and
  ``training_summary.json`` (:mod:`.model_card`); checkpoints ``checkpoint-N/`` beside them, and a rerun
  resumes from the last complete one (refused when they come from other silver data or another base model).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..backends.model_loading import quiet_peft_wrap
from ..config import Recipe, RecipeError
from ..runtime.exit_codes import writable_dir
from ..runtime.progress import QUIET_ENV, training_bar
from .balance import CLASS_BALANCE, class_weights
from .encoding import encode_split, end_of_turn
from .hf_configs import (
    build_lora_config,
    build_quantization_config,
    build_sft_config,
    micro_batches,
    training_hardware,
)
from .model_card import SUMMARY_NAME, stage_summary, write_model_card
from .silver_data import (
    DISTILLED_STAGES,
    STAGE_CLASSES,
    TrainError,
    load_silver,
    read_manifest,
    select_sources,
    silver_fingerprint,
    silver_root,
)

log = logging.getLogger(__name__)

RUN_INFO = "run_info.json"


def stage_output_dir(recipe: Recipe, stage: str) -> Path:
    """``checkpoints/<recipe>/<stage>/``: what the scorer's ``--adapters checkpoints/<recipe>`` reads."""
    return Path(recipe.resolve(recipe.train.output_dir)) / stage


def last_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest ``checkpoint-N`` whose ``trainer_state.json`` parses (a kill mid-save leaves it
    absent or torn)."""
    root = Path(output_dir)
    if not root.is_dir():
        return None
    found = []
    for p in root.iterdir():
        m = re.fullmatch(r"checkpoint-(\d+)", p.name)
        if m and p.is_dir():
            found.append((int(m.group(1)), p))
    for _, path in sorted(found, reverse=True):
        try:
            json.loads((path / "trainer_state.json").read_text())
        except (OSError, ValueError):
            log.warning("%s: incomplete checkpoint (no readable trainer_state.json), skipped", path)
            continue
        return path
    return None


@dataclass
class StageRun:
    """A prepared stage: the trainer and what the model card needs to know."""

    recipe: Recipe
    stage: str
    trainer: Any
    output_dir: Path
    silver_dir: Path
    manifest: dict[str, Any]
    silver: Any                      # the raw DatasetDict
    eos_token: str
    class_balance: str
    weights: dict[str, float]
    dropped: tuple[int, int]         # (train, test) examples over max_length
    resume: Path | None
    fingerprint: str                 # of the stage's silver data
    hardware: dict[str, Any] | None = None   # precision, threads and machine (hardware.RunHardware)


def prepare_stage(recipe: Recipe, stage: str) -> StageRun:
    """Load and tokenize the stage's silver data and build the trainer (model + LoRA); no training yet."""
    from transformers import AutoTokenizer

    from ..backends.model_loading import resolve_model
    from .trainer import VistaSFTTrainer  # TRL: imported where a stage is prepared, not with this module

    if stage not in DISTILLED_STAGES:
        raise TrainError(f"unknown stage {stage!r}; expected one of {list(DISTILLED_STAGES)}")
    recipe = recipe.for_stage(stage)
    t = recipe.train
    if t.class_balance not in CLASS_BALANCE:
        raise RecipeError(f"{recipe.path}: train.class_balance {t.class_balance!r}; expected one of "
                          f"{list(CLASS_BALANCE)}")
    precision, hw = training_hardware(recipe)
    root = silver_root(recipe)
    manifest = read_manifest(root)
    dd = select_sources(load_silver(root, stage), t.sources, root / stage)
    out = stage_output_dir(recipe, stage)
    model_path = resolve_model(recipe.student.model)

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    eot, eot_id = end_of_turn(tokenizer)

    mode = t.class_balance if stage in STAGE_CLASSES else "none"
    weights = class_weights(list(dd["train"]["label"]), t.class_weight_cap) if mode != "none" else {}
    kw = recipe.student.chat_template_kwargs   # the same template variables the scorer renders with
    train_ds, dropped_train = encode_split(dd["train"], tokenizer, eot_id, t.max_length,
                                           weights if mode == "weights" else None, kw)
    if len(train_ds) == 0:
        raise TrainError(f"{root / stage}[train]: no example fits train.max_length={t.max_length}")
    test = dd["validation"] if "validation" in dd and len(dd["validation"]) else None
    eval_ds, dropped_test = None, 0
    if test is not None:
        eval_ds, dropped_test = encode_split(test, tokenizer, eot_id, t.max_length, template_kwargs=kw)
    if eval_ds is not None and len(eval_ds) == 0:
        eval_ds = None
    sample_weights = [weights[lab] for lab in train_ds["label"]] if mode == "sampler" else None
    train_ds = train_ds.remove_columns("label")
    if eval_ds is not None:
        eval_ds = eval_ds.remove_columns("label")

    fingerprint = silver_fingerprint(dd, manifest, stage)
    resume = last_checkpoint(out) if t.resume else None
    if resume is not None:
        _check_same_run(out, {"silver_fingerprint": fingerprint, "base_model": recipe.student.model})
    args = build_sft_config(recipe, out, eot, has_eval=eval_ds is not None, resuming=resume is not None,
                            precision=precision)
    with quiet_peft_wrap():
        trainer = VistaSFTTrainer(
            model=model_path, args=args, train_dataset=train_ds, eval_dataset=eval_ds, processing_class=tokenizer,
            peft_config=build_lora_config(recipe), sample_weights=sample_weights,
            sort_steps=bool(micro_batches(recipe)),
            quantization_config=build_quantization_config(recipe, precision),
        )
    return StageRun(recipe, stage, trainer, out, root, manifest, dd, eot, mode, weights,
                    (dropped_train, dropped_test), resume, fingerprint, hw.to_dict())


def _check_same_run(out: Path, info: dict[str, Any]) -> None:
    """Refuse to resume checkpoints made from other silver data or another base model."""
    path = out / RUN_INFO
    try:
        before = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    diff = {k: (before.get(k), v) for k, v in info.items() if before.get(k) != v}
    if diff:
        what = ", ".join(f"{k} {a!r} then, {b!r} now" for k, (a, b) in diff.items())
        raise TrainError(f"{out}: its checkpoints come from another run ({what}); set train.resume=false to "
                         "start over, or choose another train.output_dir")


def _finished(recipe: Recipe, stage: str) -> dict[str, Any] | None:
    """The saved summary when the stage's last checkpoint already completed the run these settings plan
    on the same silver data and base model; checked before any model is loaded.

    (The Trainer resumed from a final checkpoint would train one more step and overwrite the summary.)
    """
    t = recipe.train
    out = stage_output_dir(recipe, stage)
    resume = last_checkpoint(out) if t.resume else None
    if resume is None:
        return None
    try:
        state = json.loads((resume / "trainer_state.json").read_text())
        summary = json.loads((out / SUMMARY_NAME).read_text())
    except (OSError, ValueError):
        return None
    root = silver_root(recipe)
    hp = summary.get("hyperparameters") or {}
    planned = (
        t.num_train_epochs,
        t.options.get("max_steps", t.max_steps),
        t.per_device_train_batch_size,
        t.gradient_accumulation_steps,
        silver_fingerprint(
            select_sources(load_silver(root, stage), t.sources, root / stage), read_manifest(root), stage
        ),
        recipe.student.model,
    )
    saved = (hp.get("num_train_epochs"), hp.get("max_steps"), hp.get("per_device_train_batch_size"),
             hp.get("gradient_accumulation_steps"), (summary.get("silver") or {}).get("fingerprint"),
             summary.get("base_model_arg"))
    step = state.get("global_step", 0)
    stopped = (summary.get("time_budget") or {}).get("stopped_at_step") == step   # ended by train.max_minutes
    if planned == saved and (stopped or step >= state.get("max_steps", step + 1)) and \
            (summary.get("results") or {}).get("global_step") == step:
        return summary
    return None


def time_budget(minutes: float) -> Any:
    """A ``transformers.TrainerCallback`` ending training at the first step end past ``minutes`` of training
    (``train.max_minutes``); the learning-rate schedule stays the planned one, the adapter saved is that step's.
    ``stopped_at`` is the step it stopped at (None: the planned steps all ran)."""
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list
    from transformers import TrainerCallback

    class TimeBudget(TrainerCallback):
        def __init__(self) -> None:
            self.minutes = minutes
            self.start: float | None = None
            self.stopped_at: int | None = None

        def on_train_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            over = self.start is not None and time.perf_counter() - self.start > 60 * minutes
            if PartialState().num_processes > 1:   # every rank must stop at the same step: rank 0's clock decides
                flag = [over]
                broadcast_object_list(flag, from_process=0)
                over = flag[0]
            if over and state.global_step < state.max_steps:
                self.stopped_at = state.global_step
                control.should_training_stop = True
                control.should_save = True   # a checkpoint at this step, so a rerun finds the stage finished
            return control

        def record(self, planned_steps: int) -> dict[str, Any]:
            return {"max_minutes": minutes, "planned_steps": planned_steps, "stopped_at_step": self.stopped_at}

    return TimeBudget()


def train_stage(recipe: Recipe, stage: str) -> dict[str, Any]:
    """Train (or resume) one stage's adapter; returns the training summary (also written to disk).

    A stage whose last checkpoint finished the planned run is not trained again: its summary is returned."""
    recipe = recipe.for_stage(stage)
    done = _finished(recipe, stage)
    if done is not None:
        _say_already_trained(recipe, stage, done)
        return done
    run = prepare_stage(recipe, stage)
    result, runtime, budget = _train(recipe, stage, run)
    summary = stage_summary(run, result, runtime)
    _fit_after_training(recipe, stage, run, summary)
    if budget is not None:
        _record_budget(stage, run.trainer, budget, summary)
    if run.trainer.accelerator.is_main_process:
        _write_summary(run.output_dir, summary)
    run.trainer.accelerator.wait_for_everyone()
    del run
    _free_memory()
    return summary


def _say_already_trained(recipe: Recipe, stage: str, done: dict[str, Any]) -> None:
    """One line (main process) on why a finished stage is not trained again."""
    from accelerate import PartialState

    if PartialState().is_main_process:
        print(f"[{stage}] already trained ({done['results']['global_step']} steps) in "
              f"{stage_output_dir(recipe, stage)}; train.resume=false starts over", flush=True)


def _train(recipe: Recipe, stage: str, run: StageRun) -> tuple[Any, float, Any]:
    """The training itself: the run's info written, the bar and ``train.max_minutes``' budget hooked in, the trainer
    run (from ``run.resume`` where there is one) and the adapter saved; returns the trainer's result, the seconds it
    trained and the budget (None: no limit)."""
    trainer, out = run.trainer, run.output_dir
    if run.resume is not None:
        trainer.accelerator.print(f"[{stage}] resuming from {run.resume} (train.resume=false starts over)")
    if trainer.accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        (out / RUN_INFO).write_text(json.dumps({"silver_fingerprint": run.fingerprint,
                                                "base_model": recipe.student.model}, indent=2))
    if os.environ.get(QUIET_ENV):   # the trainer's own bar and log printer off: one rich bar with the losses
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
        trainer.add_callback(training_bar(stage))
    budget = time_budget(recipe.train.max_minutes) if recipe.train.max_minutes else None
    if budget is not None:
        trainer.add_callback(budget)
    start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=str(run.resume) if run.resume is not None else None)
    runtime = time.perf_counter() - start
    trainer.save_model(str(out))
    return result, runtime, budget


def _fit_after_training(recipe: Recipe, stage: str, run: StageRun, summary: dict[str, Any]) -> None:
    """What is fitted on the saved adapter (main process only), into ``summary``: stage 2's evidence head and the
    pmi baseline's threshold (``train.evidence_head``), the label prior a class-balanced sampler calls for."""
    if recipe.train.evidence_head and stage == "stage2" and run.trainer.accelerator.is_main_process:
        _fit_evidence(recipe, stage, run, summary)
    if run.class_balance == "sampler" and run.weights and run.trainer.accelerator.is_main_process:
        from .evidence_fit import fit_label_prior

        q = summary["label_prior"] = fit_label_prior(recipe, run.output_dir, stage, run.weights)
        run.trainer.accelerator.print(
            f"[{stage}] label prior {'applied' if q['applied'] else 'not applied'} (chosen on {q['examples']} "
            f"{q['split']} examples: accuracy {q['accuracy_with_prior']:.3f} with the training data's prior, "
            f"{q['accuracy_as_trained']:.3f} as trained)")


def _fit_evidence(recipe: Recipe, stage: str, run: StageRun, summary: dict[str, Any]) -> None:
    """Stage 2's evidence head on the adapter, then (where it was fitted) the pmi baseline on the bare model."""
    from .evidence_fit import fit_evidence_head, fit_pmi_head

    say = run.trainer.accelerator.print
    h = summary["evidence_head"] = fit_evidence_head(recipe, run.output_dir, stage)
    say(f"[{stage}] evidence head not fitted ({h['not_fitted']}): the adapter scores alone" if "not_fitted" in h
        else f"[{stage}] evidence head fitted on {h['examples']} {h['split']} examples: accuracy "
             f"{h['accuracy']:.3f} (adapter alone {h['adapter_alone_accuracy']:.3f}, overlap rule "
             f"{h['overlap_rule_accuracy']:.3f}, PMI alone {h['pmi_alone_accuracy']:.3f})")
    if "not_fitted" not in h:   # the pmi baseline's threshold, on the same examples with the bare model
        p = summary["pmi_head"] = fit_pmi_head(recipe)
        say(f"[{stage}] pmi baseline (base model, no adapter) fitted: accuracy {p['accuracy']:.3f} there")


def _record_budget(stage: str, trainer: Any, budget: Any, summary: dict[str, Any]) -> None:
    """``train.max_minutes``' budget in the summary, and a line when it stopped the run early."""
    summary["time_budget"] = budget.record(trainer.state.max_steps)
    if budget.stopped_at is not None and trainer.accelerator.is_main_process:
        print(f"[{stage}] stopped by train.max_minutes={budget.minutes:g} after {budget.stopped_at} of "
              f"{trainer.state.max_steps} steps (a faster CPU or GPU trains them all)", flush=True)


def _write_summary(out: Path, summary: dict[str, Any]) -> None:
    """``training_summary.json`` and the model card beside the adapter."""
    (out / SUMMARY_NAME).write_text(json.dumps(summary, indent=2, default=str))
    write_model_card(out / "README.md", summary)  # after save_model: PEFT writes its own README there


def _free_memory() -> None:
    """What the trainer held, given back before the next stage loads its model."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def train_stages(recipe: Recipe, stages: Sequence[str] | str = "all") -> list[dict[str, Any]]:
    """Train stages in order (``"all"``: ``recipe.train.stages``)."""
    if stages == "all":
        todo = recipe.adapter_stages()
    else:
        todo = [stages] if isinstance(stages, str) else list(stages)
    bad = [s for s in todo if s not in DISTILLED_STAGES]
    if bad:
        raise TrainError(f"unknown stage(s) {bad}; expected {list(DISTILLED_STAGES)}")
    from accelerate import PartialState

    if PartialState().is_main_process:
        writable_dir(recipe.resolve(recipe.train.output_dir), "adapters folder", "train.output_dir")
    training_hardware(recipe, announce=PartialState().is_main_process)
    return [train_stage(recipe, s) for s in todo]
