"""Fitting a stage 2 adapter's evidence head (:mod:`..backends.evidence_head`) after training: the adapter scores
the silver validation split (the teacher's labels on dialogues it never trained on) with and without each
example's reference, and a logistic fit on (label margin, claim PMI) is saved beside it."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from ..config import Recipe
from .silver_data import load_silver, select_sources, silver_root

MAX_EXAMPLES = 256


def fit_evidence_head(recipe: Recipe, adapter_dir: str | Path, stage: str = "stage2") -> dict[str, Any]:
    """Fit and save the head of ``adapter_dir``; returns what it was fitted on (for the training summary)."""
    from ..backends.evidence_head import fit
    from ..backends.transformers import TransformersBackend
    from ..data.schema import VERIFIED
    from ..pipeline.protocol import Request
    from ..pipeline.templates import get_template

    t0 = time.perf_counter()
    root = silver_root(recipe)
    dd = select_sources(load_silver(root, stage), recipe.train.sources, root / stage)
    split = "test" if "test" in dd and len(set(dd["test"]["label"])) == 2 and len(dd["test"]) >= 40 else "train"
    rows = list(dd[split])
    if len(rows) > MAX_EXAMPLES:
        rows = random.Random(recipe.train.seed).sample(rows, MAX_EXAMPLES)
    labels = get_template(stage, recipe.pipeline.student_prompt_style).labels
    requests = [Request(stage, tuple({"role": m["role"], "content": m["content"]} for m in row["prompt"]), labels=labels,
                        max_new_tokens=8) for row in rows]
    s = recipe.student
    backend = TransformersBackend(s.model, adapters={stage: adapter_dir}, dtype=s.dtype, load_in_4bit=s.load_in_4bit,
                                  batch_size=recipe.eval.batch_size, chat_template_kwargs=s.chat_template_kwargs,
                                  attn_implementation=s.attn_implementation, evidence_features=True)
    backend.heads.pop(stage, None)   # a head left from an earlier fit must not score the features of this one
    out = backend.run(requests)
    feats = [(o.meta["evidence"]["margin"], o.meta["evidence"]["pmi"], row["label"] == VERIFIED)
             for o, row in zip(out, rows) if "pmi" in (o.meta.get("evidence") or {})]
    try:
        head = fit([f[0] for f in feats], [f[1] for f in feats], [f[2] for f in feats],
                   split=f"silver {split} split", silver=str(root / stage), skipped=len(rows) - len(feats))
    except ValueError as e:   # too little material (a shrunk recipe): the adapter scores on its own, and says so
        return {"not_fitted": str(e), "split": f"silver {split} split", "examples": len(feats),
                "seconds": round(time.perf_counter() - t0, 1)}
    head.save(adapter_dir)
    return {**head.fitted, "w_margin": head.w_margin, "w_pmi": head.w_pmi, "bias": head.bias,
            "seconds": round(time.perf_counter() - t0, 1)}
