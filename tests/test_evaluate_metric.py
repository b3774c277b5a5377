"""metrics/vista_score: the VISTA scorer as an ``evaluate`` metric, loaded offline by path, scoring the
bundled sample on the embedded model; its accuracy and F1 are eval/'s."""

from __future__ import annotations

import pytest
from helpers import ROOT, SAMPLE


@pytest.mark.slow
def test_metric_loads_offline_by_path_and_scores_the_sample(monkeypatch, tmp_path):
    import evaluate
    from sklearn.metrics import accuracy_score, f1_score

    from vista_distill.data.io import read_conversations

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    metric = evaluate.load(str(ROOT / "metrics" / "vista_score"), dtype="float32", cache_dir=str(tmp_path))
    conv = read_conversations(SAMPLE)[0]
    preds, refs, know, hist = [], [], [], []
    for i in conv.scored_turns[:2]:
        preds.append(conv.turns[i].text)
        refs.append(conv.turns[i].gold_label or "")
        know.append(conv.turns[i].reference)
        hist.append([t.text for t in conv.turns[:i]])
    out = metric.compute(predictions=preds, references=refs, knowledge=know, history=hist)
    n = len(preds)
    assert n >= 2 and len(out["verdicts"]) == len(out["vista_scores"]) == len(out["claims"]) == n
    assert set(out["verdicts"]) <= {"faithful", "hallucinated", "unknown"}
    safe = {"VERIFIED", "ABSTENTION", "OUT-OF-SCOPE"}
    for verdict, score, claims in zip(out["verdicts"], out["vista_scores"], out["claims"]):
        known = [c for c in claims if c["category"] is not None]
        if known:   # the VISTA score is the share of safe claims
            assert abs(score - sum(c["category"] in safe for c in known) / len(known)) < 1e-9
        if verdict == "faithful":
            assert claims and all(c["category"] in safe for c in claims)
    scored = [(r, v) for r, v in zip(refs, out["verdicts"]) if r and v != "unknown"]
    assert out["n"] == len(scored) and out["n_gold"] == sum(bool(r) for r in refs)
    y, p = [r for r, _ in scored], [v for _, v in scored]
    assert abs(out["accuracy"] - accuracy_score(y, p)) < 1e-9
    assert abs(out["f1"] - f1_score(y, p, pos_label="hallucinated", labels=["hallucinated"], average="binary",
                                    zero_division=0)) < 1e-9
