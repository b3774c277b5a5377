"""distill/ without a model server: the call cache, the export contract (human labels as the
teacher), filters, the leak check, a killed export, and the absent-server error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import SAMPLE, check_export, write_recipe

from vista_distill.backends.cache import CallCache, call_key
from vista_distill.distill.silver import STAGES

ROOT = Path(__file__).resolve().parents[1]




def cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vista_distill", "distill", "--no-progress", *args],
                          check=False, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})




def test_cache_keys_entries_and_torn_files(tmp_path):
    cache = CallCache(tmp_path / "calls")
    k1 = call_key({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0})
    assert k1 == call_key({"temperature": 0, "messages": [{"content": "x", "role": "user"}], "model": "m"})
    assert k1 != call_key({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0.7})
    assert cache.get(k1) is None
    cache.put(k1, {"text": "VERIFIED"})
    assert cache.get(k1)["text"] == "VERIFIED" and len(cache) == 1
    assert not list((tmp_path / "calls").rglob("*.tmp")), "temporary files left behind"
    cache.path(k1).write_text('{"text": "VERI')   # a torn write (cannot happen through put)
    assert cache.get(k1) is None and cache.stats["unreadable"] == 1
    assert cache.stats == {"hits": 1, "misses": 2, "writes": 1, "overwrites": 0, "unreadable": 1}


def test_labels_teacher_export_contract_and_train_loader(tmp_path):
    out = tmp_path / "silver"
    r = cli("--config", str(write_recipe(tmp_path / "r.yaml", out)))
    assert r.returncode == 0, r.stderr
    manifest = check_export(out)
    assert manifest["teacher"] == "labels"
    report = manifest["filters"]["report"]
    # The context turn of sample-1 has no human claims: the labels teacher cannot answer it.
    assert report["stage1"]["dropped"] == {"parse failure": 1}
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == sum(report[s]["candidates"] for s in STAGES)
    assert sum(r["kept"] for r in records) == sum(report[s]["kept"] for s in STAGES)
    try:
        from vista_distill.train.silver_data import load_silver
    except ImportError:
        return
    for stage in STAGES:
        load_silver(out, stage)   # train/'s own validation of every row


def test_filters_gold_disagreement_dedup_balance(tmp_path):
    # Corrupt one human label so the labels teacher disagrees with the gold turn label.
    data = json.loads(SAMPLE.read_text())
    turn = data[1][1]        # sample-2, gold hallucinated
    for claim in turn["human_claims"]:
        claim["human_judgement"] = "verifiable"
    data.append(json.loads(json.dumps(data[0])))   # a verbatim copy: duplicate prompts
    data[-1][0]["conversation_id"] = "copy"
    for t in data[-1]:
        t["conversation_id"] = "copy-1"
    src = tmp_path / "dialogues.json"
    src.write_text(json.dumps(data))
    out = tmp_path / "silver"
    recipe = write_recipe(tmp_path / "r.yaml", out, data={"train": [{"benchmark": "vista-human", "source": str(src)}]},
                          distill={"balance_classes": True, "validation_fraction": 0.0})
    r = cli("--config", str(recipe))
    assert r.returncode == 0, r.stderr
    manifest = check_export(out)
    rep = manifest["filters"]["report"]
    assert rep["stage2"]["dropped"].get("gold disagreement", 0) == len(turn["human_claims"])
    assert rep["stage2"]["dropped"].get("duplicate", 0) > 0
    labels = manifest["counts"]["stage2"]["train"]["labels"]
    assert len(set(labels.values())) == 1, f"stage 2 not balanced: {labels}"
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    bad = [r for r in records if r["drop_reason"] == "gold disagreement"]
    assert bad and all("gold says hallucinated" in r["drop_detail"] for r in bad)


def test_leak_check_runs_before_the_teacher(tmp_path):
    recipe = write_recipe(tmp_path / "r.yaml", tmp_path / "silver",
                          data={"test": [{"benchmark": "vista-human", "source": str(SAMPLE)}]},
                          teacher={"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"})
    r = cli("--config", str(recipe))
    assert r.returncode == 2
    assert "share dialogues with the training material" in r.stderr and "sample-1" in r.stderr


def test_server_absent_is_a_clear_error(tmp_path):
    from vista_distill.testing.llama_server import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    recipe = write_recipe(tmp_path / "r.yaml", tmp_path / "silver",
                          teacher={"backend": "openai", "model": "m", "base_url": url})
    r = cli("--config", str(recipe))
    assert r.returncode == 3   # runtime/exit_codes.py: a server cannot be reached
    assert f"cannot reach the teacher server at {url}" in r.stderr and "Traceback" not in r.stderr


def test_killed_export_is_completed_by_a_rerun(tmp_path):
    out = tmp_path / "silver"
    recipe = write_recipe(tmp_path / "r.yaml", out)
    assert cli("--config", str(recipe)).returncode == 0
    first = json.loads((out / "manifest.json").read_text())["fingerprint"]
    (out / "manifest.json").unlink()
    for stage in ("stage1", "stage3"):
        r = cli("--config", str(recipe), env={"VISTA_DISTILL_DIE_AT": f"export:{stage}"})
        assert r.returncode == -9
        assert not (out / "manifest.json").exists()
    assert cli("--config", str(recipe)).returncode == 0
    assert json.loads((out / "manifest.json").read_text())["fingerprint"] == first
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "partial export folders left behind"
    check_export(out)


def test_recipe_errors_name_the_problem(tmp_path):
    recipe = write_recipe(tmp_path / "r.yaml", tmp_path / "silver", teacher={"backend": "openai"})
    r = cli("--config", str(recipe))
    assert r.returncode == 2 and "teacher.base_url is required" in r.stderr
    recipe = write_recipe(tmp_path / "r.yaml", tmp_path / "silver", distill={"self_consistency_k": 3})
    r = cli("--config", str(recipe))
    assert r.returncode == 2 and "self_consistency_k" in r.stderr


def test_mixed_material_partial_claims_feed_stages_2_and_3_only(tmp_path):
    """DialFact (response = one claim) and FineDialFact (one annotated fact per record) feed stages 2
    and 3 only (how the mixed material is split and leak-checked: tests/test_material.py)."""
    from helpers import DIALFACT, FINEDIALFACT

    out = tmp_path / "silver"
    path = write_recipe(tmp_path / "r.yaml", out, data={
        "train": [{"benchmark": "vista-human", "source": str(SAMPLE)}, DIALFACT, FINEDIALFACT],
        "test": [DIALFACT], "test_fraction": 0.0, "leaks": "drop-test"})
    r = cli("--config", str(path), "distill.validation_fraction=0")
    assert r.returncode == 0, r.stderr
    manifest = check_export(out)
    from datasets import load_from_disk

    stage1 = load_from_disk(str(out / "stage1"))["train"]
    assert set(stage1["source"]) == {"sample"}, "partial claims reached stage 1"
    assert manifest["filters"]["report"]["stage1"]["dropped"]["partial claims"] >= 4
    stage2 = load_from_disk(str(out / "stage2"))["train"]
    df = {
        row["prompt"][1]["content"].rsplit("CLAIM:\n", 1)[1]: row["label"]
        for row in stage2
        if row["source"] == "DialFact"
    }
    assert df["Yes, Mount Etna is an active stratovolcano."] == "VERIFIED"
    assert sorted(df.values()).count("UNVERIFIABLE") == 3
    stage3 = load_from_disk(str(out / "stage3"))["train"]
    assert {"CONTRADICTED", "LACKING EVIDENCE", "OUT-OF-SCOPE"} <= {
        row["label"] for row in stage3 if row["source"] == "DialFact"}
    assert any(row["source"] == "FineDialFact" for row in stage2)


def test_demo_recipe_stage3_silver_holds_every_vista_category(tmp_path):
    """The demo recipe as shipped (bundled data, human labels as the teacher): stage 3 learns VISTA's four
    categories, OUT-OF-SCOPE from FaithDial's Generic responses and Factcheck-GPT's opinions, ABSTENTION from the
    abstentions split off FaithDial, BEGIN and FADE responses."""
    from collections import Counter

    from datasets import load_from_disk

    from vista_distill.config import load_recipe
    from vista_distill.distill.run import run_distill

    run_distill(load_recipe(ROOT / "recipes" / "demo-cpu.yaml"), progress=False, output_dir=tmp_path / "silver")
    stage3 = load_from_disk(str(tmp_path / "silver" / "stage3"))["train"]
    counts = Counter(stage3["label"])
    assert set(counts) == {"LACKING EVIDENCE", "CONTRADICTED", "OUT-OF-SCOPE", "ABSTENTION"}
    assert counts["OUT-OF-SCOPE"] >= 100 and counts["ABSTENTION"] >= 40
    by_source = Counter((s.split("+", 1)[0], label) for s, label in zip(stage3["source"], stage3["label"]))
    assert by_source["FaithDial", "OUT-OF-SCOPE"] and by_source["Factcheck-GPT", "OUT-OF-SCOPE"]
    assert by_source["FaithDial", "ABSTENTION"] and by_source["BEGIN", "ABSTENTION"]
    claims = {row["prompt"][1]["content"].rsplit("CLAIM:\n", 1)[1]: row["label"] for row in stage3}
    abstained = [c for c, label in claims.items() if label == "ABSTENTION"]
    assert all(len(c.split()) <= 20 for c in abstained)    # the abstaining clause, not the whole response
    assert {"I 'm not sure", "I do n't know"} <= set(abstained)
