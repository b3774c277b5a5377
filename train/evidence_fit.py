"""Fitting evidence heads (:mod:`..backends.evidence_head`) on the silver validation split (the teacher's labels on
dialogues no adapter trained on), each example scored with and without its reference:

* :func:`fit_evidence_head`: the stage 2 adapter's head on (label margin, claim PMI, word overlap), saved beside the
  adapter as ``evidence_head.json``;
* :func:`fit_pmi_head`: the ``pmi`` baseline's threshold, a logistic fit on the *base* model's claim PMI alone (no
  adapter, nothing trained), saved as ``pmi_head.json`` in the adapters' folder (``train.output_dir``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import Recipe
from .silver_data import load_silver, select_sources, silver_root

MAX_EXAMPLES = 256
PMI_HEAD_FILE = "pmi_head.json"


def _validation_features(recipe: Recipe, adapter_dir: str | Path | None, stage: str = "stage2"
                         ) -> tuple[list[dict[str, float]], list[bool], str, str, int]:
    """(features per scored example, VERIFIED per example, split name, silver folder, examples not scored) of the
    stage's silver validation split (its train split when the validation split is too small), scored by the
    student's model with ``adapter_dir``'s adapter, or bare with None."""
    from ..data.schema import VERIFIED

    rows, split, folder = _validation_rows(recipe, stage, min_labels=2)
    out = _score_rows(recipe, rows, stage, adapter_dir, evidence_features=True)
    scored = [(o.meta["evidence"], row["label"] == VERIFIED) for o, row in zip(out, rows)
              if "pmi" in (o.meta.get("evidence") or {})]
    return ([f for f, _ in scored], [v for _, v in scored], f"silver {split} split", folder,
            len(rows) - len(scored))


def _validation_rows(recipe: Recipe, stage: str, min_labels: int) -> tuple[list[dict[str, Any]], str, str]:
    """(rows, split name, silver folder): the stage's silver validation split, or its train split when the
    validation split has under 40 rows or fewer than ``min_labels`` labels; at most ``MAX_EXAMPLES`` rows, seeded."""
    root = silver_root(recipe)
    dd = select_sources(load_silver(root, stage), recipe.train.sources, root / stage)
    split = ("validation" if "validation" in dd and len(set(dd["validation"]["label"])) >= min_labels
             and len(dd["validation"]) >= 40 else "train")
    rows = list(dd[split])
    if len(rows) > MAX_EXAMPLES:
        rows = random.Random(recipe.train.seed).sample(rows, MAX_EXAMPLES)
    return rows, split, str(root / stage)


def row_request(row: dict[str, Any], stage: str, labels: Sequence[str]) -> Any:
    """A silver row's label request. A stage 2 row stores its rendered prompt only, so the claim and the reference
    the evidence features read, and the prompt with an empty reference, are cut from its last message at the
    headings the stage 2 layout puts around the reference (pipeline/templates.py ``stage2_parts``)."""
    from ..pipeline.protocol import Fields, Request
    from ..pipeline.templates import stage2_parts

    messages = tuple({"role": m["role"], "content": m["content"]} for m in row["prompt"])
    content = messages[-1]["content"] if messages else ""
    head, _, tail, _ = stage2_parts((), "", "")
    heading = head.rsplit("\n\n", 1)[-1]   # "REFERENCE TEXT:\n"
    start = content.find(heading)
    end = content.find(tail, start + len(heading)) if start >= 0 else -1
    if stage != "stage2" or end < 0 or not content[end + len(tail):].strip():
        return Request(stage, messages, tuple(labels), 8)
    fields = Fields(claim=content[end + len(tail):], reference=content[start + len(heading):end])
    twin = {**messages[-1], "content": content[:start + len(heading)] + content[end:]}
    return Request(stage, messages, tuple(labels), 8, fields=fields, twin=(*messages[:-1], twin))


def _score_rows(recipe: Recipe, rows: list[dict[str, Any]], stage: str, adapter_dir: str | Path | None,
                evidence_features: bool = False) -> list[Any]:
    """The stage's label request of each silver row, scored by the student's model with ``adapter_dir``'s adapter
    (bare with None), whatever head or label prior an earlier fit left beside it left out."""
    from ..backends.transformers import TransformersBackend
    from ..pipeline.templates import get_template

    labels = get_template(stage, recipe.pipeline.student_prompt_style).labels
    requests = [row_request(row, stage, labels) for row in rows]
    s = recipe.student
    backend = TransformersBackend(s.model, adapters={stage: adapter_dir} if adapter_dir else None, dtype=s.dtype,
                                  load_in_4bit=s.load_in_4bit, batch_size=recipe.eval.batch_size,
                                  chat_template_kwargs=s.chat_template_kwargs,
                                  attn_implementation=s.attn_implementation, evidence_features=evidence_features)
    backend.heads.pop(stage, None)
    backend.priors.pop(stage, None)
    return backend.run(requests)


def fit_label_prior(recipe: Recipe, adapter_dir: str | Path, stage: str, weights: dict[str, float]) -> dict[str, Any]:
    """Choose on the silver validation split whether ``adapter_dir``'s label scores get the training data's prior
    back (:mod:`..backends.label_prior`: the adapter was trained with a class-balanced sampler of ``weights``): kept
    when it labels more validation rows right than the adapter's own scores. Saves ``label_prior.json`` either way
    (an empty shift: not applied) and returns what the choice saw."""
    from ..backends.label_prior import LabelPrior, sampler_shift
    from ..pipeline.labels import label_answers

    t0 = time.perf_counter()
    rows, split, folder = _validation_rows(recipe, stage, min_labels=1)
    out = _score_rows(recipe, rows, stage, adapter_dir)
    shift = sampler_shift(weights)
    prior = LabelPrior(shift)
    own = adjusted = 0
    for o, row in zip(out, rows):   # o.label: the adapter's own choice (no prior was loaded for this fit)
        lp = o.meta["logprobs"]
        own += o.label == row["label"]
        adjusted += label_answers(list(lp), [list(lp.values())], prior.shift)[0].label == row["label"]
    n = max(len(rows), 1)
    fitted = {"split": f"silver {split} split", "silver": folder, "examples": len(rows),
              "accuracy_as_trained": round(own / n, 4), "accuracy_with_prior": round(adjusted / n, 4),
              "applied": adjusted > own, "seconds": round(time.perf_counter() - t0, 1)}
    LabelPrior(shift if adjusted > own else {}, fitted).save(adapter_dir)
    return {**fitted, "shift": shift}


def _fit(recipe: Recipe, adapter_dir: str | Path | None, names: tuple[str, ...], stage: str = "stage2"):
    from ..backends.evidence_head import fit

    feats, verified, split, silver, skipped = _validation_features(recipe, adapter_dir, stage)
    head = fit({n: [f[n] for f in feats] for n in names}, verified, split=split, silver=silver, skipped=skipped)
    return head


def fit_evidence_head(recipe: Recipe, adapter_dir: str | Path, stage: str = "stage2") -> dict[str, Any]:
    """Fit and save the head of ``adapter_dir`` on (margin, pmi, overlap); returns what it was fitted on (for the
    training summary)."""
    t0 = time.perf_counter()
    try:
        head = _fit(recipe, adapter_dir, ("margin", "pmi", "overlap"), stage)
    except ValueError as e:   # too little material (a shrunk recipe): the adapter scores on its own, and says so
        return {"not_fitted": str(e), "seconds": round(time.perf_counter() - t0, 1)}
    head.save(adapter_dir)
    return {**head.fitted, "w_margin": head.w_margin, "w_pmi": head.w_pmi, "w_overlap": head.w_overlap,
            "bias": head.bias, "seconds": round(time.perf_counter() - t0, 1)}


def pmi_head_path(recipe: Recipe) -> Path:
    return Path(recipe.resolve(recipe.train.output_dir)) / PMI_HEAD_FILE


def fit_pmi_head(recipe: Recipe) -> dict[str, Any]:
    """Fit the ``pmi`` baseline's head on the base model (no adapter) and save it at :func:`pmi_head_path`."""
    t0 = time.perf_counter()
    head = _fit(recipe.for_stage("stage2"), None, ("pmi",))   # the examples (sources, seed) the student's head sees
    path = pmi_head_path(recipe)
    path.parent.mkdir(parents=True, exist_ok=True)
    head.save(path.parent, PMI_HEAD_FILE)
    return {**head.fitted, "w_pmi": head.w_pmi, "bias": head.bias, "path": str(path),
            "seconds": round(time.perf_counter() - t0, 1)}


def load_pmi_head(recipe: Recipe):
    """The ``pmi`` baseline's head of the recipe (fitted now when its file is missing)."""
    from ..backends.evidence_head import EvidenceHead

    path = pmi_head_path(recipe)
    if not path.exists():
        fit_pmi_head(recipe)
    return EvidenceHead.load_file(path)
