"""End to end: ``run_eval`` / ``vista-distill eval`` on the bundled sample writes a readable run folder.

The teacher is the labels teacher; the student (untrained identity adapters) and the baselines run on
the embedded SmolLM2-135M (one conversation); without adapters the student must be reported skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import EVAL_RECIPE, eval_overrides, identity_adapters

from vista_distill.cli import main
from vista_distill.config import RecipeError, load_recipe
from vista_distill.eval.baselines import parse_judge
from vista_distill.eval.errors import EvalError
from vista_distill.eval.report import PLOTS
from vista_distill.eval.run import run_eval
from vista_distill.pipeline.engine import RULES

ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"






@pytest.fixture(scope="module")
def run(tmp_path_factory, sample_path):
    tmp = tmp_path_factory.mktemp("eval")
    identity_adapters(tmp / "checkpoints")
    recipe = load_recipe(EVAL_RECIPE, eval_overrides(tmp))
    return run_eval(recipe, input_path=str(sample_path), limit=1, output_dir=tmp / "out",
                    systems=["student", "teacher", "llm_judge", "factscore"])


def test_parse_judge():
    assert parse_judge('{"faithfulness": "faithful", "explanation": "ok"}') == ("faithful", "ok", None, "json")
    assert parse_judge('```json\n{"faithfulness": "hallucinated", "explanation": "x"}\n```')[0] == "hallucinated"
    assert parse_judge('{"faithfulness": "hallucinated", "explanation": "cut off')[::3] == ("hallucinated", "field")
    assert parse_judge("Faithful. Everything is in the document.")[::3] == ("faithful", "bare")
    # a reply to the TASK question "Does the answer contain any hallucinated content?"
    assert parse_judge("Yes, the answer contains hallucinated content.")[::3] == ("hallucinated", "yes/no")
    assert parse_judge("No, the answer does not contain any hallucinated content.")[::3] == ("faithful", "yes/no")
    # other prose is not a verdict: a word search would read "hallucinated" here
    verdict, _, error, how = parse_judge("The answer contains no hallucinated content.")
    assert verdict is None and how is None and "no faithfulness verdict" in error
    assert parse_judge("")[2] == "empty output"


def test_skipped_student_is_reported_with_its_reason(tmp_path, sample_path):
    recipe = load_recipe(EVAL_RECIPE, eval_overrides(tmp_path))     # no adapters under tmp_path/checkpoints
    res = run_eval(recipe, input_path=str(sample_path), limit=1, output_dir=tmp_path / "out", systems=["student"])
    s = res.results["systems"]["student"]
    assert s["status"] == "skipped"
    assert "adapter_config.json" in s["reason"] and "vista-distill train" in s["reason"]
    assert res.results["metrics"] == {}
    report = (res.out_dir / "report.md").read_text()
    assert "| student | skipped |" in report and "Not available: student skipped" in report
    for plot in PLOTS:
        assert (res.out_dir / plot).read_bytes()[:8] == PNG_MAGIC


@pytest.mark.slow
def test_student_runs_with_adapters_and_compact_prompts(run):
    s = run.results["systems"]["student"]
    assert s["status"] == "ok", s["reason"]
    assert s["description"]["prompts"] == "compact"
    assert sorted(s["description"]["adapters"]) == ["stage1", "stage2", "stage3"]
    records = [r for r in run.systems["student"].records if r["scored"]]
    assert len(records) == 2 and all(set(r["verdicts"]) == set(RULES) for r in records)
    report = (run.out_dir / "report.md").read_text()
    assert "student acc" in report          # the teacher vs student table is there
    # the HTML page: every system's scored turns, plots inlined (browser checks: test_html_report.py)
    page = (run.out_dir / "report.html").read_text()
    ok = [n for n, x in run.results["systems"].items() if x["status"] == "ok"]
    assert page.count('class="turn') == sum(r["scored"] for n in ok for r in run.systems[n].records)
    assert page.count("data:image/png;base64,") == 3 and "http" not in page.split("<script>")[0].split("</style>")[0]
    pairs = run.results["significance"]["by_rule"]["safe"]["sample"]
    assert ("student", "teacher") in {(p["system_1"], p["system_2"]) for p in pairs}


@pytest.mark.slow
def test_stage_one_beside_the_sentence_splitter(run):
    """Each model-backed system's stage 1 beside the sentence splitter, on the sample's human decompositions."""
    stage1 = run.results["stage_rules"]["stage1"]
    assert set(stage1["systems"]) == {"student", "teacher"}       # not the prompted baselines
    n_gold = sum(len(r["gold_claims"]) for r in run.systems["teacher"].records if r["scored"] and r["gold_claims"])
    for s in stage1["systems"].values():
        assert s["human_claims"] == n_gold > 0 and 0 <= s["f1"] <= 1 and 0 <= s["rule"]["f1"] <= 1
    assert stage1["systems"]["teacher"]["f1"] == 1.0                 # the labels teacher's claims are the human ones
    report = (run.out_dir / "report.md").read_text()
    assert "## Stage by stage, beside each stage's rule" in report and "| 1 claims F1 | student |" in report


@pytest.mark.slow
def test_baseline_records_have_verdicts_and_raw_outputs(run):
    judge = run.systems["llm_judge"].records
    scored = [r for r in judge if r["scored"]]
    assert len(scored) == 2 and all(r["baseline"] == "llm_judge" for r in judge)
    for r in scored:
        assert set(r["verdicts"]) == set(RULES)
        assert r["judge"]["raw"] == r["judge"]["raw"].strip() and "raw" in r["judge"]
        assert (r["verdicts"]["safe"] == "unknown") == (r["unknown_reason"] is not None)
    fact = [r for r in run.systems["factscore"].records if r["scored"]]
    assert len(fact) == 2 and all(r["stage1_raw"] for r in fact)
    for r in fact:
        for c in r["claims"]:
            assert c["category"] in ("VERIFIED", "UNVERIFIABLE")
            assert set(c["stage2"]["probs"]) == {"VERIFIED", "UNVERIFIABLE"}
            assert c["stage2"]["factscore_label"] in ("SUPPORTED", "NOT SUPPORTED")
    eff = run.results["systems"]["factscore"]["efficiency"]
    assert eff["prompt_tokens"] > 0 and eff["wall_s"] > 0 and eff["peak_rss_mb"] > 0


@pytest.mark.slow
def test_run_folder_is_complete_and_readable(run):
    import matplotlib.image as mpimg

    out = run.out_dir
    results = json.loads((out / "results.json").read_text())
    assert results["fingerprint"] == run.results["fingerprint"]
    assert set(results["metrics"]) == {"student", "teacher", "llm_judge", "factscore"}
    teacher = results["metrics"]["teacher"]["overall"]
    assert teacher["turn"]["safe"]["accuracy"] == 1.0 and teacher["claim"]["accuracy"] == 1.0
    assert "five_labels" in results["metrics"]["factscore"]["overall"]["claim"]
    pairs = {(p["system_1"], p["system_2"]) for p in results["significance"]["by_rule"]["safe"]["overall"]}
    assert len(pairs) == 6 and ("llm_judge", "factscore") in pairs
    assert results["bootstrap"]["teacher"]["strict"]["overall"]["accuracy"]["n"] == 2
    # accuracy over the turns every system covered, beside each system's own
    common = results["common_coverage"]
    assert common["systems"] == ["student", "teacher", "llm_judge", "factscore"]
    assert set(common["by_rule"]) == set(RULES) == set(results["settings"]["rules"])
    for rule in RULES:
        c = common["by_rule"][rule]["overall"]
        covered = [{(r["conversation_id"], r["turn_index"]) for r in run.systems[n].records
                    if r["scored"] and r["gold_label"] and r["verdicts"][rule] != "unknown"} for n in common["systems"]]
        assert c["n_gold"] == 2 and c["n"] == len(set.intersection(*covered))
        for name in common["systems"]:
            t = results["metrics"][name]["overall"]["turn"][rule]
            assert t["n_common"] == c["n"] and t["accuracy_common"] == c["accuracy"][name]
            assert t["n_common"] <= t["n"]
    assert results["metrics"]["teacher"]["overall"]["turn"]["authors"]["accuracy"] == 1.0
    for name in ("student", "teacher", "llm_judge", "factscore"):
        assert (out / "records" / f"{name}.jsonl").exists()
    report = (out / "report.md").read_text()
    for section in ("## Systems", "## Turn level", "## Teacher vs student", "## Claim level", "## McNemar",
                    "## Speed and cost", "## Reproducibility"):
        assert section in report
    for rule in RULES:
        assert f"Rule `{rule}`:" in report and f"`{rule}`: " in report   # its table and what it means
    t = results["metrics"]["teacher"]["overall"]["turn"]["safe"]
    n_common = results["common_coverage"]["by_rule"]["safe"]["overall"]["n"]
    acc = "–" if t["accuracy_common"] is None else f"{100 * t['accuracy_common']:.1f}"
    assert "acc common (turns)" in report and f"{acc} ({n_common})" in report
    for plot in PLOTS:
        data = (out / plot).read_bytes()
        assert data[:8] == PNG_MAGIC, plot
        img = mpimg.imread(out / plot)
        assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
        assert f"![{plot}]({plot})" in report


def test_cli_rerun_reproduces_the_numbers(tmp_path, sample_path, capsys):
    args = ["eval", "--config", str(EVAL_RECIPE), "--input", str(sample_path), "--systems", "teacher", "--no-progress",
            *eval_overrides(tmp_path)]
    assert main([*args, "--output-dir", str(tmp_path / "a")]) == 0
    assert main([*args, "--output-dir", str(tmp_path / "b"), "--compare", str(tmp_path / "a" / "results.json")]) == 0
    out = capsys.readouterr().out
    assert "identical" in out
    a = json.loads((tmp_path / "a" / "results.json").read_text())
    b = json.loads((tmp_path / "b" / "results.json").read_text())
    assert a["fingerprint"] == b["fingerprint"] and b["compare"]["identical"]
    assert a["bootstrap"] == b["bootstrap"]


def test_cli_without_test_material_fails_with_a_message(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["eval", "--config", str(EVAL_RECIPE), "--no-progress", "--output-dir", str(out),
                 *eval_overrides(tmp_path)]) == 2
    assert "no test material" in capsys.readouterr().err
    assert not out.exists()


def test_cost_per_1k_turns_from_configured_prices():
    from vista_distill.eval.efficiency import cost_per_1k_turns

    recipe = load_recipe(None, ["eval.price_per_1m_tokens={teacher: {prompt: 2.5, completion: 10.0}}",
                                "eval.price_per_hour={student: 3.6}", "eval.price_per_1k_turns={base: 0.5}"])
    eff = {"scored_turns": 50, "prompt_tokens": 200_000, "completion_tokens": 10_000, "wall_s": 100.0}
    # (200k * 2.5 + 10k * 10) / 1M = $0.60 for 50 turns -> $12 per 1,000
    assert cost_per_1k_turns(recipe, "teacher", eff)["usd"] == pytest.approx(12.0)
    # $3.60/h * 100 s = $0.10 for 50 turns -> $2 per 1,000
    assert cost_per_1k_turns(recipe, "student", eff)["usd"] == pytest.approx(2.0)
    assert cost_per_1k_turns(recipe, "base", eff) == {"usd": 0.5, "basis": "eval.price_per_1k_turns"}
    assert cost_per_1k_turns(recipe, "factscore", eff) is None


def test_model_loader_keeps_one_model_where_two_do_not_fit(tmp_path):
    """ModelLoader: with no memory to spare, loading the student lets the base go and the base the student (the
    demo's two 135M models fit side by side and are each loaded once: the time-budget test below)."""
    from vista_distill.eval.systems import ModelLoader

    identity_adapters(tmp_path / "checkpoints")
    loader = ModelLoader(load_recipe(EVAL_RECIPE, eval_overrides(tmp_path)))
    loader.memory_share = 0.0
    base = loader.base()
    assert not loader.both_fit()
    loader.student()
    assert loader._base is None and loader._student is not None
    assert loader.base() is not base and loader._student is None
    assert loader.loads == {"base": 2, "student": 1}
    roomy = ModelLoader(load_recipe(EVAL_RECIPE, eval_overrides(tmp_path)))
    roomy.base(), roomy.student()
    assert roomy.both_fit() and roomy._base is not None and roomy._student is not None


def test_time_budget_evaluates_every_system_on_the_same_rounds(tmp_path, sample_path, tiny_smollm2):
    """eval.max_minutes: conversations in a seeded order, every system on a first round, then on what that pace fits
    in the rest of the budget; a spent budget stops there and the report says how much of the material ran. On the
    tiny random SmolLM2: rounds and budgets are tested, not what is said."""
    identity_adapters(tmp_path / "checkpoints", tiny_smollm2)
    ov = [*eval_overrides(tmp_path), f"student.model={tiny_smollm2}", "eval.round_size=1", "eval.given_claims=true",
          "pipeline.max_new_tokens={stage1: 32, stage3: 16}"]   # rounds and budgets are tested, not what is said
    whole = run_eval(load_recipe(EVAL_RECIPE, [*ov, "eval.max_minutes=60"]), input_path=str(sample_path), limit=2,
                     output_dir=tmp_path / "whole", systems=["student", "base"])
    budget = whole.results["material"]["time_budget"]
    assert budget["rounds_run"] == 2 and budget["conversations_evaluated"] == 2   # a first round of 1, then the rest
    for name in ("student", "base"):
        run = whole.systems[name]
        assert (
            run.efficiency["rounds"] == 2
            and run.efficiency["scored_turns"] == whole.results["material"]["scored_turns"]
        )
        assert {r["conversation_id"] for r in run.records} == {
            r["conversation_id"] for r in whole.systems["base"].records
        }
        assert run.given_records
        # the evidence probes ran in both rounds and were joined like the records
        assert {r["conversation_id"] for r in run.evidence_records if "conversation_id" in r} == \
            {r["conversation_id"] for r in run.given_records if r["scored"] and r["gold_claims"]}
        assert whole.results["systems"][name]["evidence"]["claim_only"]["claims"] > 0
    assert "## Does it read its evidence?" in (whole.out_dir / "report.md").read_text()
    # the student's stage-by-stage rows ran in both rounds and were joined like the records
    rows, own = whole.systems["student"].attribution_records, whole.systems["student"].records
    with_claims = {r["conversation_id"] for r in own if r["scored"] and r["gold_claims"]}
    assert len(with_claims) == 2 and all({r["conversation_id"] for r in recs} == with_claims for recs in rows.values())
    table = whole.results["attribution"]["student"]["rows"]["safe"]
    assert table["turns"] == sum(bool(r["scored"] and r["gold_claims"] and r["gold_label"]) for r in own)
    # the tiny base and student fit side by side: each loaded once for both rounds, not once a round
    assert whole.results["model_loads"] == {"base": 1, "student": 1}
    # a budget spent by the first round: no second one, for either system, and the tests pair what was run
    cut = run_eval(load_recipe(EVAL_RECIPE, [*ov, "eval.max_minutes=0.0001"]), input_path=str(sample_path), limit=2,
                   output_dir=tmp_path / "cut", systems=["student", "base"])
    m = cut.results["material"]
    assert (
        m["time_budget"]["rounds_run"] == 1 and m["conversations"] == m["time_budget"]["conversations_evaluated"] == 1
    )
    ids = [{r["conversation_id"] for r in cut.systems[n].records} for n in ("student", "base")]
    assert ids[0] == ids[1] and len(ids[0]) == 1
    pair = cut.results["significance"]["by_rule"]["strict"]
    assert "time_budget" in (cut.out_dir / "results.json").read_text() and pair
    assert "let 1 of the 2 conversations run" in (cut.out_dir / "report.md").read_text()
    assert m["time_budget"]["conversations_claim_level"] >= 1
    with pytest.raises(RecipeError, match=r"eval.max_minutes: -1.0 is out of range \(expected > 0\)"):
        load_recipe(EVAL_RECIPE, [*ov, "eval.max_minutes=-1"])   # refused as the recipe is read
    bad = load_recipe(EVAL_RECIPE, ov)
    bad.eval.max_minutes = -1.0   # set in Python past the reader: the evaluation refuses it too
    with pytest.raises(EvalError, match="eval.max_minutes"):
        run_eval(bad, input_path=str(sample_path), limit=2, output_dir=tmp_path / "bad", systems=["base"])


def test_time_budget_runs_the_claim_level_first():
    """With the human claims given, the claim level (cheap: no generation) extends to every conversation its own
    pace fits before the whole pipeline takes what is left; it is never behind the pipeline."""
    from types import SimpleNamespace

    from vista_distill.eval.budget import next_round

    e = SimpleNamespace(max_minutes=10, round_size=16, given_claims=True)
    assert next_round(134, 0, 0, 0.0, 0.0, e) == (16, 16)
    # round 1: 16 conversations in 200 s, 32 of them the claim level (2 s a conversation), 10.5 s the pipeline
    # 400 s left: the 118 other claim levels take 236, the pipeline gets 164 s -> 15 more conversations
    assert next_round(134, 16, 16, 200.0, 32.0, e) == (15, 118)
    # nearly spent: the claim level gets what fits, the pipeline nothing
    assert next_round(134, 16, 16, 560.0, 32.0, e) == (0, 20)
    # everything fits: all of it in one round
    assert next_round(134, 16, 16, 20.0, 4.0, e) == (118, 118)
    # 180 s spent before the rounds (eval.tune_on's dev split): 220 s left, the same pace -> the claim levels take
    # 236 > 220: 110 of them, the pipeline nothing
    assert next_round(134, 16, 16, 200.0, 32.0, e, 180.0) == (0, 110)
    # no human claims: the pipeline's pace alone; 32 would fit, but a round where the budget binds takes at most as
    # many as the pace was measured on (16), then measures again (32 run: up to 32)
    plain = SimpleNamespace(max_minutes=10, round_size=16, given_claims=False)
    assert next_round(134, 16, 16, 200.0, 0.0, plain) == (16, 16)
    assert next_round(134, 32, 32, 240.0, 0.0, plain) == (32, 32)
    assert next_round(134, 16, 16, 20.0, 0.0, plain) == (118, 118)   # all fit: one round
    assert next_round(134, 16, 16, 200.0, 0.0, SimpleNamespace(max_minutes=None, round_size=16,
                                                                  given_claims=True)) == (134, 134)


def test_whole_reference_probes_are_spread_over_the_evaluation_order():
    """eval.evidence_conversations picks n conversations evenly over the order, so the first round of a time budget
    carries its share of the probes (its pace stands for the later rounds'), not all of them."""
    from types import SimpleNamespace

    from vista_distill.eval.run import probed_conversations

    ordered = [SimpleNamespace(id=f"c{i}") for i in range(134)]
    probed = probed_conversations(ordered, 32)
    assert len(probed) == 32
    positions = sorted(int(i[1:]) for i in probed)
    assert sum(p < 8 for p in positions) == 2                        # the demo's first round: 8 dialogues, 2 probed
    assert max(b - a for a, b in zip(positions, positions[1:])) <= 5 and positions[-1] >= 124   # no gap, to the end
    assert probed_conversations(ordered, None) is None                # all probed
    assert probed_conversations(ordered[:5], 32) == {f"c{i}" for i in range(5)}


def test_eval_killed_mid_run_reuses_the_systems_it_finished(tmp_path, sample_path, tiny_smollm2):
    """`vista-distill eval` SIGKILLed while the student runs (the base's round already in its journal): the same
    command again reuses the base's records instead of running it, runs the student, writes the whole run folder
    and removes the journal. On the tiny random SmolLM2 (the run's mechanics), over enough conversations that the kill
    lands while the student runs."""
    import dataclasses
    import os
    import signal
    import subprocess
    import sys
    import time

    from vista_distill.data.io import read_conversations, write_conversations

    identity_adapters(tmp_path / "checkpoints", tiny_smollm2)
    data = tmp_path / "dialogues.jsonl"
    write_conversations([dataclasses.replace(c, id=f"{c.id}-{k}") for k in range(8)
                         for c in read_conversations(sample_path)], data)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "vista_distill", "eval", "--config", str(EVAL_RECIPE), "--input", str(data),
           "--systems", "base,student", "--output-dir", str(out), "--no-progress",
           *eval_overrides(tmp_path), "eval.given_claims=true", f"student.model={tiny_smollm2}"]
    journal = out / "journal.jsonl"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) >= 2:   # the header and the base's round
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    entries = [json.loads(x) for x in journal.read_text().splitlines()[1:]]
    assert [x["key"] for x in entries] == ["0:base"] and not (out / "results.json").exists()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming from" in again.stderr and "1 system round(s) already run are reused" in again.stderr
    base = [json.loads(x) for x in (out / "records" / "base.jsonl").read_text().splitlines()]
    assert base == entries[0]["value"]["run"]["records"]
    results = json.loads((out / "results.json").read_text())
    # not run again: its measured wall time is the killed run's
    assert results["systems"]["base"]["efficiency"]["wall_s"] == entries[0]["value"]["run"]["efficiency"]["wall_s"]
    assert results["systems"]["student"]["status"] == "ok" and results["systems"]["base"]["status"] == "ok"
    assert not journal.exists()


def test_a_claim_level_only_system_runs_no_stage1_while_the_claims_are_given(tmp_path, sample_path, capsys,
                                                                           tiny_smollm2):
    """eval.claim_level_only: with the human claims given, the base runs stages 2-3 on them (paired with the student
    there) and no stage 1, while the student runs both, and the command's table says so; without given claims the
    base runs the whole pipeline; a system with no claim level is refused, naming the setting. On the tiny random
    SmolLM2: which stages run is tested, not what they say."""
    identity_adapters(tmp_path / "checkpoints", tiny_smollm2)
    ov = [
        *eval_overrides(tmp_path),
        f"student.model={tiny_smollm2}",
        "eval.evidence=false",
        "pipeline.max_new_tokens={stage1: 32, stage3: 16}",
        "eval.claim_level_only=[base]",
    ]
    out = tmp_path / "out"
    assert main(["eval", "--config", str(EVAL_RECIPE), "--input", str(sample_path), "--limit", "2", "--systems",
                 "student,base", "--output-dir", str(out), "--no-progress", *ov, "eval.given_claims=true"]) == 0
    table = capsys.readouterr().out
    assert [ln for ln in table.splitlines() if ln.split()[:1] == ["base"] and "claim level only" in ln]
    results = json.loads((out / "results.json").read_text())
    base, student = results["systems"]["base"], results["systems"]["student"]
    records = {p.name for p in (out / "records").iterdir()}
    assert base["status"] == "ok" and "base.jsonl" not in records and "base.given_claims.jsonl" in records
    assert {"student.jsonl", "student.given_claims.jsonl"} <= records
    assert base["efficiency"]["backend_stats"]["completion_tokens"] == 0   # nothing decoded: no stage-1 list
    assert base["claim_level_wall_s"] > 0 and student["claim_level_wall_s"] > 0
    given = {name: {json.loads(ln)["conversation_id"] for ln in (out / "records" / f"{name}.given_claims.jsonl")
                    .read_text().splitlines()} for name in ("base", "student")}
    assert given["base"] == given["student"]
    pairs = {(p["system_1"], p["system_2"]) for p in results["given_claims"]["significance"]["stage2"]["overall"]}
    assert pairs == {("student", "base")} or pairs == {("base", "student")}
    assert not any("base" in (p["system_1"], p["system_2"]) for rule in results["significance"]["by_rule"].values()
                   for group in rule.values() for p in group)
    assert results["metrics"]["student"] and "base" not in results["metrics"]
    assert "base" in (out / "report.md").read_text()
    whole = run_eval(load_recipe(EVAL_RECIPE, [*ov, "eval.given_claims=false"]), input_path=str(sample_path), limit=1,
                     output_dir=tmp_path / "whole", systems=["base"])
    assert whole.systems["base"].records and whole.systems["base"].efficiency["backend_stats"]["completion_tokens"] > 0
    with pytest.raises(EvalError, match="eval.claim_level_only"):
        run_eval(load_recipe(EVAL_RECIPE, [*ov, "eval.claim_level_only=[teacher]"]), input_path=str(sample_path),
                 limit=1, output_dir=tmp_path / "bad", systems=["student"])


def test_results_json_round_trips_through_the_types(run):
    """eval/results.py reads a real results.json and writes it back byte for byte; report.md is its rendering."""
    from vista_distill.eval.report import render_markdown
    from vista_distill.eval.results import Results

    text = (run.out_dir / "results.json").read_text()
    d = json.loads(text)
    typed = Results.from_dict(d)
    assert typed.to_dict() == d
    assert json.dumps(typed.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n" == text
    assert render_markdown(typed, PLOTS) == (run.out_dir / "report.md").read_text() == render_markdown(d, PLOTS)
    assert typed.metrics["teacher"]["overall"].turn["safe"].accuracy == 1.0
