"""The recipe object (config/): typed fields checked when a recipe loads, moved and dead keys named,
one pipeline section read by every role, and ``vista-distill score`` options as recipe overrides."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vista_distill.config import MOVED, RecipeError, load_recipe
from vista_distill.pipeline.engine import RULES

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "recipes" / "demo-cpu.yaml"


@pytest.mark.parametrize("override,message", [
    ("teacher.backend=vllm", r"demo-cpu.yaml: teacher.backend: 'vllm' is not one of transformers, openai, labels"),
    ("teacher.prompt_style=chatty", r"teacher.prompt_style: 'chatty' is not one of fewshot, compact"),
    ("teacher.stage3=guess", r"teacher.stage3: 'guess' is not one of score, generate"),
    ("data.leaks=ignore", r"data.leaks: 'ignore' is not one of error, drop-test, drop-train"),
    ("distill.rule=lenient", r"distill.rule: 'lenient' is not one of safe, strict, authors"),
    ("eval.rules=[safe, lenient]", r"eval.rules\[1\]: 'lenient' is not one of"),
    ("eval.mcnemar=fisher", r"eval.mcnemar: 'fisher' is not one of exact, chi2, chi2-cc"),
    ("train.class_balance=oversample", r"train.class_balance: 'oversample' is not one of none, sampler, weights"),
    ("pipeline.student_prompt_style=long", r"pipeline.student_prompt_style: 'long' is not one of"),
    ("pipeline.max_new_tokens={stage9: 3}", r"pipeline.max_new_tokens: unknown stage\(s\) \['stage9'\]"),
    ("teacher.max_new_tokens={llm_judge: 3}", r"teacher.max_new_tokens: unknown stage\(s\) \['llm_judge'\]"),
    ("pipeline.colour=red", r"pipeline: unknown key\(s\) \['colour'\]"),
    ("train.per_stage={stage7: {max_steps: 3}}", r"train.per_stage.stage7: unknown stage"),
    ("train.per_stage={stage2: {max_stepz: 3}}", r"train.per_stage.stage2: \['max_stepz'\] are not train keys"),
    ("train.per_stage={stage2: {class_balance: lots}}", r"train.per_stage.stage2.*class_balance: 'lots' is not one of"),
    ("student.merge_adapters=sometimes", r"student.merge_adapters 'sometimes'; expected auto, true or false"),
])
def test_bad_values_fail_at_load_naming_file_and_key(override, message):
    with pytest.raises(RecipeError, match=message):
        load_recipe(DEMO, [override])


@pytest.mark.parametrize("key", sorted(MOVED))
def test_moved_and_dead_keys_say_where_they_went(key, tmp_path):
    section = {"TeacherConfig": "teacher", "DistillConfig": "distill", "EvalSettings": "eval"}[key.split(".")[0]]
    leaf = key.split(".")[1]
    raw = yaml.safe_load(DEMO.read_text())
    raw.setdefault(section, {})[leaf] = {} if leaf in ("options", "max_new_tokens") else "x"
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(RecipeError) as err:
        load_recipe(path)
    assert f"old.yaml: {section}.{leaf}: " in str(err.value)
    assert ("pipeline." in str(err.value)) == (leaf != "options")


def test_every_shipped_recipe_loads_with_a_pipeline_section():
    for path in sorted((ROOT / "recipes").glob("*.yaml")):
        raw = yaml.safe_load(path.read_text())
        assert "pipeline" in raw, path.name
        r = load_recipe(path)
        assert r.pipeline.student_prompt_style == "compact" and r.distill.rule in RULES


def test_one_pipeline_section_sets_every_role():
    r = load_recipe(DEMO, ["pipeline.speakers=user,assistant", "pipeline.max_claims=5",
                           "pipeline.max_new_tokens={stage1: 40, llm_judge: 20}",
                           "teacher.max_new_tokens={stage1: 80}", "teacher.stage3=score"])
    teacher, student, base = (r.engine_config(role) for role in ("teacher", "student", "base"))
    assert {c.speakers.user for c in (teacher, student, base)} == {"user"}
    assert {c.speakers.assistant for c in (teacher, student, base)} == {"assistant"}
    assert {c.max_claims for c in (teacher, student, base)} == {5}
    assert (teacher.style, student.style, base.style) == ("fewshot", "compact", "fewshot")
    # budgets: engine defaults < pipeline < the teacher's own; baseline prompts are not engine stages
    assert (teacher.max_new_tokens["stage1"], student.max_new_tokens["stage1"], base.max_new_tokens["stage1"]) \
        == (80, 40, 40)
    assert "llm_judge" not in student.max_new_tokens and student.max_new_tokens["stage3"] == 96
    # the local teacher scores stage 2 by likelihood (stage3 score set above); an OpenAI teacher generates
    assert (teacher.stage2, teacher.stage3) == ("score", "score")
    served = load_recipe(DEMO, ["teacher.backend=openai", "teacher.stage3=null"]).engine_config("teacher")
    assert (served.stage2, served.stage3) == ("generate", "generate")


def test_score_options_are_recipe_overrides(tmp_path, sample_path):
    """The real CLI: a bad option value is reported against its recipe key before any model loads."""
    bad = subprocess.run([sys.executable, "-m", "vista_distill", "score", "--input", str(sample_path), "--output",
                          str(tmp_path / "o.jsonl"), "--max-claims", "3", "pipeline.student_prompt_style=long"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "<recipe>: pipeline.student_prompt_style: 'long' is not one of fewshot, compact" in bad.stderr
    bad_json = subprocess.run([sys.executable, "-m", "vista_distill", "score", "--input", str(sample_path),
                               "--output", str(tmp_path / "o.jsonl"), "--chat-template-kwargs", "{nope"],
                              capture_output=True, text=True, cwd=tmp_path)
    assert bad_json.returncode != 0 and "--chat-template-kwargs is not JSON" in bad_json.stderr


def test_scorer_from_recipe_takes_the_student_and_pipeline(tmp_path):
    from vista_distill.backends.human_labels import LabelsBackend
    from vista_distill.scorer import VistaScorer

    r = load_recipe(DEMO, ["pipeline.max_claims=3", "pipeline.speakers=user,assistant"])
    plain = VistaScorer.from_recipe(r, backend=LabelsBackend([]))
    assert (plain.config.style, plain.config.max_claims, plain.config.speakers.user) == ("fewshot", 3, "user")
    student = VistaScorer.from_recipe(r, role="student", backend=LabelsBackend([]))
    assert student.config.style == "compact"
    with pytest.raises(TypeError, match="adapters cannot apply with backend="):   # a backend loads no adapters
        VistaScorer.from_recipe(r, adapters=str(tmp_path), backend=LabelsBackend([]))


def test_per_stage_train_settings_apply_to_their_stage_only():
    r = load_recipe(None, ["train.per_stage={stage2: {max_steps: 7, learning_rate: 0.001}}", "train.max_steps=3"])
    s2, s1 = r.for_stage("stage2"), r.for_stage("stage1")
    assert (s2.train.max_steps, s2.train.learning_rate, s2.train.per_stage) == (7, 0.001, {})
    assert (s1.train.max_steps, s1.train.learning_rate) == (3, r.train.learning_rate)
    assert r.train.max_steps == 3 and s2.lora == r.lora and s2.data == r.data


def test_lora_on_top_layers_only(tmp_path):
    from vista_distill.train.hf_configs import build_lora_config

    cfg = build_lora_config(load_recipe(DEMO, ["lora.layers_to_transform=[-2, -1, 0]"]))
    assert cfg.layers_to_transform == [0, 28, 29]    # SmolLM2-135M has 30 decoder layers
    assert set(cfg.target_modules) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert build_lora_config(load_recipe(DEMO, ["lora.layers_to_transform=null"])).layers_to_transform is None


def test_per_stage_settings_reach_the_world_stage():
    r = load_recipe(None, ["train.per_stage={world: {class_balance: weights, num_train_epochs: 3}}"])
    w, s2 = r.for_stage("world"), r.for_stage("stage2")
    assert (w.train.class_balance, w.train.num_train_epochs) == ("weights", 3)
    assert (s2.train.class_balance, s2.train.num_train_epochs) == (r.train.class_balance, r.train.num_train_epochs)


def test_memory_estimate_takes_the_largest_stage():
    """A stage with a longer max_length than the train section (the demo's stage 2) sets the training estimate."""
    from vista_distill.check.gpu_memory import largest_training, recipe_estimates

    base = load_recipe(None, ["train.max_length=320", "train.per_device_train_batch_size=8"])
    longer = load_recipe(None, ["train.max_length=320", "train.per_device_train_batch_size=8",
                                "train.per_stage={stage2: {max_length: 448}}"])
    stage, t = largest_training(longer)
    assert (stage, t.max_length, t.per_device_train_batch_size) == ("stage2", 448, 8)
    est_base, _ = recipe_estimates(base)
    est_longer, _ = recipe_estimates(longer)
    assert est_longer["training"].total > est_base["training"].total
    # micro-batches (train.micro_batch_size): a forward pass holds 2 rows, not the step's 8
    micro = load_recipe(None, ["train.max_length=320", "train.per_device_train_batch_size=8",
                               "train.micro_batch_size=2"])
    est_micro, _ = recipe_estimates(micro)
    assert est_micro["training"].total < est_base["training"].total


def test_every_gpu_recipe_gets_a_memory_estimate_within_its_promise():
    """The 7-8B recipes name their GPU memory (``-24gb``, ``-80gb``): ``check`` finds each student's architecture in
    the shipped ``recipes/architectures/`` (no hub) and estimates training and scoring within that promise."""
    from pathlib import Path

    from vista_distill.check.gpu_memory import promised_gib, recipe_estimates

    recipes = [p for p in sorted((Path(__file__).resolve().parents[1] / "recipes").glob("*.yaml"))
               if promised_gib(p.stem)]
    assert len(recipes) >= 6
    for path in recipes:
        r = load_recipe(path)
        est, where = recipe_estimates(r)
        assert est is not None and "recipes/architectures/" in where, (path.name, where)
        assert all(e.total <= promised_gib(r.name) for e in est.values()), (path.name, est)
