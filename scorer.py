"""``VistaScorer``: the Python API behind ``vista-distill score``."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import Recipe
from .data.schema import ASSISTANT, Conversation
from .pipeline.engine import RULES, EngineConfig, TurnResult
from .pipeline.protocol import Backend
from .runtime.progress import RequestBar
from .scoring.evidence import evidence_metrics
from .scoring.results import ClaimLabel, ScoredTurn, ScoreResult
from .scoring.run import Chunking, label_claims, run_given_claims, run_pipeline
from .scoring.summary import summarize

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from .backends.calibration import Calibration

__all__ = ["ScoreResult", "VistaScorer"]

# the in-process loading options and their defaults: with ``backend=`` none of them can apply
LOADING_DEFAULTS: dict[str, Any] = {"model": None, "adapters": None, "dtype": "auto", "threads": "auto",
                                    "batch_size": 16, "load_in_4bit": False, "chat_template_kwargs": None,
                                    "attn_implementation": None}
PIPELINE_OPTIONS = tuple(f.name for f in dataclasses.fields(EngineConfig))


def reject_with_backend(where: str, given: Mapping[str, Any]) -> None:
    """A ``TypeError`` naming every loading option in ``given`` set away from its default: a given backend is
    already loaded, so they cannot apply."""
    clash = [name for name, value in given.items() if value != LOADING_DEFAULTS.get(name)]
    if clash:
        raise TypeError(f"{where}: {', '.join(clash)} cannot apply with backend= (the backend is already loaded): "
                        f"drop {'it' if len(clash) == 1 else 'them'}, or drop backend= to load the model in process")


def pipeline_config(base: EngineConfig, options: Mapping[str, Any], where: str = "VistaScorer") -> EngineConfig:
    """``base`` with the pipeline ``options`` (EngineConfig fields by name) over it; ``max_new_tokens`` is merged into
    ``base``'s budgets (``{"stage1": 64}`` changes stage 1's only). An unknown name is a ``TypeError`` listing the
    valid ones. ``base`` is not changed."""
    unknown = sorted(set(options) - set(PIPELINE_OPTIONS))
    if unknown:
        hint = " (give EngineConfig's fields as keyword options instead of config=)" if "config" in unknown else ""
        raise TypeError(f"{where}: unknown option(s) {unknown}{hint}; pipeline options are {sorted(PIPELINE_OPTIONS)}")
    options = dict(options)
    budgets = {**base.max_new_tokens, **(options.pop("max_new_tokens", None) or {})}
    return dataclasses.replace(base, max_new_tokens=budgets, **options)


def as_conversations(conversations: Sequence[Conversation] | Sequence[Sequence[Mapping[str, Any]]]
                     ) -> list[Conversation]:
    """``Conversation`` objects as they are; the VISTA authors' format (a list of conversations, each a list of turn
    dicts ``{role, utterance, retrieved_document, gold_label, human_claims}``, as ``data/samples/
    sample_dialogues.json`` holds) read as :func:`~vista_distill.data.io.read_conversations` reads that file: every
    problem raised together as one ``SchemaError``, a line each."""
    conversations = list(conversations)
    typed = [isinstance(c, Conversation) for c in conversations]
    if all(typed):
        return conversations
    if any(typed):
        raise TypeError("conversations: give Conversation objects or the authors' format (lists of turn dicts), "
                        "not both in one call")
    from .data.io import conversations_from_authors_json

    return conversations_from_authors_json(conversations)


class VistaScorer:
    """Score dialogues with VISTA, MiniCheck style: ``VistaScorer(...).score(conversations)``.

    Args:
        model: path or Hub id of the causal LM run in process; ``None``: the embedded SmolLM2-135M-Instruct.
        adapters: the stage adapters on it: a folder holding ``stage1/ stage2/ stage3/`` PEFT adapters (what
            ``vista-distill train`` writes) or ``{stage: dir}``. With adapters (here, or loaded in a given
            ``backend``) the default prompt style is the students' ``compact``, without them the paper's
            ``fewshot``.
        backend: any :class:`~vista_distill.pipeline.protocol.Backend` (a server, a cheap baseline, the human
            labels) in place of the in-process model; ``model``, ``adapters`` and the loading options below cannot
            apply to it, and giving any of them with it is a ``TypeError`` naming them.
        rule: the turn rule of the summary's headline: ``safe``, ``strict`` or ``authors`` (every record holds all
            three).
        calibration: the name of a calibration kept beside the adapters (:meth:`calibrate`, ``vista-distill
            calibrate``); ``None``: what training fitted.
        **options: the in-process model's loading options and the pipeline's settings, by name. Loading
            (:data:`LOADING_DEFAULTS`): ``dtype`` (``auto``, ``bfloat16``, ``float16`` or ``float32``:
            docs/hardware.md), ``threads`` (torch CPU threads: ``auto``, the cores not busy with other work, a
            number, or ``None``, as the process is set), ``batch_size`` (requests per forward pass),
            ``load_in_4bit`` (NF4 weights through bitsandbytes), ``chat_template_kwargs`` (chat-template variables,
            e.g. ``{"enable_thinking": False}``), ``attn_implementation`` (transformers'). The pipeline's settings,
            the one way to set them, are the fields of :class:`~vista_distill.pipeline.engine.EngineConfig`:
            ``style`` (``fewshot`` / ``compact``), ``speakers``, ``stage2`` and
            ``stage3`` (``score`` / ``generate``), ``stage4``, ``max_claims``, ``claims`` (``model`` / ``gold``),
            ``context_budget``, ``count_tokens``, ``max_new_tokens`` (merged into the default budgets:
            ``{"stage1": 64}`` changes stage 1's only), ``world``, ``world_knowledge``, ``world_concurrent``,
            ``world_top_k``. An unknown name is a ``TypeError`` listing them.

    :meth:`from_pretrained` loads trained adapters (a folder or a Hub id) with what they were trained with;
    :meth:`from_recipe` builds the model and the pipeline from a recipe, as ``eval`` and the CLI do.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        adapters: str | Path | Mapping[str, str | Path] | None = None,
        backend: Backend | None = None,
        rule: str = "safe",
        calibration: str | None = None,
        **options: Any,
    ) -> None:
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        self.rule = rule
        given = {"model": model, "adapters": adapters, **options}
        loading = {name: given.pop(name, default) for name, default in LOADING_DEFAULTS.items()}
        # trained adapters (given here or loaded in the given backend) read the compact prompts they were trained on
        trained = adapters or getattr(backend, "adapters", None)
        self.config = pipeline_config(EngineConfig(style="compact" if trained else "fewshot"), given)
        if backend is not None:
            reject_with_backend("VistaScorer", loading)
        else:
            from .backends.transformers import TransformersBackend

            backend = TransformersBackend(loading.pop("model"), **loading)
        self.backend = backend
        # the silver training data's majority labels, for the majority rule beside the scorer (from_recipe sets them)
        self.majority: dict[str, str] | None = None
        self.calibration: str | None = None
        if calibration is not None:
            self.use_calibration(calibration)

    @classmethod
    def from_pretrained(cls, adapters: str | Path, *, base_model: str | None = None, revision: str | None = None,
                        **options: Any) -> VistaScorer:
        """A scorer on trained stage adapters, as a PEFT model is loaded.

        Args:
            adapters: a folder holding ``stage1/ stage2/ stage3/`` (what ``vista-distill train`` writes) or the Hub
                repository id of one (downloaded and cached).
            base_model: the model the adapters go on; ``None``: the one they were trained on (each stage's
                ``training_summary.json``).
            revision: the Hub revision (branch, tag or commit) of a repository id.
            **options: as :class:`VistaScorer` (``rule``, ``dtype``, ``threads``, ``batch_size``, pipeline
                options). The prompt style and 4-bit loading default to what the adapters were trained with; a
                stage's ``evidence_head.json`` is applied.
        """
        from .backends.adapters import fetch_adapters, find_stage_adapters, trained_with

        for name, use in (("model", "base_model="), ("backend", "VistaScorer(backend=...)")):
            if name in options:
                raise TypeError(f"from_pretrained: {name}= cannot apply here; use {use}")
        folder = find_stage_adapters(fetch_adapters(adapters, revision))
        info = trained_with(folder)
        if info.prompt_style:
            options.setdefault("style", info.prompt_style)
        options.setdefault("load_in_4bit", info.load_in_4bit)
        return cls(base_model if base_model is not None else info.model, adapters=folder, **options)

    @classmethod
    def from_recipe(cls, recipe: Recipe, *, adapters: str | Path | Mapping[str, str | Path] | None = None,
                    role: str | None = None, backend: Backend | None = None, rule: str = "safe",
                    calibration: str | None = None, **options: Any) -> VistaScorer:
        """A scorer with a recipe's model and pipeline, as ``eval`` and ``vista-distill score`` build it.

        Args:
            recipe: the recipe (:func:`~vista_distill.config.load_recipe`); its pipeline settings
                (``recipe.engine_config(role)``: speakers, claims, budgets, chunking, world stage) and its model
                through :func:`~vista_distill.backends.factory.backend_for` (served when it names servers).
            adapters: the student's stage adapters; with them (or ``role="student"``) the student and its prompts
                (``pipeline.student_prompt_style``), without them the base model with the few-shot prompts.
            role: ``student`` or ``base``; ``None``: ``student`` when ``adapters`` are given.
            backend: a backend in place of the recipe's model (``adapters``, ``batch_size`` and ``threads`` cannot
                apply to it: a ``TypeError``).
            rule: as :class:`VistaScorer`.
            calibration: as :class:`VistaScorer` (kept beside the adapters, in process or served).
            **options: ``batch_size`` (16) and ``threads`` (``auto``, a number, ``None``) of the in-process model,
                ``style`` (the prompt style over the recipe's; ``None``: the recipe's), and EngineConfig fields over
                the recipe's, as :class:`VistaScorer` (``max_new_tokens`` merged into the recipe's budgets).
        """
        from .backends.factory import backend_for

        role = role or ("student" if adapters else "base")
        batch_size, threads = options.pop("batch_size", 16), options.pop("threads", "auto")
        style = options.pop("style", None)   # None: the recipe's
        pipeline = {**options, **({"style": style} if style else {})}
        if backend is not None:
            reject_with_backend("VistaScorer.from_recipe", {"adapters": adapters, "batch_size": batch_size,
                                                            "threads": threads})
        else:   # the one factory eval and the CLI use too
            backend = backend_for(recipe, "student" if role == "student" else "base", adapters=adapters,
                                  batch_size=batch_size or 16, threads=threads)
        scorer = cls(backend=backend, rule=rule, calibration=calibration)
        scorer.config = pipeline_config(recipe.engine_config(role), pipeline, "VistaScorer.from_recipe")
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
        conversations: Sequence[Conversation] | Sequence[Sequence[Mapping[str, Any]]],
        *,
        batched: bool = True,
        progress: bool = False,
        on_turn: Callable[[ScoredTurn], None] | None = None,
        evidence: bool = False,
        journal: str | Path | None = None,
        chunk_size: int = 16,
        attribution: bool = False,
    ) -> ScoreResult:
        """Run the pipeline over dialogues.

        Args:
            conversations: :class:`~vista_distill.data.schema.Conversation` objects (``read_conversations``), or the
                VISTA authors' format as plain data: a list of conversations, each a list of turn dicts
                ``{role, utterance, retrieved_document, gold_label, human_claims}``; a problem in it is a
                ``SchemaError``, one line per problem.
            batched: ``False`` sends one request per call, like the authors' loop (the same output).
            progress: show a bar over the model's requests, with the turns done.
            on_turn: called with each finished turn (a :class:`ScoredTurn`) as it finishes; turns taken from the
                journal are not computed again, so not told of.
            evidence: where the conversations have human claims, also run the evidence probes (:meth:`evidence`)
                and the cheap rules beside the scorer: ``summary["evidence"]``, ``summary["baselines"]``.
            journal: a file each ``chunk_size`` conversations' records are appended to as they finish; a rerun
                after a kill skips the chunks it holds and returns what one uninterrupted run returns. The caller
                removes it once the output is written.
            chunk_size: conversations per journal chunk.
            attribution: where the conversations have human claims and gold turn labels, also the turn accuracy
                with a stage answered by its rule or by the humans (:mod:`~vista_distill.scoring.attribution`):
                ``summary["attribution"]``; requests the rows share with this run's computed chunks are not computed
                again.

        Returns:
            A :class:`ScoreResult`: one turn per assistant turn (context turns have ``scored`` false), the summary.
        """
        if not isinstance(progress, bool):
            raise TypeError(f"progress must be True or False, got {type(progress).__name__}: "
                            "give a callback as on_turn=")
        conversations = as_conversations(conversations)
        chunking = Chunking(journal, chunk_size, self.backend.describe() if journal is not None else None)
        bar = on_issue = on_resumed = None
        told = [on_turn] if on_turn is not None else []
        if progress:
            bar, advance, on_resumed = self._progress_bar(conversations)
            told.append(advance)
            on_issue = bar.on_issue

        def finished(result: TurnResult) -> None:
            turn = ScoredTurn.from_dict(result.to_dict()) if on_turn is not None else None
            for tell in told:
                tell(turn)

        from .backends.stage_routing import RequestMemo

        backend = RequestMemo(self.backend, serve=False) if attribution else self.backend   # kept, not served
        start = time.perf_counter()
        stats_before = dict(self.backend.stats)
        try:
            records, journal_info = run_pipeline(conversations, self.config, backend, batched=batched,
                                                 on_turn=finished if told else None, on_issue=on_issue,
                                                 chunking=chunking, on_resumed=on_resumed)
        finally:
            if bar is not None:
                bar.close()
        wall = time.perf_counter() - start
        summary = summarize(records, self.rule)
        summary["run"] = self._run_info(batched, wall, len(records), journal_info, stats_before)
        result = ScoreResult(records, summary)
        if evidence and any(c.turns[i].gold_claims for c in conversations for i in c.scored_turns):
            self._evidence_beside(conversations, result)
        if attribution:
            backend.serve = True
            if (table := self._attribution(conversations, backend, records)) is not None:
                summary["attribution"] = table
        return result

    def _evidence_beside(self, conversations: list[Conversation], result: ScoreResult) -> None:
        """The evidence probes and the cheap rules beside the scorer, on the human claims, into ``result``."""
        from .scoring.baselines_beside import baselines_beside

        given, result.evidence_records = run_given_claims(conversations, self.config, self.backend, evidence_seed=0)
        result.summary["evidence"] = evidence_metrics(result.evidence_records)
        result.summary["baselines"] = baselines_beside(conversations, self.config, given, list(RULES), self.majority)

    def _attribution(self, conversations: list[Conversation], backend: Backend,
                     records: list[dict[str, Any]]) -> dict[str, Any] | None:
        from .scoring.attribution import attribution_records, attribution_table

        runs = attribution_records(conversations, self.config, backend, records)
        return attribution_table(runs, self.rule, system="scorer") if runs else None

    def evidence(self, conversations: Sequence[Conversation] | Sequence[Sequence[Mapping[str, Any]]],
                 seed: int = 0) -> list[dict[str, Any]]:
        """Does this scorer read its evidence? Stage 2 on the human claims of ``conversations`` with their
        references, then the evidence probes (``scoring/evidence.py``: deletion, foreign reference, claim only).

        Args:
            conversations: as :meth:`score`; only turns with human claims take part.
            seed: picks each foreign reference.

        Returns:
            The probes' records (``scoring.evidence.evidence_metrics`` turns them into the three metrics).
        """
        return run_given_claims(as_conversations(conversations), self.config, self.backend, evidence_seed=seed)[1]

    def label_claims(self, docs: Sequence[str], claims: Sequence[str]) -> list[ClaimLabel]:
        """MiniCheck's ``score(docs, claims)``: stage 2 alone on each (doc, claim) pair, no dialogue, no background
        (the request the pipeline sends for a turn's first claims).

        Args:
            docs: the grounding documents, one per claim.
            claims: the claims; as many as ``docs`` (else a ``ValueError``).

        Returns:
            One :class:`ClaimLabel` per pair: ``label`` (``VERIFIED`` / ``UNVERIFIABLE``), ``p_verified``, ``probs``,
            ``error``.
        """
        return [ClaimLabel(**d) for d in label_claims(list(docs), list(claims), self.config, self.backend)]

    def calibrate(self, conversations: Sequence[Conversation] | Sequence[Sequence[Mapping[str, Any]]], *,
                  name: str = "default", folds: int = 5, save: bool = True, dev_path: str | Path | None = None,
                  rule_alpha: float = 0.05) -> Calibration:
        """Fit this student's stage 2 head and threshold and its stage 3 label prior to a labelled dev set, choosing
        by cross-validation over its conversations (:mod:`~vista_distill.scoring.calibrate`), with each stage's cheap
        rule among the candidates (stage 1 judged by turn accuracy where the turns carry gold labels), then apply it.

        Args:
            conversations: dev dialogues with human claims and their categories (as :meth:`score` takes them).
            name: the calibration's name; saved as ``<adapters>/calibrations/<name>.json``.
            folds: cross-validation folds (at most one per conversation).
            save: write the file beside the adapters (``False``: apply it to this scorer only).
            dev_path: the file the conversations were read from, recorded with their fingerprint.
            rule_alpha: a stage's cheap rule replaces the student there only when it is more accurate out of fold
                and McNemar's p against the best student candidate is below this.

        Returns:
            The :class:`~vista_distill.backends.calibration.Calibration`: per stage the candidates' cross-validated
            accuracy and the one chosen; a stage whose refit did not do better keeps what it had, and a stage whose
            rule won by the margin is answered by the rule (``rules``).
        """
        from .backends.calibration import reset_calibration
        from .scoring.calibrate import choose_stage1, dev_fingerprint, dev_records, fit_calibration

        backend = self.backend.inner if getattr(self.backend, "purpose", "") == "calibration" else self.backend
        if getattr(backend, "adapter_folder", None) is None or not hasattr(backend, "evidence_features"):
            raise TypeError("calibrate: needs the student in process with its stage adapters "
                            "(VistaScorer.from_pretrained(adapters) or VistaScorer(adapters=...))")
        backend = reset_calibration(backend)   # fitted against what training left, not an earlier calibration
        self.backend, self.calibration = backend, None
        convs = as_conversations(conversations)
        records = dev_records(convs, self.config, backend)
        cal = fit_calibration(records, name, dev_fingerprint(convs, dev_path), folds, backend.priors.get("stage3"),
                              rule_alpha)
        cal = choose_stage1(cal, convs, self.config, backend, self.rule, rule_alpha)
        if save:
            cal.save(backend.adapter_folder)
        self.use_calibration(cal, announce=False)   # the caller has the calibration and says what it chose
        return cal

    def use_calibration(self, calibration: str | Calibration, announce: bool = True) -> None:
        """Apply a calibration: a name kept beside the backend's adapters, or a
        :class:`~vista_distill.backends.calibration.Calibration` (``announce``: log the stages it gives to a rule,
        one line)."""
        from .backends.calibration import Calibration, apply_calibration

        if not isinstance(calibration, Calibration):
            folder = getattr(self.backend, "adapter_folder", None)
            if folder is None:
                raise ValueError(f"calibration {calibration!r}: this scorer's backend has no adapters folder to "
                                 "read it from (load the student's adapters, in process or served)")
            calibration = Calibration.load(folder, calibration)
        self.backend = apply_calibration(self.backend, calibration)
        self.calibration = calibration.name
        if announce and (line := calibration.rule_line()):
            log.warning("%s", line)

    def _run_info(self, batched: bool, wall: float, n_records: int, journal_info: dict[str, Any] | None,
                  stats_before: Mapping[str, Any]) -> dict[str, Any]:
        """The summary's ``run``: backend, settings, wall time, the backend's counters over the run, its servers and
        hardware."""
        stats = self.backend.stats
        run = {
            "backend": self.backend.name,
            "style": self.config.style, "stage2": self.config.stage2, "stage3": self.config.stage3,
            "batched": batched, "wall_s": wall, "calibration": self.calibration,
            "turns_per_s": n_records / wall if wall else None,
            **({"journal": journal_info} if journal_info is not None else {}),
            **{k: v - stats_before.get(k, 0) for k, v in stats.items() if isinstance(v, (int, float))},
        }
        if self.backend.served:   # URLs, names, label-scoring method, replica events
            run["server"] = {**self.backend.describe(), "label_methods": dict(stats.get("label_methods") or {})}
        if self.backend.hardware is not None:
            run["hardware"] = self.backend.hardware.to_dict()
        return run

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
