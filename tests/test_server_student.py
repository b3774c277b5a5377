"""The student on real llama.cpp servers (``llama-cpp-python[server]``) on 127.0.0.1: three stage adapters
trained here on the embedded SmolLM2-135M, converted to GGUF LoRA by ``vista-distill serve-config``
(llama.cpp's own converter), served as one model alias per stage. No fake responses.

* agreement: the served student labels the same claims as the in-process student (float32), turn verdicts
  and label probabilities included;
* replicas: one of two replicas is SIGKILLed mid-run and restarted later: the records equal a run
  without the fault, each turn once, and the restarted replica answers again.

Stages 2-3 run on the sample's human claims (``EngineConfig(claims="gold")``): the same inputs for both
backends, and few enough requests for a test (each label token is one request on llama.cpp).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import time
from pathlib import Path

import pytest
import yaml
from helpers import SAMPLE, assert_same_records, score_in_background, score_sample, wait_for_requests

from vista_distill.pipeline.protocol import Fields
from vista_distill.pipeline.templates import stage_request

pytestmark = [pytest.mark.server, pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama_cpp is not importable: install the server extra (see README) to run the served-student tests")]

STAGE_NAMES = {"stage1": "stage1", "stage2": "stage2", "stage3": "stage3"}


@pytest.fixture(scope="module")
def served(trained_student, tmp_path_factory):
    """Trained adapters, the recipe they were trained with, and serve-config's llama.cpp files."""
    from vista_distill.publish.serve_config import write_serve_config

    recipe, adapters = trained_student
    written = write_serve_config(recipe, adapters, tmp_path_factory.mktemp("serve"), engines=("vllm", "llama_cpp"))
    return recipe, adapters, written


def _models(written) -> list[dict]:
    config = json.loads(Path(written["llama_cpp"]["config"]).read_text())
    return [{k: m[k] for k in ("model_alias", "lora_path") if k in m} for m in config["models"]]


@pytest.fixture(scope="module")
def reference(served):
    """The served student's records through one llama.cpp server (no fault), and the in-process ones."""
    from vista_distill.backends.server import server_backend
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.testing.llama_server import LlamaServer

    recipe, adapters, written = served
    recipe = dataclasses.replace(recipe, student=dataclasses.replace(
        recipe.student, serving=dataclasses.replace(recipe.student.serving, label_scoring="auto", concurrency=1)))
    with LlamaServer(models=_models(written), n_threads=1) as srv:
        backend = server_backend(recipe, "student", servers=[srv.base_url])
        records = score_sample(backend, recipe)
    local = TransformersBackend(None, adapters=adapters, dtype="float32", threads=1)
    return recipe, records, score_sample(local, recipe), backend


def _claims(records):
    """(turn, claim, stage-2 label, category, stage-2 probabilities) of every claim."""
    return [
        (r["turn_index"], c["text"], (c["stage2"] or {}).get("label"), c["category"], (c["stage2"] or {}).get("probs"))
        for r in records
        if r["scored"]
        for c in r["claims"]
    ]


def test_serve_config_writes_engine_files_and_recipe_keys(served):
    from vista_distill.config import load_recipe

    _recipe, adapters, written = served
    out = Path(written["out"])
    vllm = (out / "vllm.sh").read_text()
    for stage in STAGE_NAMES:
        assert f"{stage}={(adapters / stage).resolve()}" in vllm
    assert "--enable-lora" in vllm and "--served-model-name base" in vllm and "--max-lora-rank 8" in vllm
    loras = written["llama_cpp"]["loras"]
    assert sorted(loras) == sorted(STAGE_NAMES) and all(Path(p).stat().st_size > 0 for p in loras.values())
    block = yaml.safe_load((out / "serving.yaml").read_text())["llama_cpp"]
    (out / "r.yaml").write_text(yaml.safe_dump(block))
    r = load_recipe(out / "r.yaml")
    assert r.student.servers == ["http://127.0.0.1:8080/v1"] and r.student.serving.label_scoring == "top_logprobs"


def _close(server: dict, local: dict, bounded: list[str], tol: float = 0.3) -> bool:
    """Label log-likelihoods agree within ``tol`` nats (measured: up to 0.24 on these adapters: llama.cpp multiplies
    Q4_1 weights by 8-bit-quantized activations, the in-process model the same weights in float32); a label marked
    bounded (one of its tokens was not among the server's top logprobs, so the list's smallest stood in) may only
    come out higher on the server."""
    return all(abs(server[k] - local[k]) < tol if k not in bounded else server[k] > local[k] - tol for k in local)


def test_served_student_agrees_with_in_process(served, reference):
    _recipe, served_records, local_records, backend = reference
    a, b = _claims(served_records), _claims(local_records)
    assert len(a) == len(b) == 19
    assert [x[:2] for x in a] == [x[:2] for x in b]            # same claims, same order
    labels = sum(x[2:4] == y[2:4] for x, y in zip(a, b)) / len(a)
    verdicts = [r["verdicts"] for r in served_records if r["scored"]]
    turns = sum(x == y for x, y in zip(verdicts, [r["verdicts"] for r in local_records if r["scored"]])) / len(verdicts)
    stage2 = [c["stage2"] for r in served_records if r["scored"] for c in r["claims"]]
    print(f"agreement: labels {labels:.3f} of {len(a)} claims, verdicts {turns:.3f} of {len(verdicts)} turns")
    # numerics differ (see _close): a claim the in-process student decides by a clear margin (more than twice
    # the largest log-likelihood gap measured between the backends) gets the same label from the server;
    # claims near 50/50 may flip (bench/results/server_student_*.json: the agreement on more claims)
    clear = [(x, y) for x, y in zip(a, b) if abs(math.log(y[4]["VERIFIED"] / y[4]["UNVERIFIABLE"])) > 0.6]
    assert len(clear) >= len(a) // 2 and all(x[2] == y[2] for x, y in clear)
    assert labels >= 0.9 and turns >= 0.8
    # how each label was scored is recorded with every answer (llama.cpp: its echo offsets skip special tokens)
    assert backend.method == "top_logprobs" and all(s["label_method"] == "top_logprobs" for s in stage2)
    label_requests = sum(1 + (c["stage3"] is not None) for r in served_records if r["scored"] for c in r["claims"])
    assert backend.stats["label_methods"] == {"top_logprobs": label_requests}


@pytest.mark.parametrize("stage", ["stage2", "stage3"])
def test_served_adapter_log_likelihoods_match_in_process(served, reference, stage):
    """Each label's log-likelihood, stage by stage, on the same prompts (a turn's human claims with its
    reference): stage 3 whatever stage 2 would have said."""
    from vista_distill.backends.server import server_backend
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.data.io import read_conversations
    from vista_distill.pipeline.templates import get_template
    from vista_distill.testing.llama_server import LlamaServer

    recipe, adapters, written = served
    t = get_template(stage, "compact")
    conv = read_conversations(SAMPLE)[0]
    reqs = [stage_request(t, Fields(reference=conv.turns[i].reference or "", claim=c.text), labels=t.labels)
            for i in conv.scored_turns for c in conv.turns[i].gold_claims or []][:3]
    local = TransformersBackend(None, adapters=adapters, dtype="float32", threads=1).run(reqs)
    with LlamaServer(models=_models(written), n_threads=1) as srv:
        got = server_backend(reference[0], "student", servers=[srv.base_url]).run(reqs)
    assert [g.label for g in got] == [x.label for x in local]
    assert all(_close(g.meta["logprobs"], x.meta["logprobs"], g.meta.get("bounded", [])) for g, x in zip(got, local))
    assert all(g.meta["label_method"] == "top_logprobs" for g in got)


def test_served_head_on_llama_cpp_says_it_was_not_applied(served, reference, tmp_path):
    """llama.cpp's label method (top_logprobs) gives no prompt log-probabilities: adapters that carry an evidence head
    are scored without it, and every answer of that stage says so."""
    from helpers import adapters_with_head

    from vista_distill.backends.server import server_backend
    from vista_distill.pipeline.templates import get_template
    from vista_distill.testing.llama_server import LlamaServer

    recipe, adapters, written = served
    with_head = adapters_with_head(adapters, tmp_path / "ad")
    t = get_template("stage2", "compact")
    reqs = [stage_request(t, Fields(reference="Paris is in France.", claim=c), labels=t.labels)
            for c in ("Paris is in France.", "Paris is in Spain.")]
    with LlamaServer(models=_models(written), n_threads=1) as srv:
        backend = server_backend(reference[0], "student", servers=[srv.base_url], adapters=with_head)
        got = backend.run(reqs)
    assert backend.heads and backend.method == "top_logprobs"
    for g in got:
        assert list(g.meta["evidence"]) == ["error"] and "not applied" in g.meta["evidence"]["error"]


def test_served_label_prior_gives_the_in_process_labels(served, reference, tmp_path):
    """A stage-3 adapter that carries a label prior (backends/label_prior.py): the served student (llama.cpp,
    top_logprobs) picks the labels the in-process one picks with the same shift, where no two labels are within the
    served log-probabilities' tolerance, and the shift changes at least one label."""
    import shutil

    from vista_distill.backends.label_prior import LabelPrior
    from vista_distill.backends.server import server_backend
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.pipeline.templates import get_template
    from vista_distill.testing.llama_server import LlamaServer

    recipe, adapters, written = served
    t = get_template("stage3", "compact")
    reqs = [stage_request(t, Fields(reference=ref, claim=c), labels=t.labels)
            for ref, c in (("Paris is the capital of France.", "Paris has a big zoo."),
                           ("The Nile flows north.", "I think the Nile is lovely."),
                           ("Everest is 8,849 m high.", "Everest is 9,000 m high."))]
    plain = TransformersBackend(None, adapters=adapters, dtype="float32", threads=1).run(reqs)
    first = plain[0].meta["logprobs"]
    top, second = sorted(first, key=first.get, reverse=True)[:2]
    shift = {second: first[top] - first[second] + 1.0}
    folder = tmp_path / "ad"
    shutil.copytree(adapters, folder)
    LabelPrior(shift, {"applied": True}).save(folder / "stage3")
    local = TransformersBackend(None, adapters=folder, dtype="float32", threads=1).run(reqs)
    with LlamaServer(models=_models(written), n_threads=1) as srv:
        backend = server_backend(reference[0], "student", servers=[srv.base_url], adapters=folder)
        got = backend.run(reqs)
    assert backend.priors and local[0].label == second != plain[0].label
    for g, lo in zip(got, local):
        moved = sorted(lp + shift.get(lab, 0.0) for lab, lp in lo.meta["logprobs"].items())
        if moved[-1] - moved[-2] > 0.3:
            assert g.label == lo.label


def test_replica_sigkilled_and_restarted_mid_run(served, reference, tmp_path):
    from vista_distill.backends.server import server_backend
    from vista_distill.testing.llama_server import LlamaServer

    recipe, served_records, _local, _ = reference
    recipe = dataclasses.replace(recipe, student=dataclasses.replace(recipe.student, serving=dataclasses.replace(
        recipe.student.serving, label_scoring="top_logprobs", concurrency=1, retry_backoff_s=0.5,
        retry_backoff_max_s=2.0, max_retries=3)))
    logs = [tmp_path / "a.log", tmp_path / "b.log", tmp_path / "a2.log"]
    models = _models(served[2])
    a = LlamaServer(models=models, n_threads=1, log_path=logs[0]).start()
    b = LlamaServer(models=models, n_threads=1, log_path=logs[1]).start()
    restarted = None
    try:
        backend = server_backend(recipe, "student", servers=[a.base_url, b.base_url])
        run, out = score_in_background(backend, recipe)
        wait_for_requests(a, 10, run)
        a.kill()
        killed_b = b.served()
        while b.served() < killed_b + 10 and run.is_alive():
            time.sleep(0.05)
        assert run.is_alive(), "the run finished before the killed replica could be restarted"
        restarted = LlamaServer(models=models, n_threads=1, port=a.port, log_path=logs[2]).start()
        run.join(600)
        assert not run.is_alive()
    finally:
        for s in (a, b, restarted):
            if s is not None:
                s.stop()
    assert_same_records(out["records"], served_records)
    events = [e["event"] for e in backend.replicas.events]
    assert "set aside" in events and "back" in events
    assert restarted.served() > 0          # the restarted replica was used again
    # nothing lost, nothing twice: every scored turn once, in order
    assert [r["turn_index"] for r in out["records"]] == [r["turn_index"] for r in served_records]


def test_adapters_push_with_model_cards_to_a_local_target(served, tmp_path):
    """The trained adapters pushed (to a local folder standing in for the Hub): cards with base_model,
    library_name peft, the teacher, the silver fingerprint and a model-index; no checkpoints."""
    from huggingface_hub import ModelCard

    from vista_distill.publish.hub import files_to_push, push

    _recipe, adapters, _ = served
    where = push(adapters, f"file://{tmp_path / 'repo'}")
    pushed = sorted(p.relative_to(where).as_posix() for p in Path(where).rglob("*") if p.is_file())
    assert pushed == files_to_push(adapters)
    assert not any("checkpoint-" in p or p.endswith(("optimizer.pt", "training_args.bin")) for p in pushed)
    for stage in STAGE_NAMES:
        assert f"{stage}/adapter_model.safetensors" in pushed and f"{stage}/adapter_config.json" in pushed
        card = ModelCard.load(Path(where) / stage / "README.md")
        assert card.data.library_name == "peft" and card.data.base_model
        assert card.data.vista_distill["silver_fingerprint"] and card.data.vista_distill["teacher"]
        metrics = {r.metric_name for r in card.data.eval_results}
        assert "final train loss" in metrics


def test_calibrate_fits_saves_loads_and_applies_in_process_and_served(served, tmp_path):
    """``vista-distill calibrate`` on the sample's human claims writes a named calibration beside the adapters;
    ``from_pretrained(calibration=NAME)`` loads it; a calibration's stage 3 prior gives the same labels in process and
    on llama.cpp, and changes a label; a missing name lists those there."""
    import shutil

    from vista_distill.backends.calibration import Calibration, available
    from vista_distill.backends.cheap_baselines import wording_category
    from vista_distill.backends.label_prior import LabelPrior
    from vista_distill.backends.server import server_backend
    from vista_distill.cli import main
    from vista_distill.data.io import read_conversations
    from vista_distill.pipeline.templates import get_template
    from vista_distill.scorer import VistaScorer
    from vista_distill.scoring.calibrate import dev_fingerprint
    from vista_distill.testing.llama_server import LlamaServer

    recipe, adapters, written = served
    folder = tmp_path / "ad"
    shutil.copytree(adapters, folder, ignore=shutil.ignore_patterns("checkpoint-*"))
    assert main(["calibrate", "--adapters", str(folder), "--dev", str(SAMPLE), "--calibration", "mine", "--folds", "3",
                 "--threads", "1", "student.dtype=float32"]) == 0
    cal = Calibration.load(folder, "mine")
    assert cal.fitted["dev"]["sha256"] == dev_fingerprint(read_conversations(SAMPLE))["sha256"]
    s2 = cal.fitted["stage2"]
    assert s2["claims"] == cal.fitted["dev"]["claims"] == 19 and s2["folds"] == 3
    assert {"as trained", "head refit", "head refit + threshold"} == set(s2["cross_validated"])
    assert (cal.stage2 is None) == (s2["chosen"] == "as trained")

    scorer = VistaScorer.from_pretrained(folder, calibration="mine", dtype="float32", threads=1)
    assert scorer.calibration == "mine"
    if cal.stage2 is not None:
        assert scorer.backend.heads["stage2"] == cal.stage2
    with pytest.raises(FileNotFoundError, match="no calibration 'other'.*there: mine"):
        VistaScorer.from_pretrained(folder, calibration="other", dtype="float32", threads=1)

    t = get_template("stage3", "compact")
    reqs = [stage_request(t, Fields(reference=ref, claim=c), labels=t.labels)
            for ref, c in (("Paris is the capital of France.", "Paris has a big zoo."),
                           ("The Nile flows north.", "I think the Nile is lovely."),
                           ("Everest is 8,849 m high.", "Everest is 9,000 m high."))]
    plain = scorer.backend.run(reqs)
    first = plain[0].meta["logprobs"]   # the label's log-likelihoods before any prior
    target = max((lab for lab in first if lab != plain[0].label), key=first.get)
    shift = {target: max(first.values()) - first[target] + 1.0}   # the calibration's prior replaces training's
    Calibration("shifted", None, LabelPrior(shift)).save(folder)
    assert available(folder) == ["mine", "shifted"]
    scorer.use_calibration("shifted")
    local = scorer.backend.run(reqs)
    with LlamaServer(models=_models(written), n_threads=1) as srv:
        served_scorer = VistaScorer(backend=server_backend(recipe, "student", servers=[srv.base_url], adapters=folder),
                                    calibration="shifted")
        got = served_scorer.backend.run(reqs)
        Calibration("ruled", rules={"stage3": {"rule": "wording rule"}}).save(folder)
        ruled = VistaScorer(backend=server_backend(recipe, "student", servers=[srv.base_url], adapters=folder),
                            calibration="ruled")
        asked = ruled.backend.stats["requests"]
        by_rule = ruled.backend.run(reqs)   # stage 3 by the wording rule: the server is not asked
        assert ruled.backend.stats["requests"] == asked
        record = ruled.score(read_conversations(SAMPLE)[:1]).records
    claims = ("Paris has a big zoo.", "I think the Nile is lovely.", "Everest is 9,000 m high.")
    assert [r.label for r in by_rule] == [wording_category(c) for c in claims]
    assert all(r.meta["answered_by"] == "wording rule" for r in by_rule)
    sent_on = [(r, c) for r in record for c in r["claims"] if c["stage3"] is not None]
    assert sent_on   # some claim reached stage 3, answered there by the rule
    for r, c in sent_on:
        assert c["category"] == wording_category(c["text"]) and r["answered_by"]["stage3"] == "wording rule"
    assert local[0].label == target != plain[0].label
    assert served_scorer.backend.priors["stage3"].shift == shift
    for g, lo in zip(got, local):
        moved = sorted(lp + shift.get(lab, 0.0) for lab, lp in lo.meta["logprobs"].items())
        if moved[-1] - moved[-2] > 0.3:
            assert g.label == lo.label
