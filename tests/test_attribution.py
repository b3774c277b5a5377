"""Where a pipeline loses its turns (scoring/attribution.py), the stage 1 fallback to the sentence splitter, and a
calibration that hands a stage to its cheap rule (scoring/calibrate.py), applied in process and in ``eval``. The
served side (llama.cpp) is in tests/test_server_student.py."""

from __future__ import annotations

import copy
import json
import logging

import numpy as np
import pytest
from helpers import EVAL_RECIPE, eval_overrides, identity_adapters

from vista_distill.backends.calibration import Calibration, apply_calibration
from vista_distill.backends.cheap_baselines import BaselineBackend, StageRules, wording_category
from vista_distill.backends.human_labels import LabelsBackend
from vista_distill.backends.stage_routing import RequestMemo, StageRouter
from vista_distill.data.io import SchemaError, read_conversations
from vista_distill.data.schema import Conversation
from vista_distill.pipeline.engine import FALLBACK, EngineConfig, run_programs, splitter_claims, vista_program
from vista_distill.pipeline.protocol import Fields, Request, Response
from vista_distill.pipeline.templates import stage_request
from vista_distill.scoring.attribution import ROWS, attribution_records, attribution_table, row_name
from vista_distill.scoring.calibrate import calibrate_stage1, calibrate_stage3, summary_rows
from vista_distill.scoring.summary import summarize

LABELS3 = ["OUT-OF-SCOPE", "CONTRADICTED", "LACKING EVIDENCE", "ABSTENTION"]


class Counting:
    """A real backend, counting the requests it is sent."""

    def __init__(self, inner):
        self.inner, self.name, self.sent = inner, inner.name, 0
        self.stats, self.progress, self.served, self.hardware = {}, None, False, None

    def describe(self) -> dict:
        return self.inner.describe()

    def run(self, requests: list[Request]) -> list[Response]:
        self.sent += len(requests)
        return self.inner.run(requests)


class Stage1Says(Counting):
    """A real backend whose stage 1 answers ``text`` instead (``error``: as a failed call reports it)."""

    def __init__(self, inner, text: str, error: str | None = None):
        super().__init__(inner)
        self.text, self.error = text, error

    def run(self, requests: list[Request]) -> list[Response]:
        answers = super().run(requests)
        meta = {"error": self.error} if self.error else {}
        return [Response(self.text, meta=dict(meta)) if r.stage == "stage1" else a for r, a in zip(requests, answers)]


def _turns(conv: Conversation, backend, **cfg) -> list:
    (turns,) = run_programs([vista_program(conv, EngineConfig(**cfg))], backend)
    return [t for t in turns if t.scored]


@pytest.fixture
def sample(sample_path):
    return read_conversations(sample_path)


@pytest.mark.parametrize("answer", ["", "I'm sorry, I can't help with that."])
def test_a_turn_whose_stage1_gives_nothing_usable_is_split_into_sentences(sample, answer):
    """No claims, or only a line the parser drops: the turn's sentences are its claims, stages 2-3 run on them and
    the record says so; with the fallback off, or after a failed call, the turn stays unknown."""
    conv = copy.deepcopy(sample[0])
    turns = _turns(conv, Stage1Says(LabelsBackend([conv], fallback=BaselineBackend("overlap")), answer))
    for t in turns:
        assert [c.text for c in t.claims] == splitter_claims(t.text) and t.claims
        assert t.stage1_fallback and t.answered_by["stage1"] == FALLBACK
        assert all(c.stage2 is not None for c in t.claims) and t.verdicts["safe"] != "unknown"
    off = _turns(conv, Stage1Says(LabelsBackend([conv]), answer), stage1_fallback=False)
    assert all(t.verdicts["safe"] == "unknown" and not t.claims and not t.stage1_fallback for t in off)
    failed = _turns(conv, Stage1Says(LabelsBackend([conv]), "", error="HTTP 500"))
    assert all(not t.claims and not t.stage1_fallback for t in failed)

    records = [t.to_dict() for t in turns]
    s = summarize(records)
    assert s["stage1_fallback"]["turns"] == len(turns) and s["answered_by"]["stage1"] == {FALLBACK: len(turns)}
    gold = [r for r in records if r["gold_label"] in ("faithful", "hallucinated")]
    assert s["stage1_fallback"]["by_rule"]["safe"]["with"]["turns"] == len(turns)
    assert s["stage1_fallback"]["by_rule"]["safe"]["with"]["gold_turns"] == len(gold)
    assert s["stage1_fallback"]["by_rule"]["safe"]["without"]["turns"] == 0
    assert all(r["verdicts"]["authors"] == "faithful" for r in records)   # the authors' code: no claims, faithful


def test_the_router_sends_each_stage_to_its_backend_and_the_memo_answers_repeats(sample):
    inner = Counting(StageRouter(BaselineBackend("overlap"), {"stage3": StageRules()}))
    memo = RequestMemo(inner)
    first = _turns(sample[0], memo)
    sent, hits = inner.sent, memo.hits
    again = _turns(sample[0], memo)
    assert inner.sent == sent and memo.hits - hits == sent + hits   # every request of the second run from memory
    assert [t.to_dict() for t in again] == [t.to_dict() for t in first]
    for t in first:
        for c in t.claims:
            if c.stage3 is not None:   # stage 3 by the wording rule; stages 1-2 by the overlap system
                assert c.category == wording_category(c.text)
        assert t.answered_by["stage2"] == "model"
        if any(c.stage3 is not None for c in t.claims):
            assert t.answered_by["stage3"] == "wording rule"
    assert any(c.stage3 is not None for t in first for c in t.claims)   # stage 3 ran somewhere


def test_attribution_rows_replace_one_stage_each_and_pay_only_for_what_changes(sample):
    """Each row's records are the system with stage 1 or 3 replaced, on the same turns; McNemar pairs each row with
    the one above; the human categories row gives stage 3 the human category of every claim it can."""
    convs = sample[:3]
    inner = Counting(BaselineBackend("overlap"))
    runs = attribution_records(convs, EngineConfig(), inner)
    assert list(runs) == [row_name(*r) for r in ROWS]
    table = attribution_table(runs, "safe", system="overlap")
    rows = table["rows"]
    assert [(r["stage1"], r["stage3"]) for r in rows] == [(a.replace("model", "overlap"), b.replace("model", "overlap"))
                                                         for a, b in ROWS]
    keys = None
    for (s1, s3), row in zip(ROWS, rows):
        recs = runs[row_name(s1, s3)]
        gold = {(r["conversation_id"], r["turn_index"]): r for r in recs
                if r["scored"] and r["gold_claims"] and r["gold_label"] in ("faithful", "hallucinated")}
        keys = keys or sorted(gold)
        right = [gold[k]["verdicts"]["safe"] == gold[k]["gold_label"] for k in keys]
        assert row["turns"] == len(keys) and row["accuracy"] == pytest.approx(sum(right) / len(keys))
        for r in recs:
            for c, human in zip(r["claims"], r["gold_claims"] or []):
                if s1 == "human claims":
                    assert c["text"] == human["text"]
                if c["stage3"] is not None and s3 == "wording rule":
                    assert c["category"] == wording_category(c["text"])
                if c["stage3"] is not None and s3 == "human labels" and human["label"] != "VERIFIED":
                    assert c["category"] == human["label"]
        if s1 == "sentence splitter":
            assert all([c["text"] for c in r["claims"]] == splitter_claims(r["text"]) for r in recs if r["scored"])
    def only_second_right(first: tuple[str, str], second: tuple[str, str]) -> int:
        a = [runs[row_name(*first)], runs[row_name(*second)]]
        pairs = [[{(r["conversation_id"], r["turn_index"]): r for r in recs}[k] for k in keys] for recs in a]
        return sum(y["verdicts"]["safe"] == y["gold_label"] and x["verdicts"]["safe"] != x["gold_label"]
                   for x, y in zip(*pairs))

    for k, row in enumerate(rows):
        if k:
            assert row["vs_above"]["b"] == only_second_right(ROWS[k - 1], ROWS[k])
        if ROWS[k] != ("model", "model"):
            assert row["vs_as_it_runs"]["b"] == only_second_right(("model", "model"), ROWS[k])
    from vista_distill.scoring.run import run_pipeline

    one = Counting(BaselineBackend("overlap"))
    run_pipeline(convs, EngineConfig(), one)
    assert inner.sent < (len(ROWS) - 1) * one.sent   # the rows share the answers they have in common


def _stage3_rows(subjective: int) -> list[dict]:
    """16 human-unverifiable claims in 8 conversations: 8 OUT-OF-SCOPE (``subjective`` of them worded as an
    opinion), 8 LACKING EVIDENCE worded plainly; the student's stage 3 gives every claim the same probabilities,
    LACKING EVIDENCE first, so no shift of them can tell the claims apart."""
    probs = {"OUT-OF-SCOPE": 0.2, "CONTRADICTED": 0.05, "LACKING EVIDENCE": 0.7, "ABSTENTION": 0.05}
    rows = []
    for i in range(16):
        oos = i % 2 == 0
        text = ("I love the owls of Paris." if oos and i // 2 < subjective else f"The museum opened in {1900 + i}.")
        rows.append({"group": f"c{i // 2}", "text": text, "human": "OUT-OF-SCOPE" if oos else "LACKING EVIDENCE",
                     "stage2": "UNVERIFIABLE", "features": {}, "stage3": "LACKING EVIDENCE", "stage3_probs": probs})
    return rows


def test_the_wording_rule_takes_stage3_when_it_wins_by_the_margin():
    """Counted by hand: the student is right on the 8 LACKING EVIDENCE claims, the wording rule on all 16, so 8 claims
    only the rule gets right, none only the student: McNemar's exact p = 2 / 2^8 < 0.05."""
    out = calibrate_stage3(_stage3_rows(subjective=8), folds=4)
    won = out["rule_won"]
    assert out["chosen"] == "wording rule" and won["rule"] == "wording rule" and won["student"] == "as trained"
    assert (won["rule_accuracy"], won["student_accuracy"]) == (1.0, 0.5)
    assert (won["only_rule_right"], won["only_student_right"]) == (8, 0)
    assert won["p_value"] == pytest.approx(2 / 2 ** 8) and out["rule_margin"]["alpha"] == 0.05
    assert np.trace(out["confusion_chosen"]) == 16


def test_the_student_keeps_stage3_when_the_rule_wins_by_less_than_the_margin():
    """Counted by hand: 2 of the 8 OUT-OF-SCOPE claims are worded as opinions, so the rule is right on 10, the student
    on 8, the two differing on 2 claims: p = 0.5, the student is kept; with alpha 0.6 the rule takes the stage."""
    out = calibrate_stage3(_stage3_rows(subjective=2), folds=4)
    vs = out["rule_vs_student"]
    assert out["chosen"] == "as trained" and "rule_won" not in out and not vs["wins"]
    assert (vs["rule_accuracy"], vs["student_accuracy"], vs["only_rule_right"], vs["p_value"]) == (0.625, 0.5, 2, 0.5)
    assert calibrate_stage3(_stage3_rows(subjective=2), folds=4, alpha=0.6)["chosen"] == "wording rule"


def _turn_records(right: list[bool]) -> list[dict]:
    return [{"conversation_id": f"c{i}", "turn_index": 1, "scored": True, "gold_label": "faithful",
             "verdicts": {"safe": "faithful" if ok else "hallucinated"}} for i, ok in enumerate(right)]


def test_the_sentence_splitter_takes_stage1_by_turn_accuracy_only_by_the_margin():
    """10 gold turns: the splitter right on 9, the student on 1 (8 turns only the splitter gets right): p = 0.0078,
    the splitter wins; right on 3 against 1: p = 0.5, the student keeps stage 1."""
    student = _turn_records([True] + [False] * 9)
    won = calibrate_stage1(student, _turn_records([True] * 9 + [False]), "safe")
    assert won["chosen"] == "sentence splitter" and won["rule_won"]["p_value"] == pytest.approx(2 / 2 ** 8)
    kept = calibrate_stage1(student, _turn_records([True] * 3 + [False] * 7), "safe")
    assert kept["chosen"] == "as trained" and kept["rule_vs_student"]["p_value"] == 0.5
    assert "too few gold turns: 4" in calibrate_stage1(student[:4], student[:4], "safe")["kept"]


def test_a_calibration_with_rules_round_trips_routes_and_names_them(tmp_path):
    fitted = {"dev": {"path": "dev.json"}, "stage3": {"rule_won": {"rule_accuracy": 1.0, "student_accuracy": 0.5,
                                                                    "p_value": 0.0078}}}
    cal = Calibration("ruled", None, None, fitted, {"stage2": {"rule": "overlap rule", "threshold": 0.3},
                                                     "stage3": {"rule": "wording rule"}})
    back = Calibration.load(tmp_path, cal.save(tmp_path).stem)
    assert back.rules == cal.rules
    assert back.rule_line() == ("calibration ruled (fitted on dev.json): stage2 by the overlap rule above 0.3; stage3 "
                                "by the wording rule (100.0 % vs the student's 50.0 % out of fold, McNemar p = 0.0078)")
    student = Counting(BaselineBackend("overlap"))   # a backend with a stage 2 head and a stage 3 prior to replace
    student.heads, student.priors = {}, {}
    routed = apply_calibration(student, back)
    assert isinstance(routed, StageRouter) and set(routed.routes) == {"stage2", "stage3"}
    assert routed.routes["stage2"].threshold == 0.3 and apply_calibration(routed, Calibration("plain")) is student
    rows = summary_rows(Calibration("x", fitted={"stage3": calibrate_stage3(_stage3_rows(8), folds=4)}))
    assert ("stage3", "wording rule (rule)", "100.0", rows[-1][3], "chosen (p = 0.0078 vs as trained)") == rows[-1]
    for bad, field in (({"stage4": {"rule": "wording rule"}}, "rules.stage4"),
                       ({"stage3": {"rule": "overlap rule"}}, "rules.stage3"),
                       ({"stage2": {"rule": "overlap rule", "threshold": 1.5}}, "rules.stage2")):
        path = tmp_path / "calibrations" / "bad.json"
        path.write_text(json.dumps({"name": "bad", "stage2": None, "stage3": None, "rules": bad}))
        with pytest.raises(SchemaError, match=field.replace(".", r"\.")):
            Calibration.load(tmp_path, "bad")


def test_a_calibration_that_chose_rules_applies_in_process_and_in_eval(tmp_path, sample_path, tiny_smollm2, caplog):
    """The student on the tiny random SmolLM2 with a calibration that gives stages 1 and 3 to their rules: stage 1's
    claims are the sentences and stage 3's categories the wording rule's, each record and the summary say so, the run
    names the rules in one line at its start; eval does the same with ``eval.calibration`` and reports the student's
    turns stage by stage (results.json, report.md, the records of each row)."""
    from vista_distill.config import load_recipe
    from vista_distill.eval.run import run_eval
    from vista_distill.scorer import VistaScorer

    identity_adapters(tmp_path / "checkpoints", tiny_smollm2)
    Calibration("ruled", rules={"stage1": {"rule": "sentence splitter"}, "stage3": {"rule": "wording rule"}}).save(
        tmp_path / "checkpoints")
    with caplog.at_level(logging.WARNING):
        scorer = VistaScorer(str(tiny_smollm2), adapters=tmp_path / "checkpoints", calibration="ruled",
                             dtype="float32", threads=1, max_new_tokens={"stage3": 8})
    assert [r.message for r in caplog.records if "calibration ruled" in r.message] == [
        "calibration ruled: stage1 by the sentence splitter; stage3 by the wording rule"]
    convs = read_conversations(sample_path)[:2]
    result = scorer.score(convs, attribution=True)
    scored = [r for r in result.records if r["scored"]]
    for r in scored:
        assert [c["text"] for c in r["claims"]] == splitter_claims(r["text"])
        assert r["answered_by"]["stage1"] == "sentence splitter" and r["answered_by"]["stage2"] == "model"
        for c in r["claims"]:
            if c["stage3"] is not None:
                assert c["category"] == wording_category(c["text"]) and r["answered_by"]["stage3"] == "wording rule"
    assert result.summary["answered_by"]["stage1"] == {"sentence splitter": len(scored)}
    assert len(result.summary["attribution"]["rows"]) == len(ROWS)

    ov = [*eval_overrides(tmp_path), f"student.model={tiny_smollm2}", "eval.evidence=false",
          "pipeline.max_new_tokens={stage1: 16, stage3: 8}", "eval.given_claims=true", "eval.calibration=ruled"]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        res = run_eval(load_recipe(EVAL_RECIPE, ov), input_path=str(sample_path), limit=2,
                       output_dir=tmp_path / "out", systems=["student", "overlap"])
    assert any("eval student: calibration ruled" in r.message for r in caplog.records)
    results = res.results
    assert results["systems"]["student"]["description"]["calibration"]["rules"]["stage3"] == {"rule": "wording rule"}
    table = results["attribution"]["student"]["rows"]["safe"]
    # the cells name what answered: the student's stages 1 and 3 are the calibration's rules
    # (where no claim of a row reached stage 3, its cell is the student's: nothing answered there)
    own1, own3 = "student (sentence splitter)", "student (wording rule)"
    cells = [(r["stage1"], r["stage3"].replace(own3, "student")) for r in table["rows"]]
    assert cells == [("sentence splitter", "student"), (own1, "student"), ("human claims", "student"),
                     ("human claims", "human labels"), ("human claims", "wording rule"), (own1, "wording rule")]
    assert {r["stage3"] for r in table["rows"][:3]} <= {"student", own3}
    # the student's own stage 1 and stage 3 are the calibration's rules: rows that replace them by the rules agree
    assert table["rows"][0]["accuracy"] == table["rows"][1]["accuracy"] == table["rows"][5]["accuracy"]
    assert table["rows"][2]["accuracy"] == table["rows"][4]["accuracy"]
    assert table["rows"][5]["vs_as_it_runs"]["b"] == table["rows"][5]["vs_as_it_runs"]["c"] == 0
    assert "overlap" in results["attribution"] and "rows" not in results["attribution"]["overlap"]
    rows = [json.loads(ln) for ln in (tmp_path / "out" / "records" / "student.attribution.jsonl").read_text()
            .splitlines()]
    assert {r["row"] for r in rows} == {row_name(*r) for r in ROWS}
    assert "## Where the turns are lost, stage by stage" in (tmp_path / "out" / "report.md").read_text()
    from vista_distill.eval.errors import EvalError

    with pytest.raises(EvalError, match="eval.attribution"):
        run_eval(load_recipe(EVAL_RECIPE, [*ov, "eval.attribution=[studnet]"]), input_path=str(sample_path), limit=1,
                 output_dir=tmp_path / "bad", systems=["student"])


def test_a_rule_that_wins_goes_into_the_calibration_and_its_held_out_figures():
    """Records of the stage 3 rows the wording rule wins (above): the calibration routes stage 3 to it, fits no shift
    for it, and judges it by the rule on claims it did not see."""
    from vista_distill.scoring.calibrate import claim_rows, fit_calibration, held_out_accuracy

    records = [{"conversation_id": r["group"], "gold_claims": [{"text": r["text"], "label": r["human"]}],
                "claims": [{"text": r["text"], "stage2": {"label": "UNVERIFIABLE"},
                            "stage3": {"label": "LACKING EVIDENCE", "probs": r["stage3_probs"]}}]}
               for r in _stage3_rows(subjective=8)]
    cal = fit_calibration(records, "ruled", {}, folds=4)
    assert cal.rules == {"stage3": {"rule": "wording rule"}} and cal.stage3 is None
    held = held_out_accuracy(cal, claim_rows(records))["stage3"]
    assert (held["as_trained"], held["calibrated"], held["claims"]) == (0.5, 1.0, 16)


def test_the_tuned_overlap_rule_takes_stage2_with_its_cut_and_answers_by_it():
    """72 claims in 12 conversations whose word overlap separates them at a cut below 0.5, while the student's margin
    and PMI are noise the refitted head leans on: the tuned overlap rule wins out of fold by the margin, the
    calibration routes stage 2 to it with the cut fitted on all claims, and the rule then answers by that cut."""
    from vista_distill.pipeline.templates import get_template
    from vista_distill.scoring.calibrate import calibrate_stage2, fit_calibration

    rng = np.random.default_rng(0)
    rows = []
    for g in range(12):
        for k in range(6):
            verified = bool((g + k) % 2)
            rows.append({"group": f"c{g}", "text": "x", "human": "VERIFIED" if verified else "LACKING EVIDENCE",
                         "stage2": "UNVERIFIABLE", "stage3": None, "stage3_probs": None,
                         "features": {"margin": rng.normal(0, 40), "pmi": rng.normal(0, 40),
                                      "overlap": rng.uniform(0.32, 0.45) if verified else rng.uniform(0.0, 0.2)}})
    out = calibrate_stage2(rows, folds=4)
    assert out["chosen"] == "overlap rule, tuned" and out["rule_won"]["rule_accuracy"] == 1.0
    assert out["rule_won"]["p_value"] < 0.05 and 0.2 <= out["threshold"] < 0.32 + 0.01 and "head" not in out
    records = [{"conversation_id": r["group"], "gold_claims": [{"text": f"claim {i}", "label": r["human"]}],
                "claims": [{"text": f"claim {i}", "stage2": {"label": "UNVERIFIABLE", "evidence": r["features"]}}]}
               for i, r in enumerate(rows)]
    cal = fit_calibration(records, "ruled", {}, folds=4)
    assert cal.rules == {"stage2": {"rule": "overlap rule", "threshold": out["threshold"]}} and cal.stage2 is None
    t2 = get_template("stage2", "compact")
    ref = "Paris hosts the Louvre museum and the Orsay gallery on the Seine river banks."
    claim = "The Louvre is near the river Thames in London."   # 2 of its 5 content words in the reference
    req = stage_request(t2, Fields(reference=ref, claim=claim), labels=t2.labels)
    assert StageRules(threshold=0.3).run([req])[0].label == "VERIFIED"
    assert StageRules().run([req])[0].label == "UNVERIFIABLE"   # at least half, without a cut
