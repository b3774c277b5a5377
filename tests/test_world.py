"""The optional world-knowledge stage: evidence retrieval (BM25 over knowledge files, "concurrent" turn
context), the TRUE / FALSE / NOT ENOUGH KNOWLEDGE labels of LACKING EVIDENCE claims from a real model, the
three-way turn verdict, and records untouched when the stage is off."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from vista_distill.backends.human_labels import LabelsBackend
from vista_distill.data.schema import (
    ABSTENTION,
    CONTRADICTED,
    FAITHFUL,
    LACKING_EVIDENCE,
    OUT_OF_SCOPE,
    UNKNOWN,
    VERIFIED,
    Claim,
    Conversation,
    Turn,
)
from vista_distill.data.vocabulary import WORLD_LABELS
from vista_distill.pipeline.engine import (
    FACTUAL_HALLUCINATION,
    NON_FACTUAL_HALLUCINATION,
    ClaimResult,
    world_verdict,
)
from vista_distill.pipeline.knowledge import (
    KnowledgeBase,
    KnowledgeError,
    TurnContext,
    evidence_for,
    read_passages,
)
from vista_distill.pipeline.templates import get_template
from vista_distill.scorer import VistaScorer

PASSAGES = [
    {"text": "Paris is the capital and most populous city of France."},
    {"text": "Mount Kilimanjaro is a dormant volcano in Tanzania, the highest mountain in Africa."},
    {"text": "Belfast is the capital city of Northern Ireland, part of the United Kingdom."},
    {"passage": "The Nile is a major north-flowing river in northeastern Africa."},
]


def _world(label):
    return {"label": label}


@pytest.mark.parametrize("claims, verdict", [
    ([(VERIFIED, None), (OUT_OF_SCOPE, None), (ABSTENTION, None)], FAITHFUL),
    ([(VERIFIED, None), (LACKING_EVIDENCE, "TRUE")], FACTUAL_HALLUCINATION),
    ([(LACKING_EVIDENCE, "TRUE"), (LACKING_EVIDENCE, "FALSE")], NON_FACTUAL_HALLUCINATION),
    ([(VERIFIED, None), (CONTRADICTED, None)], NON_FACTUAL_HALLUCINATION),
    ([(LACKING_EVIDENCE, "TRUE"), (LACKING_EVIDENCE, "NOT ENOUGH KNOWLEDGE")], UNKNOWN),
    ([(CONTRADICTED, None), (None, None)], NON_FACTUAL_HALLUCINATION),   # decided whatever the unparsed claim is
    ([(VERIFIED, None), (None, None)], UNKNOWN),
    ([], UNKNOWN),
])
def test_three_way_turn_verdict(claims, verdict):
    results = [ClaimResult(f"c{i}", cat, world=_world(w) if w else None) for i, (cat, w) in enumerate(claims)]
    got, reason = world_verdict(results)
    assert got == verdict
    assert (reason is not None) == (verdict == UNKNOWN)


def test_knowledge_files_jsonl_json_text_and_folder(tmp_path):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.jsonl").write_text("\n".join(json.dumps(p) for p in PASSAGES[:2]) + "\n\n")
    (tmp_path / "kb" / "b.json").write_text(json.dumps([PASSAGES[2]["text"], PASSAGES[3]]))
    (tmp_path / "kb" / "c.txt").write_text("First paragraph,\nsecond line.\n\n\nSecond paragraph.\n")
    passages, origins = read_passages(tmp_path / "kb")
    assert len(passages) == 6 and passages[-2:] == ["First paragraph, second line.", "Second paragraph."]
    assert origins[0].endswith("a.jsonl:1") and origins[-1].endswith("c.txt:5") and origins[2].endswith("b.json:[0]")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "fine"}) + "\n" + json.dumps({"body": "no text field"}) + "\n")
    with pytest.raises(KnowledgeError, match=r"bad\.jsonl:2: no passage text .*text, passage, contents"):
        read_passages(bad)
    with pytest.raises(KnowledgeError, match="not found"):
        read_passages(tmp_path / "missing")


def test_bm25_finds_the_passage_and_concurrent_adds_the_turn_context(tmp_path):
    kb_path = tmp_path / "kb.jsonl"
    kb_path.write_text("\n".join(json.dumps(p) for p in PASSAGES))
    kb = KnowledgeBase([p.get("text") or p["passage"] for p in PASSAGES])
    top = kb.search("Kilimanjaro is in Kenya.", 2)
    assert top[0].text.startswith("Mount Kilimanjaro") and top[0].source == "knowledge"
    assert kb.search("zzzz qqqq", 3) == []                        # nothing shares a word: no evidence
    ev = evidence_for(
        "Belfast is in the United Kingdom.",
        str(kb_path),
        1,
        TurnContext("The tour starts in Dublin. Belfast has a famous shipyard.", ["Belfast is in Ireland."]),
    )
    assert [p.source for p in ev] == ["knowledge", "reference"] or [p.source for p in ev] == ["knowledge", "background"]
    assert ev[0].text.startswith("Belfast is the capital") and ev[0].origin.endswith("kb.jsonl:3")
    assert evidence_for("Belfast", None, 3) == []   # the model's own knowledge: no passages


def _conversation() -> Conversation:
    ref = "The tour of the island starts at the harbour at nine in the morning."
    claims = [Claim("The tour starts at the harbour.", VERIFIED),
              Claim("Belfast is a city in the United Kingdom.", LACKING_EVIDENCE),
              Claim("Mount Kilimanjaro is in Kenya.", LACKING_EVIDENCE)]
    return Conversation(id="w", source="handmade", turns=[
        Turn("user", "Where does the tour start?"),
        Turn("assistant", "At the harbour. Belfast is a UK city, and Kilimanjaro is in Kenya.", reference=ref,
             gold_label="hallucinated", gold_claims=claims)])


def test_world_stage_on_a_real_model_leaves_vista_untouched(embedded_backend, tmp_path):
    """Stages 1-3 answered by the human labels, the world stage by the embedded model (its labels scored by
    likelihood): every LACKING EVIDENCE claim gets a world label with its evidence; the three-way verdict
    follows the rule; VISTA's claims, categories, verdicts and scores are those of the run without it, and
    that run's records carry no world field at all."""
    kb = tmp_path / "kb.jsonl"
    kb.write_text("\n".join(json.dumps(p) for p in PASSAGES))
    conv = _conversation()
    off = VistaScorer(backend=LabelsBackend([conv], fallback=embedded_backend), rule="safe").score([conv])
    scorer = VistaScorer(backend=LabelsBackend([conv], fallback=embedded_backend), rule="safe")
    scorer.config.world, scorer.config.world_knowledge, scorer.config.world_concurrent = True, str(kb), True
    on = scorer.score(copy.deepcopy([conv]))

    (rec_off,), (rec_on,) = off.records, on.records
    assert "world_verdict" not in rec_off and all("world" not in c for c in rec_off["claims"])
    assert "world" not in off.summary
    stripped = copy.deepcopy(rec_on)
    del stripped["world_verdict"], stripped["world_reason"]
    for c in stripped["claims"]:
        del c["world"]
    assert stripped["answered_by"].pop("world") == "model"   # the one stage the run without it has not
    assert stripped == rec_off
    asked = [c for c in rec_on["claims"] if c["world"] is not None]
    assert [c["category"] for c in asked] == [LACKING_EVIDENCE, LACKING_EVIDENCE]
    for c in asked:
        w = c["world"]
        assert w["label"] in WORLD_LABELS and sum(w["probs"].values()) == pytest.approx(1.0, abs=1e-5)
        assert w["evidence"] and w["evidence"][0]["source"] == "knowledge"
        assert any(word in w["evidence"][0]["text"] for word in ("Belfast", "Kilimanjaro"))
    expected, _ = world_verdict([ClaimResult(c["text"], c["category"], world=c["world"]) for c in rec_on["claims"]])
    assert rec_on["world_verdict"] == expected
    assert on.summary["world"]["claims_asked"] == 2 and sum(on.summary["world"]["verdicts"].values()) == 1


def test_world_prompts_are_ours_and_parse_like_stage3():
    from vista_distill.pipeline.parsing import parse_label

    for style in ("fewshot", "compact"):
        t = get_template("world", style)
        assert t.labels == WORLD_LABELS
    assert len(get_template("world", "fewshot").examples) == 4
    assert parse_label("NOT ENOUGH KNOWLEDGE. A private detail.", WORLD_LABELS).label == "NOT ENOUGH KNOWLEDGE"
    assert parse_label("FALSE. Kilimanjaro is in Tanzania.", WORLD_LABELS).label == "FALSE"


def test_world_adapter_distills_trains_and_loads_with_the_other_three(tmp_path):
    """``pipeline.world.enabled``: distill writes a ``world/`` silver dataset (the human labels answer stages
    1-3, the teacher's model the world stage), ``train --stage all`` trains a fourth adapter beside the three,
    ``train/world.py`` is its launcher, and the scorer loads all four. Tiny random Llama-3.1 architecture."""
    import yaml
    from helpers import ROOT, build_tiny_model, tiny_recipe

    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.cli import main

    model = build_tiny_model("llama-3.1", tmp_path / "tiny")
    path = tiny_recipe(ROOT / "recipes" / "llama-3.1-8b-lora-80gb.yaml", tmp_path, model)
    raw = yaml.safe_load(path.read_text())
    raw["teacher"] = {"backend": "labels", "fallback": str(model), "dtype": "float32", "stage3": "score"}
    raw["distill"]["validation_fraction"] = 0.0
    raw["pipeline"]["world"] = {"enabled": True}
    raw["pipeline"]["max_new_tokens"]["world"] = 8
    path.write_text(yaml.safe_dump(raw))

    assert main(["distill", "--config", str(path), "--no-progress"]) == 0
    manifest = json.loads((tmp_path / "silver" / "manifest.json").read_text())
    assert set(manifest["counts"]) == {"stage1", "stage2", "stage3", "world"}
    world_rows = manifest["counts"]["world"]["train"]
    assert world_rows["examples"] >= 1 and set(world_rows["labels"]) <= set(WORLD_LABELS)
    assert (tmp_path / "silver" / "world" / "README.md").is_file()

    assert main(["train", "--config", str(path), "--stage", "all"]) == 0
    for stage in ("stage1", "stage2", "stage3", "world"):
        summary = json.loads((tmp_path / "ck" / stage / "training_summary.json").read_text())
        assert summary["results"]["global_step"] == 2 and summary["stage"] == stage
    backend = TransformersBackend(str(model), adapters=tmp_path / "ck", dtype="float32")
    assert set(backend.adapters) == {"stage1", "stage2", "stage3", "world"}
    assert backend.merged.stages == ["stage1", "stage2", "stage3", "world"]   # float32: merged per stage
    # eval's student system and a served student route the world stage to its adapter too (not the bare model)
    from vista_distill.backends.server import server_backend
    from vista_distill.config import load_recipe
    from vista_distill.eval.systems import ModelLoader

    recipe = load_recipe(path)
    assert set(ModelLoader(recipe).student().adapters) == {"stage1", "stage2", "stage3", "world"}
    served = server_backend(recipe, "student", servers=["http://127.0.0.1:9/v1"])
    assert served.stage_models == {"stage1": "stage1", "stage2": "stage2", "stage3": "stage3", "world": "world"}
    off = load_recipe(path, ["pipeline.world.enabled=false"])
    assert set(ModelLoader(off).student().adapters) == {"stage1", "stage2", "stage3"}
    launcher = (ROOT / "train" / "world.py").read_text()
    assert 'launch("world")' in launcher


FHSUM = __import__("pathlib").Path(__file__).resolve().parent / "fixtures" / "fhsumbench" / "dev.json"


def test_fhsumbench_loader_maps_the_three_labels(tmp_path):
    from vista_distill.data.benchmarks import guess_benchmark, load_benchmark
    from vista_distill.data.schema import HALLUCINATED

    assert guess_benchmark(FHSUM) == "fhsumbench"
    res = load_benchmark("fhsumbench", FHSUM)
    assert res.report.rows_read == 6 and res.report.records_out == 6 and not res.report.rejected
    conv = res.conversations[2]
    user, summary = conv.turns
    assert summary.reference.startswith("The town council") and summary.is_scored and user.role == "user"
    assert summary.meta["world_label"] == NON_FACTUAL_HALLUCINATION and summary.gold_label == HALLUCINATED
    assert [c.turns[1].meta["world_label"] for c in res.conversations][:2] == [FAITHFUL, FACTUAL_HALLUCINATION]
    bad = tmp_path / "bad.json"
    rows = json.loads(FHSUM.read_text())
    rows[1]["label"] = "maybe"
    bad.write_text(json.dumps(rows))
    with pytest.raises(Exception, match=r"bad\.json.*2.*label.*unknown label 'maybe'"):
        load_benchmark("fhsumbench", bad)


def test_world_metrics_are_the_studys_macro_scores():
    from vista_distill.scoring.metrics import world_metrics

    gold = [FAITHFUL, FAITHFUL, FACTUAL_HALLUCINATION, NON_FACTUAL_HALLUCINATION]
    pred = [FAITHFUL, UNKNOWN, FACTUAL_HALLUCINATION, FACTUAL_HALLUCINATION]
    m = world_metrics(gold, pred)
    # precision: faithful 1/1, factual 1/2, non-factual 0 -> 0.5; recall: 1/2, 1, 0 -> 0.5
    assert (m["macro_precision"], m["macro_recall"]) == (0.5, 0.5)
    assert m["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 0) / 3, abs=1e-4)
    assert m["unknown"] == 1 and m["label_accuracy"][FAITHFUL] == 0.5
    assert m["confusion"]["matrix"][0] == [1, 0, 0, 1]


def test_eval_on_fhsumbench_prints_the_three_way_scores_beside_the_published_rows(tmp_path, capsys, tiny_smollm2):
    """``vista-distill eval`` on FHSumBench-shaped data: the study's vanilla judge and VISTA with the world
    stage (few-shot; the tiny random SmolLM2, as what is reported is tested, not what is said) give three-way
    verdicts; the table, report and results carry macro P/R/F1, the random baseline and the published rows."""
    from helpers import ROOT

    from vista_distill.cli import main

    rc = main(["eval", "--config", str(ROOT / "recipes" / "demo-cpu.yaml"), "--input", str(FHSUM),
               "--systems", "world_judge,base", "--no-progress",
               "--output-dir", str(tmp_path / "eval"), "pipeline.world.enabled=true", "eval.threads=1",
               "eval.given_claims=false", "eval.tune_on=[]", "eval.bootstrap=10",
               'pipeline.max_new_tokens={"stage1": 48}',
               f"student.model={tiny_smollm2}"])
    out = capsys.readouterr().out
    assert rc == 0, out
    results = json.loads((tmp_path / "eval" / "results.json").read_text())
    w = results["world"]
    assert set(w["systems"]) == {"world_judge", "base", "random"}
    for m in w["systems"].values():
        assert m["n"] == 6 and 0 <= m["macro_f1"] <= 1 and sum(map(sum, m["confusion"]["matrix"])) == 6
    assert w["published_macro_f1"]["random"] == 0.3185
    assert "three-way verdicts" in out and "published: reflection retrieval, GPT-4o (best)" in out
    assert "0.501" in out
    report = (tmp_path / "eval" / "report.md").read_text()
    assert "## Three-way verdicts" in report and "Confusion, world_judge" in report
    records = [json.loads(x) for x in (tmp_path / "eval" / "records" / "base.jsonl").read_text().splitlines()]
    assert all(r["world_gold"] and r["world_verdict"] for r in records if r["scored"])


def test_score_command_with_world_knowledge_writes_three_way_verdicts(tmp_path, capsys):
    from vista_distill.cli import main
    from vista_distill.data.io import write_conversations

    data, kb, out = tmp_path / "in.jsonl", tmp_path / "kb.jsonl", tmp_path / "out.jsonl"
    write_conversations([_conversation()], data)
    kb.write_text("\n".join(json.dumps(p) for p in PASSAGES))
    assert main(["score", "--input", str(data), "--output", str(out), "--world-knowledge", str(kb),
                 "--world-concurrent", "--prompts", "compact", "--max-new-tokens", "stage1=40", "--threads", "1"]) == 0
    (rec,) = [json.loads(x) for x in out.read_text().splitlines()]
    summary = json.loads(out.with_name("out.summary.json").read_text())
    assert rec["world_verdict"] in (FAITHFUL, FACTUAL_HALLUCINATION, NON_FACTUAL_HALLUCINATION, UNKNOWN)
    assert "world_gold" not in rec               # the data has no three-way label
    for c in rec["claims"]:
        assert (c["world"] is not None) == (c["category"] == LACKING_EVIDENCE)
        if c["world"] is not None:
            assert c["world"]["label"] in WORLD_LABELS and isinstance(c["world"]["evidence"], list)
    assert summary["world"]["verdicts"][rec["world_verdict"]] == 1
    assert "three-way verdict" in capsys.readouterr().out


def test_labels_teacher_answers_the_world_stage_from_factcheck_gpt_factuality():
    """Factcheck-GPT's annotators judged each claim's factuality against world evidence: the human-labels
    teacher answers the world stage with it (true -> TRUE, false -> FALSE, unknown -> NOT ENOUGH KNOWLEDGE)."""
    from helpers import ROOT

    from vista_distill.backends.human_labels import LabelsBackend
    from vista_distill.data.benchmarks import load_benchmark
    from vista_distill.pipeline.protocol import Fields
    from vista_distill.pipeline.templates import stage_request

    convs = load_benchmark(
        "factcheck-gpt",
        ROOT / "data" / "samples" / "factcheck_gpt" / "factcheck-GPT-benchmark.jsonl",
        unit="sentence",
        evidence="closest",
    ).conversations
    backend = LabelsBackend(convs)
    t = get_template("world", "compact")
    pairs = [(c.text, m["factuality"]) for conv in convs for turn in conv.turns if turn.gold_claims
             for c, m in zip(turn.gold_claims, turn.meta["claims"]) if c.label == LACKING_EVIDENCE]
    want = {"true": "TRUE", "false": "FALSE"}
    picked = [next(p for p in pairs if p[1] == f) for f in want]
    answers = backend.run([stage_request(t, Fields(claim=text, evidence=("some passage",)), labels=t.labels)
                           for text, _ in picked])
    assert [a.label for a in answers] == [want[f] for _, f in picked]
    (unknown,) = backend.run([stage_request(t, Fields(claim="Not a Factcheck-GPT claim."), labels=t.labels)])
    assert unknown.label is None and unknown.meta["error"] == "no gold label for this request"


def test_rerun_world_on_records_gives_the_pipelines_world_answers_back(embedded_backend, tmp_path):
    """``scoring.run.rerun_world`` (the world protocol's rescoring with another world adapter) sends the requests
    the engine sends: on the records of a run, with the same model, it gives back that run's world answers,
    evidence and three-way verdicts; records without the stage stay as they were; the turn-context setting,
    which records cannot serve, is refused."""
    from helpers import assert_same_records

    from vista_distill.scoring.run import rerun_world

    kb = tmp_path / "kb.jsonl"
    kb.write_text("\n".join(json.dumps(p) for p in PASSAGES))
    conv = _conversation()
    scorer = VistaScorer(backend=LabelsBackend([conv], fallback=embedded_backend), world=True, world_knowledge=str(kb))
    records = scorer.score([conv]).records
    blank = copy.deepcopy(records)
    for c in blank[0]["claims"]:
        c["world"] = None
    blank[0]["world_verdict"] = "unknown"
    again = rerun_world(blank, scorer.config, embedded_backend)
    assert sum(c["world"] is not None for c in again[0]["claims"]) == 2
    assert_same_records(again, records)
    off = VistaScorer(backend=LabelsBackend([conv], fallback=embedded_backend)).score([conv]).records
    assert rerun_world(off, scorer.config, embedded_backend) == off
    with pytest.raises(ValueError, match="world_concurrent"):
        rerun_world(records, dataclasses.replace(scorer.config, world_concurrent=True), embedded_backend)
