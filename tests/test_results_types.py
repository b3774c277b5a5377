"""eval/results.py: results.json as dataclasses, read by attribute, written back key for key."""

from __future__ import annotations

import json

import pytest

from vista_distill.eval.report import render_markdown
from vista_distill.eval.results import GroupMetrics, McNemarPair, Results, TurnMetrics


def _results() -> dict:
    turn = {"n_gold": 2, "n": 2, "coverage": 1.0, "accuracy": 0.5, "accuracy_all": 0.5, "new_metric": 7,
            "accuracy_common": 0.5, "n_common": 2}
    pair = {"system_1": "student", "system_2": "teacher", "b": 1, "c": 0, "pvalue": 1.0, "n": 2,
            "accuracy_1": 0.5, "accuracy_2": 1.0, "delta": -0.5, "mark": "ns"}
    return {"recipe": "r", "settings": {"rules": ["safe"], "seed": 0, "bootstrap": 10},
            "systems": {n: {"status": "ok", "reason": None, "description": {"backend": "x", "own_key": [1]},
                            "efficiency": {"wall_s": 1.0}} for n in ("student", "teacher")},
            "metrics": {n: {"overall": {"scored_turns": 2, "turn": {"safe": dict(turn)}, "claim": None}}
                        for n in ("student", "teacher")},
            "significance": {"test": "McNemar", "by_rule": {"safe": {"overall": [pair]}}},
            "future_section": {"a": 1}}


def test_round_trip_keeps_every_key_in_its_order():
    d = _results()
    r = Results.from_dict(d)
    assert r.to_dict() == d
    assert json.dumps(r.to_dict(), indent=2) == json.dumps(d, indent=2)   # order too
    assert r.extra == {"future_section": {"a": 1}}
    assert r.metrics["student"]["overall"].turn["safe"].extra == {"new_metric": 7}
    assert r.systems["student"].description.extra == {"own_key": [1]}


def test_attributes_and_absent_sections():
    r = Results.from_dict(_results())
    assert r.turn("student", "overall", "safe").accuracy == 0.5
    assert r.group("student", "overall").claim is None
    assert r.world is None and r.given_claims is None and r.compare is None
    assert "world" not in r.to_dict()
    assert r.turn("student", "FaithDial", "safe") == TurnMetrics() and not TurnMetrics()
    assert r.ok_systems() == ["student", "teacher"] and r.benchmark_groups() == ["overall"]
    with pytest.raises(AttributeError):
        r.turn("student", "overall", "safe").acuracy   # noqa: B018 -- a typo is an error, not '–'
    assert isinstance(r.group("student", "overall"), GroupMetrics)


def test_pair_is_oriented_as_asked():
    r = Results.from_dict(_results())
    p = r.pair("safe", "overall", "teacher", "student")
    assert isinstance(p, McNemarPair)
    assert (p.system_1, p.system_2, p.b, p.c, p.delta, p.accuracy_1) == ("teacher", "student", 0, 1, 0.5, 1.0)
    assert r.pair("safe", "overall", "student", "teacher").delta == -0.5
    assert r.pair("safe", "overall", "student", "nobody") is None


def test_set_after_reading_is_written():
    r = Results.from_dict(_results())
    r.plots = ["a.png"]
    assert r.to_dict()["plots"] == ["a.png"] and list(r.to_dict())[-1] == "plots"


def test_report_reads_the_typed_results_and_the_dict_alike():
    d = _results()
    d["material"] = {"input": "x.jsonl", "sources": [], "conversations": 1, "scored_turns": 2, "gold_turns": 2,
                     "human_claims": 0, "limit": None,
                     "student_training_overlap": {"evaluated_conversations_in_student_training": 0}}
    d.update(common_coverage={"systems": ["student", "teacher"]}, majority={}, claim_matching={"method": "m"},
             bootstrap={n: {"safe": {"overall": {"accuracy": {"accuracy": 0.5, "low": 0.0, "high": 1.0}}}}
                        for n in ("student", "teacher")},
             fingerprint="f", wall_s=1.0)
    md = render_markdown(d, ["accuracy.png"])
    assert md == render_markdown(Results.from_dict(d), ["accuracy.png"])
    assert "| student | 50.0 [0.0, 100.0] |" in md and "student − teacher" in md
