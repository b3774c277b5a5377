"""What a trained stage reports: ``training_summary.json`` (:func:`stage_summary`) and the adapter's
``README.md`` model card written from it (teacher, silver data, hyperparameters, hardware, loss curves)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from ..runtime.numbers import number

SUMMARY_NAME = "training_summary.json"


def stage_summary(run: Any, result: Any, runtime: float) -> dict[str, Any]:
    """The summary of a finished run: ``run`` a prepared :class:`~vista_distill.train.run.StageRun`,
    ``result`` what ``trainer.train`` returned, ``runtime`` its wall time in seconds."""
    import torch

    recipe, stage, trainer, out, t = run.recipe, run.stage, run.trainer, run.output_dir, run.recipe.train
    args = trainer.args
    history = trainer.state.log_history
    train_losses = [(r["step"], r["loss"]) for r in history if "loss" in r]
    evals = [(r["step"], r["eval_loss"]) for r in history if "eval_loss" in r]
    hp = {
        "learning_rate": t.learning_rate, "num_train_epochs": t.num_train_epochs, "max_steps": args.max_steps,
        "per_device_train_batch_size": t.per_device_train_batch_size,
        "gradient_accumulation_steps": t.gradient_accumulation_steps, "micro_batch_size": t.micro_batch_size,
        "world_size": args.world_size,
        "max_length": t.max_length, "lora_r": recipe.lora.r, "lora_alpha": recipe.lora.alpha,
        "lora_dropout": recipe.lora.dropout, "target_modules": recipe.lora.target_modules,
        "load_in_4bit": recipe.student.load_in_4bit, "dtype": str(args.model_init_kwargs["dtype"]),
        "bf16": args.bf16, "fp16": args.fp16,
        "gradient_checkpointing": t.gradient_checkpointing, "seed": t.seed, "eos_token": run.eos_token,
        "trainable_params": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad),
    }
    dd, manifest = run.silver, run.manifest
    teachers = sorted(set(dd["train"]["teacher"])) if "teacher" in dd["train"].column_names else []
    eval_ds = trainer.eval_dataset
    summary: dict[str, Any] = {
        "recipe": recipe.name, "recipe_path": recipe.path, "stage": stage, "output_dir": str(out),
        # the embedded model is this checkpoint, dequantised from its Q4_1 GGUF
        "base_model": recipe.student.model or "HuggingFaceTB/SmolLM2-135M-Instruct",
        "base_model_arg": recipe.student.model,
        "teacher": manifest.get("teacher") or ", ".join(teachers) or "unknown",
        "silver": {
            "path": str(run.silver_dir / stage), "fingerprint": run.fingerprint,
            "manifest_fingerprint": manifest.get("fingerprint"),
            "train_examples": len(trainer.train_dataset),
            "validation_examples": len(eval_ds) if eval_ds is not None else 0,
            "dropped_train": run.dropped[0], "dropped_test": run.dropped[1],
            "prompt_style": (sorted(set(dd["train"]["prompt_style"]))
                             if "prompt_style" in dd["train"].column_names else None),
        },
        "class_balance": {"mode": run.class_balance, "weights": run.weights,
                          "counts": dict(sorted(Counter(dd["train"]["label"]).items()))
                          if run.class_balance != "none" else {}},
        "hyperparameters": hp,
        # under DDP each process draws its own shard: batches per epoch per process shrink with world size
        "distributed": {"world_size": args.world_size,
                        "examples_per_step": t.per_device_train_batch_size * args.world_size
                        * t.gradient_accumulation_steps,
                        "process_batches_per_epoch": len(trainer.get_train_dataloader())},
        "hardware": run.hardware,
        "resumed_from": str(run.resume) if run.resume is not None else None,
        "results": {
            "global_step": trainer.state.global_step, "planned_steps": trainer.state.max_steps,
            "train_runtime_s": runtime,
            "train_tokens": trainer.train_tokens,
            "final_train_loss": train_losses[-1][1] if train_losses else None,
            "first_eval_step": evals[0][0] if evals else None,
            "first_eval_loss": evals[0][1] if evals else None,
            "final_eval_step": evals[-1][0] if evals else None,
            "final_eval_loss": evals[-1][1] if evals else None,
            "train_loss_mean": result.training_loss, "curve": _curve(history),
            "peak_cuda_memory_gb": (torch.cuda.max_memory_allocated() / 2**30
                                    if torch.cuda.is_available() else None),
        },
    }
    return summary


def _fmt(x: Any) -> str:
    return number(x, 4, missing="None")


def card_metadata(s: dict[str, Any]) -> Any:
    """The card's YAML header (``huggingface_hub.ModelCardData``): base model, ``library_name: peft``, tags,
    the teacher and silver-data fingerprint, and a ``model-index`` block with the training run's metrics
    (final train loss; eval loss on the silver validation split when there is one)."""
    from huggingface_hub import EvalResult, ModelCardData

    r, silver = s["results"], s["silver"]
    stage_task = {"stage1": "text-generation"}.get(s["stage"], "text-classification")
    dataset = {"dataset_type": "vista-distill-silver", "dataset_name": f"silver {s['stage']} ({silver['fingerprint']})",
               "dataset_split": "validation", "task_type": stage_task,
               "task_name": f"VISTA {s['stage']}"}
    results = []
    if r.get("final_eval_loss") is not None:
        results.append(EvalResult(**dataset, metric_type="loss", metric_name="eval loss (silver validation split)",
                                  metric_value=round(float(r["final_eval_loss"]), 4)))
    if r.get("final_train_loss") is not None:
        results.append(EvalResult(**{**dataset, "dataset_split": "train"}, metric_type="loss",
                                  metric_name="final train loss", metric_value=round(float(r["final_train_loss"]), 4)))
    return ModelCardData(
        base_model=s["base_model"], library_name="peft", pipeline_tag="text-generation",
        tags=["vista-distill", "vista", "lora", "sft", "trl", s["stage"]],
        model_name=f"{s['recipe']}-{s['stage']}", eval_results=results or None,
        vista_distill={"teacher": s["teacher"], "silver_fingerprint": silver["fingerprint"], "stage": s["stage"],
                       "recipe": s["recipe"]},
    )


def write_model_card(path: Path, summary: dict[str, Any]) -> None:
    """``README.md`` of an adapter: teacher, silver data, hyperparameters, loss curves."""
    s = summary
    hp = s["hyperparameters"]
    lines = [
        "---",
        card_metadata(s).to_yaml(),
        "---",
        "",
        f"# {s['recipe']} / {s['stage']}: VISTA {s['stage']} student adapter",
        "",
        (f"LoRA adapter for stage {s['stage'][-1]} of the VISTA pipeline, trained by vista-distill on a "
         "teacher's silver data (compact student prompts). Use the folder above this one as the scorer's "
         "adapters:"),
        "",
        "```bash",
        "vista-distill score --input dialogues.json --output out.jsonl --adapters "
        f"{Path(s['output_dir']).parent}" + (f" --model {s['base_model']}" if s["base_model_arg"] else ""),
        "```",
        "",
        "## Data",
        "",
        "| | |",
        "| --- | --- |",
        f"| teacher | {s['teacher']} |",
        f"| silver data | `{s['silver']['path']}` |",
        f"| silver fingerprint | `{s['silver']['fingerprint']}` |",
        f"| train / validation examples | {s['silver']['train_examples']} / {s['silver']['validation_examples']} |",
        (f"| dropped (longer than max_length {hp['max_length']}) | {s['silver']['dropped_train']} train, "
         f"{s['silver']['dropped_test']} test |"),
        f"| class balance | {s['class_balance']['mode']} |",
    ]
    if s["class_balance"]["counts"]:
        lines.append("")
        lines.append("| class | train examples | weight |")
        lines.append("| --- | ---: | ---: |")
        for c, n in s["class_balance"]["counts"].items():
            w = s["class_balance"]["weights"].get(c)
            lines.append(f"| {c} | {n} | {_fmt(w) if w is not None else '1'} |")
    lines += ["", "## Hyperparameters", "", "| | |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in hp.items()]
    hw = s.get("hardware")
    if hw:
        lines += ["", "## Hardware", "", "| | |", "| --- | --- |",
                  f"| device | {hw['device']}: {hw['device_name']} |",
                  f"| CPU | {hw['cpu']} (flags: {', '.join(hw['cpu_flags']) or 'n/a'}) |",
                  (f"| precision | weights {hw['dtype']}, autocast "
                   f"{'bf16' if hw.get('bf16_autocast') else 'fp16' if hw.get('fp16_autocast') else 'none'} "
                   f"({hw['dtype_reason']}) |"),
                  f"| threads | {hw['threads']} ({hw['threads_reason']}) |",
                  f"| torch | {hw['torch']} |"]
    r = s["results"]
    weighted = s["class_balance"]["mode"] == "weights" and s["class_balance"]["weights"]
    evals = (f"* eval loss: {_fmt(r['first_eval_loss'])} at step {r['first_eval_step']} -> "
             f"{_fmt(r['final_eval_loss'])} at step {r['final_eval_step']}"
             if r["final_eval_loss"] is not None else "* eval loss: no validation split")
    lines += [
        "", "## Results", "",
        f"Steps {r['global_step']}, {r['train_tokens']} training tokens, {r['train_runtime_s']:.0f} s"
        + (f", resumed from `{Path(s['resumed_from']).name}`" if s.get("resumed_from") else "") + ".",
        "",
        f"* final train loss (last logged): {_fmt(r['final_train_loss'])}"
        + (" (class-weighted)" if weighted else ""),
        evals,
        "",
        "| step | train loss | eval loss |",
        "| ---: | ---: | ---: |",
    ]
    for step, row in sorted(r["curve"].items(), key=lambda kv: int(kv[0])):
        lines.append(f"| {step} | {_fmt(row.get('loss', ''))} | {_fmt(row.get('eval_loss', ''))} |")
    lines.append("")
    path.write_text("\n".join(lines))


def _curve(log_history: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    curve: dict[str, dict[str, float]] = {}
    for row in log_history:
        for key in ("loss", "eval_loss"):
            if key in row and "step" in row:
                curve.setdefault(str(row["step"]), {})[key] = float(row[key])
    return curve
