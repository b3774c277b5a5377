"""``VistaScorer``: the Python API behind ``vista-distill score``."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import Recipe
from .data.io import atomic_write_text
from .data.schema import ASSISTANT, Conversation
from .scoring.evidence import evidence_metrics
from .scoring.run import label_claims, run_given_claims, run_pipeline
from .scoring.summary import summarize
from .pipeline.engine import RULES, EngineConfig, TurnResult
from .pipeline.protocol import Backend
from .runtime.progress import RequestBar


@dataclass
class ScoreResult:
    records: list[dict[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)
    evidence_records: list[dict[str, Any]] = field(default_factory=list)   # the evidence probes (scoring/evidence.py)

    def write(self, path: str | Path) -> tuple[Path, Path]:
        """Write records as JSONL to ``path``, the summary beside it (``<stem>.summary.json``) and the HTML
        report of every turn (``<stem>.report.html``)."""
        from .scoring.page import EVIDENCE_HEADER, EVIDENCE_TITLE, evidence_rows, write_html

        path = Path(path)
        atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.records))
        if self.evidence_records:
            atomic_write_text(path.with_name(path.stem + ".evidence.jsonl"),
                              "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.evidence_records))
        ev = evidence_rows({"scored": self.summary.get("evidence")})
        summary_path = path.with_name(path.stem + ".summary.json")
        atomic_write_text(summary_path, json.dumps(self.summary, indent=2, ensure_ascii=False))
        rows = [[rule, f"{100 * r['coverage']:.1f}", (r.get("gold") or {}).get("accuracy"), r["verdicts"]]
                for rule, r in self.summary.get("by_rule", {}).items()]
        write_html(path.with_name(path.stem + ".report.html"), f"VISTA scores: {path.name}", {"scored": self.records},
                   headline=rows, headline_header=["rule", "coverage %", "accuracy vs gold", "verdicts"],
                   rules=list(self.summary.get("by_rule", {})) or ["safe"],
                   notes=[f"{self.summary.get('scored_turns')} scored turns; backend "
                          f"{(self.summary.get('run') or {}).get('backend')}"],
                   tables=[(EVIDENCE_TITLE, EVIDENCE_HEADER, ev)] if ev else [])
        return path, summary_path


class VistaScorer:
    """Score dialogues with VISTA, MiniCheck style: ``VistaScorer(...).score(conversations)``.

    ``config``: the pipeline's settings (:class:`~vista_distill.pipeline.engine.EngineConfig`: prompt style, how
    stages 2-3 answer, stage 4, speakers, claim and token budgets, chunking, the world stage); ``**pipeline``
    overrides its fields by name (``style="compact"``, ``stage2="generate"``, ``max_new_tokens={"stage1": 64}``
    merged into the budgets). Without ``config`` the defaults, with the compact student prompts when ``adapters``
    are given. ``rule``: the turn rule of the summary (``safe``, ``strict``, ``authors``).

    The model: ``backend`` (any :class:`~vista_distill.pipeline.protocol.Backend`), else the in-process
    ``model`` (default: the embedded SmolLM2-135M-Instruct) with ``adapters`` (a folder with ``stage1/ stage2/
    stage3/`` PEFT adapters, or ``{stage: dir}``), loaded with ``dtype``, ``threads``, ``batch_size``,
    ``load_in_4bit``, ``chat_template_kwargs`` and ``attn_implementation``. :meth:`from_recipe` builds both from a
    recipe, through the backend factory eval and the CLI use.
    """

    def __init__(
        self,
        model: str | None = None,
        adapters: str | Path | Mapping[str, str | Path] | None = None,
        *,
        config: EngineConfig | None = None,
        rule: str = "safe",
        backend: Backend | None = None,
        dtype: str = "auto",
        threads: int | str | None = "auto",
        batch_size: int = 16,
        load_in_4bit: bool = False,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        attn_implementation: str | None = None,
        **pipeline: Any,
    ) -> None:
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        self.rule = rule
        fields = {f.name for f in dataclasses.fields(EngineConfig)}
        unknown = sorted(set(pipeline) - fields)
        if unknown:
            raise TypeError(f"VistaScorer: unknown option(s) {unknown}; pipeline options are {sorted(fields)}")
        budgets = pipeline.pop("max_new_tokens", None)
        if config is None:
            config = EngineConfig(style="compact" if adapters else "fewshot")
        self.config = dataclasses.replace(config, max_new_tokens=dict(config.max_new_tokens), **pipeline)
        if budgets:
            self.config.max_new_tokens.update(budgets)
        if backend is None:
            from .backends.transformers import TransformersBackend

            backend = TransformersBackend(model, adapters=adapters, dtype=dtype, load_in_4bit=load_in_4bit,
                                          batch_size=batch_size, threads=threads,
                                          chat_template_kwargs=chat_template_kwargs,
                                          attn_implementation=attn_implementation)
        self.backend = backend
        # the silver training data's majority labels, for the majority rule beside the scorer (from_recipe sets them)
        self.majority: dict[str, str] | None = None

    @classmethod
    def from_pretrained(cls, model: str | None = None, adapters: str | Path | None = None, *,
                        revision: str | None = None, **kwargs: Any) -> VistaScorer:
        """A scorer as a PEFT model is loaded: ``adapters`` is a folder holding ``stage1/ stage2/ stage3/`` (what
        ``vista-distill train`` writes) or a Hub repository id of one (downloaded at ``revision`` and cached); the
        base model, the prompt style and 4-bit loading come from what the adapters carry (each stage's
        ``training_summary.json``) unless given here, and a stage's ``evidence_head.json`` is applied. ``kwargs``:
        as :class:`VistaScorer` (rule, dtype, batch_size, pipeline options)."""
        from .backends.adapters import fetch_adapters, find_stage_adapters, trained_with

        folder = find_stage_adapters(fetch_adapters(adapters, revision)) if adapters is not None else None
        info = trained_with(folder or {})
        if folder and info.prompt_style and "config" not in kwargs:
            kwargs.setdefault("style", info.prompt_style)
        kwargs.setdefault("load_in_4bit", info.load_in_4bit)
        return cls(model if model is not None else info.model, adapters=folder, **kwargs)

    @classmethod
    def from_recipe(cls, recipe: Recipe, *, adapters: str | Path | Mapping[str, str | Path] | None = None,
                    style: str | None = None, role: str | None = None, **kwargs: Any) -> VistaScorer:
        """A scorer with the recipe's pipeline settings (``recipe.engine_config(role)``: speakers, claims, budgets,
        chunking, world stage) and its model through :func:`~vista_distill.backends.factory.backend_for`: with
        ``adapters`` (or ``role="student"``) the student and its prompts (``pipeline.student_prompt_style``),
        without them the base with the few-shot prompts; served when the recipe names servers. ``kwargs``: run
        options (rule, stage2-4, batch_size, threads, backend)."""
        from .backends.factory import backend_for

        role = role or ("student" if adapters else "base")
        if kwargs.get("backend") is None:   # the one factory eval and the CLI use too
            kwargs["backend"] = backend_for(recipe, "student" if role == "student" else "base", adapters=adapters,
                                            batch_size=kwargs.get("batch_size") or 16,
                                            threads=kwargs.get("threads", "auto"))
        scorer = cls(config=recipe.engine_config(role), **({"style": style} if style else {}), **kwargs)
        from .backends.cheap_baselines import majority_labels
        from .data.silver import SilverDataError
        from .train.silver_data import silver_root

        try:
            scorer.majority = majority_labels(silver_root(recipe))
        except (SilverDataError, ValueError):
            pass   # no silver data: the overlap rule alone stands beside the scorer
        return scorer

    def score(
        self,
        conversations: Sequence[Conversation],
        batched: bool = True,
        progress: bool | Callable[[TurnResult], None] = False,
        evidence: bool = False,
        journal: str | Path | None = None,
        chunk_size: int = 16,
    ) -> ScoreResult:
        """Run the pipeline; one record per assistant turn (context turns have ``scored: false``). ``evidence``:
        where the conversations have human claims, also the evidence probes (:meth:`evidence`), their metrics in
        the summary's ``evidence``. ``journal``: a file each ``chunk_size`` conversations' records are appended to
        as they finish (:mod:`.pipeline.journal`); a rerun after a kill skips the chunks it holds and returns what
        one uninterrupted run returns. The caller removes it once the output is written."""
        conversations = list(conversations)
        model = None
        if journal is not None:
            model = self.backend.describe()
        bar = on_issue = on_resumed = None
        on_turn = progress if callable(progress) else None
        if progress is True:
            bar, on_turn, on_resumed = self._progress_bar(conversations)
            on_issue = bar.on_issue
        start = time.perf_counter()
        stats_before = dict(self.backend.stats)
        try:
            records, journal_info = run_pipeline(conversations, self.config, self.backend, batched=batched,
                                                 on_turn=on_turn, on_issue=on_issue, journal=journal,
                                                 chunk_size=chunk_size, model=model,
                                                 on_resumed=on_resumed)
        finally:
            if bar is not None:
                bar.close()
        wall = time.perf_counter() - start
        summary = summarize(records, self.rule)
        stats = self.backend.stats
        summary["run"] = {
            "backend": self.backend.name,
            "style": self.config.style, "stage2": self.config.stage2, "stage3": self.config.stage3,
            "batched": batched, "wall_s": wall,
            "turns_per_s": len(records) / wall if wall else None,
            **({"journal": journal_info} if journal_info is not None else {}),
            **{k: v - stats_before.get(k, 0) for k, v in stats.items() if isinstance(v, (int, float))},
        }
        if self.backend.served:   # URLs, names, label-scoring method, replica events
            summary["run"]["server"] = {**self.backend.describe(),
                                        "label_methods": dict(stats.get("label_methods") or {})}
        if self.backend.hardware is not None:
            summary["run"]["hardware"] = self.backend.hardware.to_dict()
        result = ScoreResult(records, summary)
        if evidence and any(c.turns[i].gold_claims for c in conversations for i in c.scored_turns):
            given, result.evidence_records = run_given_claims(conversations, self.config, self.backend,
                                                              evidence_seed=0)
            summary["evidence"] = evidence_metrics(result.evidence_records)
            from .scoring.baselines_beside import baselines_beside

            summary["baselines"] = baselines_beside(conversations, self.config, given, list(RULES), self.majority)
        return result

    def evidence(self, conversations: Sequence[Conversation], seed: int = 0) -> list[dict[str, Any]]:
        """Does this scorer read its evidence? Stage 2 on the human claims of ``conversations`` with their
        references, then the evidence probes (``scoring/evidence.py``: deletion, foreign reference, claim only);
        their records (``evidence_metrics`` turns them into the three metrics)."""
        return run_given_claims(conversations, self.config, self.backend, evidence_seed=seed)[1]

    def label_claims(self, docs: Sequence[str], claims: Sequence[str]) -> list[dict[str, Any]]:
        """MiniCheck's ``score(docs, claims)``: stage 2 alone on each (doc, claim) pair, no dialogue, no background
        (the request the pipeline sends for a turn's first claims). One dict per pair: ``label`` (VERIFIED /
        UNVERIFIABLE), ``p_verified``, ``probs``, ``error``."""
        return label_claims(list(docs), list(claims), self.config, self.backend)

    def _progress_bar(self, conversations: Sequence[Conversation]
                      ) -> tuple[RequestBar, Callable[[TurnResult], None], Callable[[int], None]]:
        """A bar over model requests (its total grows as claims appear), with turns done as postfix; the callbacks
        for a computed turn and for ``n`` turns taken from the journal."""
        turns_total = sum(t.role == ASSISTANT for c in conversations for t in c.turns)
        done = {"turns": 0}
        bar = RequestBar("score", self.backend, postfix=lambda: f"{bar.stage} | turns {done['turns']}/{turns_total}")

        def advance(n: int) -> None:
            done["turns"] += n
            bar.show()

        return bar, lambda _res: advance(1), advance
