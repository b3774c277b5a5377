"""``vista-distill check``: everything a recipe needs, short of loading the large models.

Each check prints what it found; every problem is one line starting with ``problem:`` and makes the
command exit 1. Checks: precision and threads per role (``runtime/hardware.py``); the data (every source found
under the data root, loaded, split, leak-checked, ids unique); the teacher's and student's chat
templates where their files are local (they render the VISTA prompts, and reasoning templates get
thinking switched off); reasoning models with thinking left on; peak GPU memory for training and
scoring estimated from the student's architecture (``gpu_memory.py``) against the memory the recipe's
name promises; with ``online``, the teacher endpoint answers a real request.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Recipe

# Model families that reason in a <think> block unless the template is told otherwise.
REASONING = re.compile(r"qwen3(?!.*instruct-2507)|qwq|deepseek-r1|r1-distill|magistral|phi-4-(?:mini-)?reasoning|"
                       r"smollm3|glm-4\.[5-9]|hunyuan", re.IGNORECASE)


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    emit: Callable[[str], None] = print

    def info(self, text: str) -> None:
        self.lines.append(text)
        self.emit(text)

    def problem(self, text: str) -> None:
        self.problems.append(text)
        self.lines.append(f"problem: {text}")
        self.emit(f"problem: {text}")


def is_reasoning(model: str | None) -> bool:
    return bool(model) and bool(REASONING.search(str(model)))


def thinking_off(kwargs: dict[str, Any]) -> bool:
    return kwargs.get("enable_thinking") is False or kwargs.get("thinking") is False


# -- hardware ---------------------------------------------------------------------------------------

def check_hardware(recipe: Recipe, report: Report) -> None:
    from ..runtime.hardware import busy_cores, choose_dtype, choose_threads, detect, usable_cores
    from ..train.hf_configs import training_device, training_precision

    cap, t = detect(), recipe.teacher
    report.info(f"machine: {cap.describe()}")
    local_teacher = t.backend == "transformers" or (t.backend == "labels" and t.fallback and not t.base_url)
    tp = training_precision(recipe, detect(training_device(recipe)))
    sp = choose_dtype(recipe.student.dtype, cap, "student.dtype")
    tc = choose_dtype(t.dtype, cap, "teacher.dtype") if local_teacher else None
    remote = "human labels: no model runs" if t.backend == "labels" and not t.base_url else f"{t.backend}: the server's"
    rows = [("teacher (distill)", *((tc.dtype, tc.reason) if tc else ("-", remote)), t.threads if tc else None),
            ("training", f"weights {tp.model_dtype}, autocast {tp.compute_dtype}", tp.reason, recipe.train.cpu_threads),
            ("student, base (eval, score)", sp.dtype, sp.reason, recipe.eval.threads)]
    cores, load, env = usable_cores(), busy_cores(), os.environ.get("OMP_NUM_THREADS")
    for role, dtype, reason, threads in rows:
        th = choose_threads(threads, cores, load, env) if threads is not None else None
        report.info(f"  {role:28s} {dtype:34s} {reason}" + (f"; threads {th.threads} ({th.reason})" if th else ""))
    if not tp.native:
        report.problem(f"training computes in {tp.compute_dtype} on {cap.describe()}: emulated, many times slower; "
                       "student.dtype=auto train.bf16=auto trains at full speed")


# -- data -------------------------------------------------------------------------------------------

def check_data(recipe: Recipe, report: Report) -> None:
    from ..data.io import SchemaError
    from ..data.material import MissingDataError, load_material
    from ..data.root import ENV, data_root
    from ..data.splits import LeakageError

    root = data_root(recipe.data.root)
    report.info(f"data root: {root if root else f'none (--data-root DIR or ${ENV})'}")
    try:
        material = load_material(recipe)
    except MissingDataError as e:
        report.problem(str(e))
        return
    except LeakageError as e:
        report.problem(f"{recipe.path}: {e} (set data.leaks to drop-train or drop-test, or fix the sources)")
        return
    except (SchemaError, ValueError, OSError) as e:
        report.problem(str(e).splitlines()[0] if str(e) else type(e).__name__)
        return
    for r in material.reports:
        if "source" in r:
            rejected = r.get("load_report", {}).get("rejected")
            report.info(f"  {r['role']:5s} {r['benchmark']:12s} {r['source']}: {r['conversations']} conversations"
                        + (f" ({rejected} rows rejected)" if rejected else "")
                        + (f", {r['dropped_leaks']} dropped as leaks" if r.get("dropped_leaks") else ""))
        elif r.get("dropped_leaks"):
            report.info(
                f"  {r['role']:5s} {r['dropped_leaks']} conversation(s) dropped: they share a dialogue with test"
            )
    scored = sum(len(c.scored_turns) for c in material.train)
    report.info(f"  material: train {len(material.train)} conversations ({scored} scored turns), "
                f"test {len(material.test)}; no test dialogue in train")
    if not material.train:
        report.problem(f"{recipe.path}: data.train loads no conversations")


# -- templates and thinking -------------------------------------------------------------------------

def _local_model_dir(model: str | None) -> Path | None:
    if model is None:
        from ..backends.model_loading import resolve_model

        return Path(resolve_model(None))
    p = Path(model).expanduser()
    return p if (p / "config.json").exists() or (p / "tokenizer_config.json").exists() else None


def check_template(role: str, model: str | None, kwargs: dict[str, Any], report: Report) -> None:
    """Render a stage 2 prompt with the model's own template and the recipe's template variables."""
    from ..pipeline.render import render
    from ..pipeline.templates import build_messages, get_template, stage2_input

    where = _local_model_dir(model)
    if where is None:
        report.info(f"  {role} template: {model} is not on disk here; checked when it loads")
        return
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(where))
    except Exception as e:  # noqa: BLE001 - any load failure is the user's to fix
        report.problem(f"{role} {model}: tokenizer at {where} does not load: {type(e).__name__}: {e}")
        return
    messages = build_messages(get_template("stage2", "fewshot"), stage2_input(["A fact."], "Ref.", "A claim."))
    try:
        text = render(tok, messages, template_kwargs=kwargs)
    except Exception as e:  # noqa: BLE001
        report.problem(f"{role} {model}: chat template does not render the VISTA prompt: {type(e).__name__}: {e}")
        return
    template = tok.chat_template if isinstance(tok.chat_template, str) else str(tok.chat_template)
    tail = text[-80:]
    if "<think>" in template or "enable_thinking" in template:
        opened = tail.rstrip().endswith("<think>") or (tail.count("<think>") > tail.count("</think>"))
        if opened or not thinking_off(kwargs):
            report.problem(f"{role} {model}: the chat template reasons in a <think> block and thinking is on "
                           f"({role}.chat_template_kwargs = {kwargs}); set enable_thinking: false")
            return
    report.info(f"  {role} template: renders the VISTA prompt ({len(text)} chars), ends {tail[-40:]!r}")


def check_thinking(recipe: Recipe, report: Report) -> None:
    t, s = recipe.teacher, recipe.student
    if t.backend in ("openai", "transformers") or t.fallback:
        model = t.fallback if t.backend == "labels" else t.model
        if is_reasoning(model) and not thinking_off(t.chat_template_kwargs):
            report.problem(f"teacher {model} is a reasoning model and teacher.chat_template_kwargs "
                           f"{t.chat_template_kwargs} leaves thinking on: answers would be unfinished <think> "
                           "blocks; set teacher.chat_template_kwargs: {enable_thinking: false}")
    if is_reasoning(s.model) and not thinking_off(s.chat_template_kwargs):
        report.problem(f"student {s.model} is a reasoning model and student.chat_template_kwargs "
                       f"{s.chat_template_kwargs} leaves thinking on; set {{enable_thinking: false}}")
    if t.backend == "transformers" or (t.backend == "labels" and t.fallback and not t.base_url):
        check_template("teacher", t.fallback if t.backend == "labels" else t.model, t.chat_template_kwargs, report)
    check_template("student", s.model, s.chat_template_kwargs, report)


# -- memory -----------------------------------------------------------------------------------------

def check_memory(recipe: Recipe, report: Report) -> None:
    from .gpu_memory import largest_training, promised_gib, recipe_estimates, rows_per_forward

    est, where = recipe_estimates(recipe)
    if est is None:
        report.info(f"  memory: not estimated ({where})")
        return
    stage, t = largest_training(recipe)
    budget = promised_gib(recipe.name)
    report.info(f"  memory from {where}: training ({stage}) at {rows_per_forward(t)} x {t.max_length} tokens "
                f"{est['training'].line()}; scoring at batch {recipe.eval.batch_size} {est['scoring'].line()}"
                + (f"; the name promises {budget:g} GB" if budget else ""))
    if budget:
        for phase, e in est.items():
            if e.total > budget:
                report.problem(f"{recipe.path}: {phase} needs an estimated {e.total:.1f} GiB, more than the "
                               f"{budget:g} GB the recipe's name promises; lower the batch size or max_length")


# -- teacher endpoint -------------------------------------------------------------------------------

def check_endpoint(recipe: Recipe, report: Report, timeout_s: float = 30.0) -> None:
    """Reach an OpenAI-compatible teacher: the model is listed and a one-line request comes back answered."""
    import httpx

    t = recipe.teacher
    if t.backend != "openai" and not (t.backend == "labels" and t.fallback and t.base_url):
        report.info("  teacher endpoint: none (the teacher runs locally or is the human labels)")
        return
    from ..backends.openai_compat import redact_url

    model = t.model if t.backend == "openai" else t.fallback
    base = (t.base_url or "").rstrip("/")
    key = os.environ.get(t.api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with httpx.Client(timeout=timeout_s, headers=headers) as client:
            r = client.get(f"{base}/models")
            served = [m.get("id") for m in (r.json().get("data") or [])] if r.status_code == 200 else []
            if r.status_code in (401, 403):
                report.problem(f"teacher {redact_url(base)} refused the key (HTTP {r.status_code}); set "
                               f"${t.api_key_env}")
                return
            body = {**t.extra_body, "model": model, "max_tokens": 16, "temperature": 0,
                    "messages": [{"role": "user", "content": "Answer with one word: VERIFIED or UNVERIFIABLE. "
                                                             "Claim: Paris is in France. Reference: Paris is the "
                                                             "capital of France."}]}
            if t.chat_template_kwargs:
                body["chat_template_kwargs"] = t.chat_template_kwargs
            c = client.post(f"{base}/chat/completions", json=body)
    except httpx.HTTPError as e:
        report.problem(f"teacher endpoint {redact_url(base)} unreachable: {type(e).__name__}: {e}; start the server "
                       f"or fix teacher.base_url")
        return
    if served and model not in served:
        report.problem(f"teacher endpoint {redact_url(base)} serves {served}, not {model!r}: fix teacher.model")
        return
    if c.status_code != 200:
        report.problem(f"teacher endpoint {redact_url(base)}: a test request answered HTTP {c.status_code}: "
                       f"{c.text[:200]}")
        return
    choice = (c.json().get("choices") or [{}])[0]
    content = (choice.get("message") or {}).get("content") or ""
    if "<think>" in content or (choice.get("message") or {}).get("reasoning_content"):
        report.problem(f"teacher {model} at {redact_url(base)} still thinks with chat_template_kwargs "
                       f"{t.chat_template_kwargs}: its answers would be cut off; switch thinking off on the server")
        return
    report.info(f"  teacher endpoint {redact_url(base)}: {model} answered {content.strip()[:40]!r} "
                f"(finish_reason {choice.get('finish_reason')})")


def run_checks(recipe: Recipe, online: bool = False, emit: Callable[[str], None] = print) -> Report:
    """Every check; the report's ``problems`` decide the exit code."""
    report = Report(emit=emit)
    report.info(f"recipe {recipe.path or '<defaults>'} ({recipe.name})")
    check_hardware(recipe, report)
    check_data(recipe, report)
    check_thinking(recipe, report)
    check_memory(recipe, report)
    if online:
        check_endpoint(recipe, report)
    report.info(f"{len(report.problems)} problem(s)" if report.problems else "ok: no problems found")
    return report
