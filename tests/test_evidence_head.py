"""backends/evidence_head.py: the claim's PMI with its reference, read from the same forward as the label, and the
head that weighs it with the adapter's margin (saved beside the adapter, applied by the in-process backend)."""

from __future__ import annotations

import math

import pytest

from vista_distill.backends.evidence_head import EvidenceHead, fit
from vista_distill.pipeline.protocol import Fields, Request
from vista_distill.pipeline.templates import get_template, stage2_input, stage_request

REF = "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed in 1889."
CLAIMS = ["The Eiffel Tower was completed in 1889.", "i love going to the beach in summer , it is so relaxing !"]


def _requests(reference: str = REF) -> list[Request]:
    t = get_template("stage2", "compact")
    return [stage_request(t, Fields(claim=c, reference=reference, background=("A fact.",)), labels=t.labels,
                          max_new_tokens=8) for c in CLAIMS]


def test_twin_is_the_same_request_with_an_empty_reference():
    t = get_template("stage2", "compact")
    req = stage_request(t, Fields(claim=CLAIMS[0], reference=REF, background=("A fact.",)), labels=t.labels)
    assert req.messages[-1]["content"] == stage2_input(["A fact."], REF, CLAIMS[0])
    assert req.twin[:-1] == req.messages[:-1] and req.twin[-1]["content"] == stage2_input(["A fact."], "", CLAIMS[0])
    assert stage_request(t, Fields(claim=CLAIMS[0], reference=REF)).twin == ()   # generation: no label to weigh
    assert stage_request(t, Fields(claim=" ", reference=REF), labels=t.labels).twin == ()   # no claim tokens
    assert stage_request(get_template("stage3", "compact"), Fields(claim=CLAIMS[0], reference=REF),
                         labels=("ABSTENTION",)).twin == ()


def test_fit_weighs_what_separates_and_saves(tmp_path):
    # the margin says nothing here, the PMI everything: the head leans on the PMI
    margins = [0.3, -0.2, 0.1, 0.0, 0.2, -0.1, 0.05, -0.3]
    pmis = [1.2, 1.0, 0.9, 1.5, -0.2, 0.0, 0.1, -0.4]
    verified = [True, True, True, True, False, False, False, False]
    head = fit({"margin": margins, "pmi": pmis}, verified, split="toy")
    assert head.w_pmi > 0 and head.fitted["accuracy"] == 1.0 and head.fitted["examples"] == 8
    assert head.fitted["adapter_alone_accuracy"] == 0.5 and head.w_overlap == 0.0
    assert head.p_verified(0.0, 1.0) > 0.5 > head.p_verified(0.0, -0.5)
    head.save(tmp_path)
    assert EvidenceHead.load(tmp_path) == head and EvidenceHead.load(tmp_path / "none") is None
    (tmp_path / "evidence_head.json").write_text("{}")
    with pytest.raises(ValueError, match="not an evidence head"):
        EvidenceHead.load(tmp_path)
    with pytest.raises(ValueError, match="both labels"):
        fit({"margin": [0.1], "pmi": [0.2]}, [True])
    with pytest.raises(ValueError, match="features must be among"):
        fit({"length": [0.1, 0.2]}, [True, False])


def test_fit_with_overlap_reports_each_signal_alone_and_loads_old_files(tmp_path):
    # overlap separates, PMI half, margin not at all: the head weighs overlap most and says what each scores alone
    overlap = [0.9, 0.8, 0.7, 0.6, 0.2, 0.1, 0.3, 0.0]
    pmis = [0.5, -0.1, 0.4, -0.2, 0.3, -0.3, 0.2, -0.4]
    margins = [0.1, -0.1, 0.1, -0.1, 0.1, -0.1, 0.1, -0.1]
    verified = [True] * 4 + [False] * 4
    head = fit({"margin": margins, "pmi": pmis, "overlap": overlap}, verified)
    assert head.fitted["features"] == ["margin", "pmi", "overlap"] and head.fitted["accuracy"] == 1.0
    assert head.fitted["overlap_rule_accuracy"] == 1.0 and head.fitted["adapter_alone_accuracy"] == 0.5
    assert head.w_overlap > abs(head.w_margin) and head.p_verified(0.0, 0.0, 0.9) > 0.5 > head.p_verified(0.0, 0.0, 0.1)
    # a head saved before the overlap weight existed loads with it at 0
    (tmp_path / "evidence_head.json").write_text('{"w_margin": 1.0, "w_pmi": 2.0, "bias": 0.5}')
    old = EvidenceHead.load(tmp_path)
    assert old.w_overlap == 0.0 and old.p_verified(0.0, 0.0, 1.0) == old.p_verified(0.0, 0.0)


def test_backend_reads_the_claim_logprob_and_applies_the_head(tmp_path):
    import torch
    from helpers import identity_adapters

    from vista_distill.backends.model_loading import encode_prompt
    from vista_distill.backends.transformers import TransformersBackend

    identity_adapters(tmp_path)
    feats = TransformersBackend(adapters={"stage2": tmp_path / "stage2"}, dtype="float32", batch_size=4,
                                evidence_features=True)
    out = feats.run(_requests())
    ev = [o.meta["evidence"] for o in out]
    # the claim's mean log-probability, computed once more over the whole prompt without the prefix cache
    for req, claim in zip(_requests(), CLAIMS):
        prefix, suffix = encode_prompt(feats.tokenizer, req.messages, feats.chat_template_kwargs, split_prefix=False)
        ids = prefix + suffix
        with torch.no_grad(), feats._adapter_context("stage2"):
            lp = feats.model(torch.tensor([ids])).logits.float().log_softmax(-1)[0]
        cid = feats.tokenizer(claim, add_special_tokens=False)["input_ids"]
        s = max(i for i in range(len(ids)) if ids[i:i + len(cid)] == cid)
        direct = sum(lp[p - 1, ids[p]].item() for p in range(s, s + len(cid))) / len(cid)
        assert feats._score_labels("stage2", (), [ids], req.labels, [claim])[0].claim_logprob == \
            pytest.approx(direct, abs=1e-4)
    # the reference makes the claim it states more likely than the one it does not
    assert ev[0]["pmi"] > ev[1]["pmi"]
    margin = [math.log(o.probs["VERIFIED"]) - math.log(o.probs["UNVERIFIABLE"]) for o in out]
    assert [e["margin"] for e in ev] == pytest.approx(margin, abs=1e-4)

    head = EvidenceHead(w_margin=0.5, w_pmi=2.0, bias=-1.0)
    head.save(tmp_path / "stage2")
    scored = TransformersBackend(adapters={"stage2": tmp_path / "stage2"}, dtype="float32", batch_size=4).run(
        _requests()
    )
    for o, e in zip(scored, ev):
        p = 1 / (1 + math.exp(-(0.5 * e["margin"] + 2.0 * e["pmi"] - 1.0)))
        assert o.probs["VERIFIED"] == pytest.approx(p, abs=1e-4) and o.meta["evidence"]["head"] is True
        assert o.label == ("VERIFIED" if p > 0.5 else "UNVERIFIABLE")
    # the overlap feature is the claim's content-word share in the reference, weighed when the head has a weight
    assert ev[0]["overlap"] == 1.0 and ev[1]["overlap"] == 0.0
    EvidenceHead(w_margin=0.0, w_pmi=0.0, bias=-2.0, w_overlap=4.0).save(tmp_path / "stage2")
    by_overlap = TransformersBackend(adapters={"stage2": tmp_path / "stage2"}, dtype="float32", batch_size=4).run(
        _requests())
    assert [o.label for o in by_overlap] == ["VERIFIED", "UNVERIFIABLE"]
    # a stage without a head, and requests without a reference layout, are scored as before
    plain = TransformersBackend(dtype="float32", batch_size=4).run(_requests())
    assert all("evidence" not in o.meta for o in plain)


def test_fit_after_training_reads_the_silver_validation_split(tmp_path, tiny_smollm2):
    """The fit reads the silver validation split through the adapter (the tiny random SmolLM2's: what is read and
    saved is tested, not the weights' values)."""
    from helpers import FAITHDIAL, identity_adapters, write_recipe

    from vista_distill.config import load_recipe
    from vista_distill.distill.run import run_distill
    from vista_distill.train.evidence_fit import fit_evidence_head

    path = write_recipe(tmp_path / "r.yaml", tmp_path / "silver", distill={"validation_fraction": 0.5},
                        data={"train": [{"benchmark": "file", "source": str(FAITHDIAL), "n": 90}]},
                        student={"dtype": "float32", "model": str(tiny_smollm2)})
    recipe = load_recipe(path)
    run_distill(recipe, progress=False)
    identity_adapters(tmp_path / "ad", tiny_smollm2)
    info = fit_evidence_head(recipe, tmp_path / "ad" / "stage2")
    head = EvidenceHead.load(tmp_path / "ad" / "stage2")
    assert info["split"] == "silver validation split" and info["examples"] >= 40 and info["skipped"] == 0
    assert (head.w_margin, head.w_pmi, head.w_overlap, head.bias) == (info["w_margin"], info["w_pmi"],
                                                                       info["w_overlap"], info["bias"])
    assert info["features"] == ["margin", "pmi", "overlap"] and 0 <= info["overlap_rule_accuracy"] <= 1
    assert 0 <= info["accuracy"] <= 1 and 0 <= info["adapter_alone_accuracy"] <= 1
