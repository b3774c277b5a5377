"""VISTA Score as a Hugging Face ``evaluate`` metric, loadable offline by path:

    import evaluate
    vista = evaluate.load("path/to/vista-distill/metrics/vista_score")            # embedded SmolLM2-135M
    vista = evaluate.load("path/to/metrics/vista_score", adapters="checkpoints/demo-cpu")   # a trained student
    vista = evaluate.load("path/to/metrics/vista_score", servers=["http://127.0.0.1:8000/v1"])   # served
    out = vista.compute(predictions=["Paris is the capital of France."],
                        knowledge=["Paris is the capital and largest city of France."],
                        history=[["What is the capital of France?"]],
                        references=["faithful"])      # gold turn labels; "" where there is none

Each prediction is an assistant turn; ``history`` lists the turns before it (user first, alternating),
``knowledge`` its reference. Returns per turn the verdict under ``rule`` and its VISTA score (share of safe
claims), the claims with their categories, coverage, and where references are given accuracy, precision,
recall and F1 (hallucinated = positive) computed by vista-distill's eval metrics.
"""

from __future__ import annotations

from typing import Any

import datasets
import evaluate

_CITATION = """@inproceedings{lewis2025vista,
  title={VISTA Score: Verification In Sequential Turn-based Assessment},
  author={Lewis, Ashley and others},
  year={2025}
}"""

_DESCRIPTION = __doc__
_KWARGS = """
Args:
    predictions: assistant turns (strings).
    knowledge: each turn's reference text.
    history: the turns before each one (lists of strings, user first).
    references: gold turn labels, "faithful" / "hallucinated", or "" where unknown.
Returns:
    verdicts, vista_scores, claims (per turn), coverage, and with references accuracy, precision, recall, f1, n_gold.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class VistaScore(evaluate.Metric):
    def __init__(self, model: str | None = None, adapters: str | None = None, servers: list[str] | None = None,
                 rule: str = "safe", recipe: str | None = None, dtype: str = "auto", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.options = {"model": model, "adapters": adapters, "servers": servers, "rule": rule, "recipe": recipe,
                        "dtype": dtype}
        self._scorer = None

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({"predictions": datasets.Value("string"),
                                        "references": datasets.Value("string"),
                                        "knowledge": datasets.Value("string"),
                                        "history": datasets.Sequence(datasets.Value("string"))}),
            reference_urls=["https://github.com/ashleylew/VISTA"],
        )

    def scorer(self):
        if self._scorer is None:
            from vista_distill.config import load_recipe
            from vista_distill.scorer import VistaScorer

            o = self.options
            over = [f"student.dtype={o['dtype']}"] + ([f"student.model={o['model']}"] if o["model"] else [])
            recipe = load_recipe(o["recipe"], over)
            if o["servers"]:
                from vista_distill.backends.server import server_backend

                backend = server_backend(recipe, "student" if o["adapters"] != "base" else "base",
                                         servers=o["servers"])
                self._scorer = VistaScorer.from_recipe(recipe, role="student", backend=backend, rule=o["rule"])
            else:
                self._scorer = VistaScorer.from_recipe(recipe, adapters=o["adapters"], rule=o["rule"])
        return self._scorer

    def _compute(self, predictions, references, knowledge, history) -> dict[str, Any]:
        from vista_distill.data.schema import Conversation, Turn
        from vista_distill.scoring.metrics import turn_metrics

        convs = []
        for i, (pred, ref, know, hist) in enumerate(zip(predictions, references, knowledge, history)):
            turns = [Turn(role="user" if j % 2 == 0 else "assistant", text=t) for j, t in enumerate(hist or [])]
            turns.append(Turn(role="assistant", text=pred, reference=know, gold_label=ref or None))
            convs.append(Conversation(id=f"turn-{i}", source="evaluate", turns=turns))
        result = self.scorer().score(convs)
        records = [r for r in result.records if r["scored"]]
        rule = self.options["rule"]
        out: dict[str, Any] = {
            "verdicts": [r["verdicts"][rule] for r in records],
            "vista_scores": [r["vista_scores"][rule] for r in records],
            "claims": [[{"text": c["text"], "category": c["category"]} for c in r["claims"]] for r in records],
            "coverage": sum(r["verdicts"][rule] != "unknown" for r in records) / max(1, len(records)),
        }
        if any(references):
            m = turn_metrics(records, rule)
            out.update({k: m.get(k) for k in ("accuracy", "precision", "recall", "f1", "macro_f1", "n_gold", "n")})
        return out
