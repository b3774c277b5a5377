"""The local transformers backend on the embedded SmolLM2-135M: batching, label scoring, adapters, 4-bit."""

from __future__ import annotations

import copy
import dataclasses
import warnings

import pytest
import torch
from helpers import assert_same_records

from vista_distill.data.io import read_conversations
from vista_distill.pipeline.engine import EngineConfig, run_programs, vista_program
from vista_distill.pipeline.protocol import Fields, Request
from vista_distill.pipeline.templates import (
    build_messages,
    get_template,
    stage2_input,
    stage_request,
)

REF = ("The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It is 330 metres tall and was "
       "completed in 1889.")
CLAIMS = ["The Eiffel Tower is in Paris.", "The Eiffel Tower was built in 1999.", "I love towers."]


def _stage2(style="fewshot", claim=CLAIMS[0]):
    t = get_template("stage2", style)
    return stage_request(t, Fields(reference=REF, claim=claim), labels=t.labels)


def test_label_scoring_returns_a_valid_label_with_probabilities(embedded_backend):
    responses = embedded_backend.run([_stage2(claim=c) for c in CLAIMS])
    for r in responses:
        assert r.label in ("VERIFIED", "UNVERIFIABLE")
        assert sum(r.probs.values()) == pytest.approx(1.0, abs=1e-5)
        assert r.label == max(r.probs, key=r.probs.get)
        assert r.prompt_tokens > 500  # few-shot prompt
    # Different claims give different probabilities: the target message really reaches the model.
    assert len({round(r.probs["VERIFIED"], 6) for r in responses}) == 3


def test_label_scoring_matches_full_sequence_likelihood(embedded_backend):
    """The prefix-cache + continuation path gives the same label log-likelihood as one plain forward pass."""
    from vista_distill.pipeline.render import render

    b = embedded_backend
    t = get_template("stage3", "compact")
    req = stage_request(t, Fields(background=tuple(["A fact."]), reference=REF, claim=CLAIMS[1]), labels=t.labels)
    (resp,) = b.run([req])
    prompt = b.tokenizer(render(b.tokenizer, list(req.messages)), add_special_tokens=False)["input_ids"]
    for label in t.labels:
        lab = b.tokenizer(label, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([prompt + lab])
        with torch.inference_mode():
            logp = torch.log_softmax(b.model(ids).logits[0, len(prompt) - 1: -1].float(), -1)
        expected = logp[torch.arange(len(lab)), torch.tensor(lab)].sum().item()
        assert resp.meta["logprobs"][label] == pytest.approx(expected, abs=2e-3)


@pytest.mark.filterwarnings("error:.*past_key_values:FutureWarning")   # the Cache API transformers keeps
def test_padded_batch_label_scoring_matches_full_sequence_likelihood(embedded_backend):
    """Several prompts of different lengths in one batch (left padding, the shared few-shot prefix cached,
    masked grouped-query attention without key/value copies, every label's continuation packed into one
    forward): each label's log-likelihood equals one plain forward over that prompt alone."""
    from vista_distill.backends.transformers import GQA_SDPA
    from vista_distill.pipeline.render import render

    b = embedded_backend
    assert b.model.config._attn_implementation == GQA_SDPA
    t = get_template("stage3", "fewshot")
    reqs = [stage_request(t, Fields(background=tuple(bg), reference=REF, claim=c), labels=t.labels)
            for bg, c in ((["A fact."], CLAIMS[1]), ([], CLAIMS[2]),
                          (["The tower is painted brown.", "It has three levels."], CLAIMS[0]))]
    assert len({len(b._encode(r)[1]) for r in reqs}) == 3   # three suffix lengths: the batch is padded
    assert any(len(b.tokenizer(lab, add_special_tokens=False)["input_ids"]) > 2 for lab in t.labels)
    answers = b.run(reqs)
    longest = max(t.labels, key=lambda lab: len(b.tokenizer(lab, add_special_tokens=False)["input_ids"]))
    for req, resp in zip(reqs, answers):
        prompt = b.tokenizer(render(b.tokenizer, list(req.messages)), add_special_tokens=False)["input_ids"]
        for label in {resp.label, longest}:   # the chosen label and the longest continuation (a plain forward each)
            lab = b.tokenizer(label, add_special_tokens=False)["input_ids"]
            with torch.inference_mode():
                logp = torch.log_softmax(
                    b.model(torch.tensor([prompt + lab])).logits[0, len(prompt) - 1 : -1].float(), -1
                )
            expected = logp[torch.arange(len(lab)), torch.tensor(lab)].sum().item()
            assert resp.meta["logprobs"][label] == pytest.approx(expected, abs=2e-3)


def test_label_batches_stop_at_the_padded_token_budget_with_the_same_answers(embedded_backend):
    """prefill_tokens: a label-scoring batch takes rows (shortest first) while rows x its longest prompt stay within
    the budget (one row at least, batch_size at most); the answers are those of whole batch_size batches."""
    from vista_distill.backends.forward_paths import batches

    b = embedded_backend
    reqs = [_stage2("compact", f"{c} ({k})") for k in range(3) for c in CLAIMS]
    lengths = sorted(len(b._encode(r)[1]) for r in reqs)
    budget = 3 * lengths[-1]
    cut = batches(list(range(len(reqs))), lengths, 8, budget)
    assert [i for c in cut for i in c] == list(range(len(reqs)))
    assert all(len(c) <= 8 and len(c) * lengths[c[-1]] <= budget for c in cut)
    assert 1 < len(cut) < len(reqs)   # cut, and not one row a batch
    assert batches(list(range(len(reqs))), lengths, 8, None) == [list(range(8)), [8]]
    assert batches([0, 1], lengths[:2], 8, 1) == [[0], [1]]   # below any prompt: one row a batch
    saved = b.prefill_tokens
    try:
        b.prefill_tokens = budget
        answers = b.run(reqs)
        b.prefill_tokens = None
        whole = b.run(reqs)
    finally:
        b.prefill_tokens = saved
    for x, y in zip(answers, whole):
        assert x.label == y.label
        for lab in x.meta["logprobs"]:
            assert x.meta["logprobs"][lab] == pytest.approx(y.meta["logprobs"][lab], abs=1e-4)
    with pytest.raises(ValueError, match="prefill_tokens"):
        type(b)(dtype="float32", prefill_tokens=0)


BF16_MARGIN_BOUND = 0.3   # nats; bf16 hidden states move a label margin by up to 0.13 here (2-core AMD EPYC, 20 claims)


def test_bf16_label_scoring_reads_the_head_in_float32(embedded_backend):
    """In bf16 the LM head's logits are spaced 0.06-0.125 apart at their magnitudes, so close labels were decided
    by rounding: the head now runs in float32 on the scored positions. A bf16 run's label margin stays within
    BF16_MARGIN_BOUND of the float32 run's, and where the float32 margin exceeds it, the label is the same."""
    from vista_distill.backends.transformers import TransformersBackend

    bf16 = TransformersBackend(dtype="bfloat16", batch_size=8)
    reqs = [_stage2("compact", c) for c in (*CLAIMS, "The tower is made of wood.")]
    seen = []
    hook = bf16.model.register_forward_hook(lambda m, a, out: seen.append(out.logits.dtype))
    try:
        with torch.profiler.profile(record_shapes=True) as prof:
            low = bf16.run(reqs)
    finally:
        hook.remove()
    assert torch.float32 in seen   # the logits the labels are read from (the shared prefix's pass reads none)
    # the head's weight is never copied once per row (a 3D slice of hidden states made linear do that: 0.6 s a
    # batch) and the bf16 head does not run beside the float32 one: no product has the vocabulary as last dim
    vocab = bf16.model.get_output_embeddings().weight.shape[0]
    head_products = [(e.name, s) for e in prof.events() if e.name in ("aten::mm", "aten::bmm", "aten::copy_")
                     for s in e.input_shapes if len(s) >= 2 and s[-1] == vocab]
    assert all(name == "aten::mm" and len(s) == 2 for name, s in head_products), head_products
    assert len(head_products) == len(seen)   # one head product per forward (the prefix fill too)
    assert bf16.model.get_output_embeddings().weight.dtype == torch.bfloat16   # the model itself stays bf16
    high = embedded_backend.run(reqs)
    def margin(r):
        return r.meta["logprobs"]["VERIFIED"] - r.meta["logprobs"]["UNVERIFIABLE"]
    for lo, hi in zip(low, high):
        assert abs(margin(lo) - margin(hi)) <= BF16_MARGIN_BOUND
        if abs(margin(hi)) > BF16_MARGIN_BOUND:
            assert lo.label == hi.label
    assert len({round(margin(r), 6) for r in low}) == len(reqs)   # no ties from rounded logits


def test_gqa_attention_equals_transformers_sdpa_on_a_padded_batch(embedded_backend):
    from vista_distill.backends.transformers import GQA_SDPA

    model = embedded_backend.model
    ids = torch.randint(100, 40000, (3, 40))
    mask = torch.ones_like(ids)
    mask[0, :7], mask[2, :19] = 0, 0
    with torch.inference_mode():
        ours = model(input_ids=ids, attention_mask=mask).logits
        model.set_attn_implementation("sdpa")
        try:
            theirs = model(input_ids=ids, attention_mask=mask).logits
        finally:
            model.set_attn_implementation(GQA_SDPA)
    keep = mask.bool()
    assert torch.allclose(ours[keep], theirs[keep], atol=1e-4)


def test_a_line_that_keeps_repeating_a_sentence_stops_generation(embedded_backend):
    """A small model that loops inside one line ("I like cars. I like cars. ...") is stopped at the third
    repetition instead of running to its budget (and then to a retry with twice the budget), and one that counts
    through a template ("The first claim is ...", "The second claim is ...") at its second line, and one that says a
    phrase over and over without ending a sentence ("the scene in the scene in ...") within a few tokens of its
    fourth time; a list of distinct claims, claims that differ in one word other than an ordinal, a long line, or a
    sentence said twice, is not stopped."""
    from vista_distill.backends.transformers import RepeatedLineStop

    b = embedded_backend
    prompt = b.tokenizer("Claims:\n", add_special_tokens=False)["input_ids"]

    def first_stop(text: str) -> str | None:
        ids = prompt + b.tokenizer(text, add_special_tokens=False)["input_ids"]
        stop = RepeatedLineStop(b, len(prompt))
        for end in range(len(prompt) + 1, len(ids) + 1):
            if bool(stop(torch.tensor([ids[:end]]), None)[0]):
                return b.tokenizer.decode(ids[len(prompt):end])
        return None

    loop = ("1. The car is red.\n2. I have always liked the Ferrari F40. I have always liked the Ferrari F40. "
            "I have always liked the Ferrari F40. I have always liked")
    assert first_stop(loop) == loop[: loop.rindex(" I have always liked")]
    assert first_stop("1. The car is red.\n2. It is fast. It is fast.\n3. It was built in 1987.\n") is None
    assert first_stop("1. The car is red.\n2. The car is fast.\n1. The car is red.\n") is not None  # repeated line
    phrase = "1. The car is red.\n2. The scene in" + " the scene in" * 30
    stopped = first_stop(phrase)
    assert stopped is not None and len(stopped) < len(phrase) - 100 and stopped.lower().count("the scene in") >= 4
    assert first_stop("1. It was built in (1.1" + ".1" * 60) is not None
    fine = "1. The Eiffel Tower, built between 1887 and 1889 by Gustave Eiffel's company, is 330 metres tall and " \
           "stands on the Champ de Mars in Paris, where it was the world's tallest structure until 1930"
    assert first_stop(fine) is None
    counting = "1. The first claim is a single claim.\n2. The second claim is a single claim.\n3. The third"
    assert first_stop(counting) == counting[: counting.index("3.")]   # a counting template repeats its line
    assert first_stop("1. The Sun sets due west on the spring equinox.\n2. The Sun sets due west on the fall "
                      "equinox.\n3. It is the second planet.\n") is None


def test_after_a_list_marker_a_claim_must_start_not_another_digit(embedded_backend):
    """Numbered lists (stage 1): right after "1." or "12." at a line start, digits, periods and line breaks
    are banned (a student unsure how a claim starts otherwise writes "1.1.1.1..." to its budget); anywhere
    else in the line, and after a sentence's own period, nothing is banned."""
    from vista_distill.backends.transformers import ListMarkerFormat

    b = embedded_backend
    tok = b.tokenizer
    prompt = tok("Claims:\n", add_special_tokens=False)["input_ids"]
    vocab = len(tok)

    def banned(text: str) -> set[str]:
        ids = torch.tensor([prompt + tok(text, add_special_tokens=False)["input_ids"]])
        scores = ListMarkerFormat(b, len(prompt))(ids, torch.zeros(1, vocab))
        return {tok.decode([i]) for i in torch.nonzero(torch.isinf(scores[0])).flatten().tolist()}

    for marker in ("1.", "1. The car is red.\n12."):
        out = banned(marker)
        assert {"1", "0", ".", "\n"} <= out and not {" The", " It", " "} & out
    assert banned("1. The car is red.") == set() and banned("1. It was built in 1987.") == set()
    assert banned("The value is 3.") == set()   # a sentence ending in a number is not a list marker
    # on the real model: greedy decoding after the marker goes on with a word
    ids = torch.tensor([prompt + tok("1.", add_special_tokens=False)["input_ids"]])
    with torch.inference_mode():
        logits = b.model(ids).logits[:, -1].float()
    best = int(ListMarkerFormat(b, len(prompt))(ids, logits.clone())[0].argmax())
    assert not tok.decode([best])[:1].isdigit() and tok.decode([best]) not in (".", "\n")


def _alone_without_prefix_cache(backend, reqs):
    """Each request on its own through Hugging Face's generate: no shared prefix cache, no padding, no slots."""
    backend.use_prefix_cache = False
    try:
        return [backend.run([r])[0] for r in reqs]
    finally:
        backend.use_prefix_cache = True


@pytest.mark.filterwarnings("error:.*past_key_values:FutureWarning")   # the Cache API transformers keeps
def test_batched_generation_equals_one_at_a_time(embedded_backend):
    t = get_template("stage1")
    hist = [("user", "What do you know about Paris?")]
    targets = ["The Eiffel Tower is in Paris and it is 330 metres tall.", "I love Paris.",
               "Paris is the capital of France, and the Louvre is the most visited museum in the world."]
    reqs = [stage_request(t, Fields(history=tuple(hist), target=x), max_new_tokens=24) for x in targets]
    batched = embedded_backend.run(reqs)
    single = [embedded_backend.run([r])[0] for r in reqs]
    assert [r.text for r in batched] == [r.text for r in single]
    assert all(r.text for r in batched) and len({r.text for r in batched}) == 3
    plain = _alone_without_prefix_cache(embedded_backend, reqs)
    assert [r.text for r in plain] == [r.text for r in batched]
    # the batched runs above decoded into a preallocated cache holding the shared prefix (no per-token cat)
    prefix, suffix = embedded_backend._encode(reqs[0])
    _, _, cache = embedded_backend._batch_inputs("stage1", tuple(prefix), [suffix, suffix], max_new_tokens=24)
    assert type(cache).__name__ == "StaticCache" and cache.get_seq_length() == len(prefix)


def _six_list_requests() -> list[Request]:
    """Six stage-1 requests under one system prompt whose greedy answers end at different steps (end of turn, a
    repeated line, the 40-token budget), with stage 1's stop rules."""
    system = "You are a helpful assistant. Answer briefly."
    questions = ["Say hello.", "List ten French cities, one per line.", "What is 2+2?",
                 "Write a short poem about the sea.", "Name one colour.", "List the days of the week, one per line."]
    return [Request("stage1", ({"role": "system", "content": system}, {"role": "user", "content": q}),
                    max_new_tokens=40, stop_on_repeat=True) for q in questions]


def test_finished_rows_hand_their_slot_to_the_next_request(embedded_backend):
    """Six requests through two slots, with stage 1's stop rules: a row that ends (end of turn, a repeated
    line, its budget) hands its slot to a waiting request, whose prompt is written into that row of the shared
    cache. Every text and finish reason is what the request gives alone through Hugging Face's generate (no
    prefix cache, no padding), and no decode step computes a finished row: the rows the steps ran are exactly
    the tokens generated after each request's first."""
    b = embedded_backend
    reqs = _six_list_requests()
    before = dict(b.stats)
    b.batch_size = 2
    try:
        slotted = b.run(reqs)
    finally:
        b.batch_size = 16
    counts = {k: b.stats[k] - before[k] for k in ("decode_steps", "decode_rows", "refills")}
    alone = _alone_without_prefix_cache(b, reqs)
    assert [r.text for r in slotted] == [r.text for r in alone]
    reasons = [r.meta["finish_reason"] for r in slotted]
    assert reasons == [r.meta["finish_reason"] for r in alone]
    assert {"stop", "length"} <= set(reasons)   # rows of different lengths: slots free at different steps
    assert counts["refills"] >= 2
    assert counts["decode_rows"] == sum(r.completion_tokens for r in slotted) - len(reqs)


def test_rows_read_only_their_own_columns_prompts_run_ahead_and_idle_rows_are_shed(embedded_backend, monkeypatch):
    """Six requests through three slots, decoded twice: each prompt run alone as its row frees, and every prompt
    run ahead in one batch. Both give each request's tokens alone through generate. A decode step's mask reaches
    exactly its longest live row (a row's tokens sit at the columns of their positions, so no step reads the
    columns of rows that came before), never past the longest prompt plus the budget, and once no request waits
    the steps run fewer rows."""
    from vista_distill.backends import slot_decoding
    from vista_distill.backends.list_generation import ListMarkerFormat, RepeatedLineStop

    b = embedded_backend
    reqs = _six_list_requests()
    encoded = [b._encode(r) for r in reqs]
    prefix = tuple(encoded[0][0])
    suffixes = [s for _, s in encoded]
    shared = b._prefix_cache("stage1", prefix)
    calls: list[tuple[int, int, int, int]] = []   # rows, query tokens, mask width, largest position

    def record(_module, _args, kw):
        calls.append((*kw["input_ids"].shape, kw["attention_mask"].shape[-1], int(kw["position_ids"].max())))

    def decode(prefill_tokens: int) -> tuple[list[str], list, dict]:
        monkeypatch.setattr(slot_decoding, "PREFILL_TOKENS", prefill_tokens)
        calls.clear()
        stats: dict = {}
        hook = b.model.register_forward_pre_hook(record, with_kwargs=True)
        try:
            with torch.inference_mode(), b._shared(prefix):
                out = slot_decoding.decode_in_slots(
                    slot_decoding.SharedPrefix(b.model, b.cache_kw, shared, len(prefix)), suffixes,
                    slot_decoding.Greedy(40, b.eos_ids, b.tokenizer.pad_token_id, ban=ListMarkerFormat(b, 0).apply,
                                         stop=RepeatedLineStop(b, 0).row_done), 3, stats=stats)
        finally:
            hook.remove()
        return [b.tokenizer.decode(d.tokens, skip_special_tokens=True).strip() for d in out], list(calls), stats

    each, each_calls, each_stats = decode(0)
    ahead, ahead_calls, ahead_stats = decode(10**6)
    assert each == ahead == [r.text for r in _alone_without_prefix_cache(b, reqs)]
    blocks = [c for c in each_calls if c[1] > 1]
    assert len(blocks) == each_stats["refills"] >= 3 and blocks[0][0] == 3   # then one prompt per freed row
    assert [c[0] for c in ahead_calls if c[1] > 1] == [6]                     # every prompt in one batch
    for calls_ in (each_calls, ahead_calls):
        steps = [c for c in calls_ if c[1] == 1]
        assert all(width == top + 1 for _, _, width, top in steps)
        assert max(width for *_, width, _ in steps) <= len(prefix) + max(map(len, suffixes)) + 40
        rows = [c[0] for c in steps]
        assert rows[0] == 3 and min(rows) < 3 and rows == sorted(rows, reverse=True)
    assert each_stats["decode_rows"] == ahead_stats["decode_rows"]
    assert each_stats["decode_s"] > 0 and each_stats["prompt_s"] > 0


def test_decoding_over_the_whole_cache_width_gives_the_same_tokens(embedded_backend):
    """The GPU's decode step (a mask as wide as the cache, so every decode step has one shape and is replayed
    from a CUDA graph there) gives the tokens of the CPU's narrow-mask step, refills included, through
    transformers' SDPA attention, the one a GPU runs."""
    from vista_distill.backends.list_generation import ListMarkerFormat, RepeatedLineStop
    from vista_distill.backends.slot_decoding import Greedy, SharedPrefix, decode_in_slots

    b = embedded_backend
    system = "You are a helpful assistant. Answer briefly."
    questions = ["Say hello.", "List ten French cities, one per line.", "What is 2+2?", "Name one colour.",
                 "List the days of the week, one per line."]
    encoded = [b._encode(Request("stage1", ({"role": "system", "content": system}, {"role": "user", "content": q})))
               for q in questions]
    prefix = tuple(encoded[0][0])
    suffixes = [s for _, s in encoded]
    shared = b._prefix_cache("stage1", prefix)

    def decode(full_mask: bool) -> tuple[list, dict]:
        stats: dict = {}
        with torch.inference_mode(), b._shared(prefix):
            out = decode_in_slots(
                SharedPrefix(b.model, b.cache_kw, shared, len(prefix)),
                suffixes,
                Greedy(32, b.eos_ids, b.tokenizer.pad_token_id, ban=ListMarkerFormat(b, 0).apply,
                       stop=RepeatedLineStop(b, 0).row_done),
                2,
                stats=stats,
                full_mask=full_mask,
                graphs=False,
            )
        return [(d.tokens, d.reason) for d in out], stats

    narrow, stats = decode(False)
    assert stats["refills"] >= 2 and len({r for _, r in narrow}) >= 2
    attention = b.model.config._attn_implementation
    b.model.config._attn_implementation = "sdpa"
    try:
        assert decode(True)[0] == narrow
    finally:
        b.model.config._attn_implementation = attention


def test_pipeline_batched_equals_one_at_a_time_on_real_model(embedded_backend, sample_path):
    convs = read_conversations(sample_path)[1:3]
    # Compact prompts keep this fp32 check cheap; the few-shot prefix path is covered above.
    cfg = EngineConfig(style="compact", max_new_tokens={"stage1": 40, "stage2": 8, "stage3": 32, "stage4": 32})
    batched = run_programs([vista_program(c, cfg) for c in copy.deepcopy(convs)], embedded_backend, batched=True)
    single = run_programs([vista_program(c, cfg) for c in copy.deepcopy(convs)], embedded_backend, batched=False)
    # Claims, labels, categories, raw outputs and verdicts are identical; probabilities agree up to
    # float noise from different batch shapes (BLAS blocking), hence approx.
    assert_same_records([[t.to_dict() for t in c] for c in batched], [[t.to_dict() for t in c] for c in single])
    turns = [t for c in batched for t in c]
    assert all(t.verdicts["safe"] in ("faithful", "hallucinated", "unknown") for t in turns)
    assert any(t.claims for t in turns)


def _random_lora(base_path, out_dir, seed):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from vista_distill.backends.model_loading import quiet_peft_wrap

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32)
    cfg = LoraConfig(r=8, lora_alpha=64, target_modules="all-linear", init_lora_weights=False)
    with quiet_peft_wrap():
        get_peft_model(base, cfg).save_pretrained(out_dir)


@pytest.fixture(scope="module")
def adapters_dir(tmp_path_factory, tiny_smollm2):
    """Random LoRA adapters of the three stages on the tiny random SmolLM2: the tests of adapter mechanics (priors,
    switching, merging) compare the backend with itself, not with what a trained model says."""
    root = tmp_path_factory.mktemp("adapters")
    for seed, stage in enumerate(("stage1", "stage2", "stage3")):
        _random_lora(tiny_smollm2, root / stage, seed)
    return root


def test_a_label_prior_beside_an_adapter_moves_its_labels_not_its_log_probabilities(adapters_dir, tmp_path,
                                                                                    tiny_smollm2):
    """``label_prior.json`` beside a stage adapter (backends/label_prior.py): the label is the argmax of the adapter's
    log-probabilities plus the shift, the recorded log-probabilities stay the adapter's own."""
    import shutil

    from vista_distill.backends.label_prior import LabelPrior
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.pipeline.templates import get_template

    t = get_template("stage3", "compact")
    reqs = [
        stage_request(t, Fields(reference="Paris is the capital of France.", claim=c), labels=t.labels)
        for c in ("Paris has a big zoo.", "I think Paris is lovely.", "Paris is in Spain.")
    ]
    tiny = str(tiny_smollm2)
    plain = TransformersBackend(tiny, adapters={"stage3": adapters_dir / "stage3"}, dtype="float32", threads=1)
    plain = plain.run(reqs)
    # a shift that makes the second most likely label of the first request win there
    first = plain[0].meta["logprobs"]
    top, second = sorted(first, key=first.get, reverse=True)[:2]
    shift = {second: first[top] - first[second] + 0.5}
    folder = tmp_path / "stage3"
    shutil.copytree(adapters_dir / "stage3", folder)
    LabelPrior(shift, {"applied": True}).save(folder)
    moved = TransformersBackend(tiny, adapters={"stage3": folder}, dtype="float32", threads=1).run(reqs)
    assert moved[0].label == second != plain[0].label
    for p, m in zip(plain, moved):
        assert m.meta["logprobs"] == pytest.approx(p.meta["logprobs"], abs=1e-4)
        shifted = {lab: lp + shift.get(lab, 0.0) for lab, lp in p.meta["logprobs"].items()}
        assert m.label == max(shifted, key=shifted.get)


@pytest.mark.filterwarnings("error:.*past_key_values:FutureWarning")   # the Cache API transformers keeps
def test_stage_adapters_switch_without_reloading(adapters_dir, tiny_smollm2):
    from vista_distill.backends.transformers import TransformersBackend

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        b = TransformersBackend(str(tiny_smollm2), adapters=adapters_dir, dtype="float32", merge_adapters=False)
    # PEFT's read of the deprecated `is_gradient_checkpointing` says nothing a user can act on: not shown
    assert not [w for w in seen if "is_gradient_checkpointing" in str(w.message)]
    assert sorted(b.model.peft_config) == ["stage1", "stage2", "stage3"]
    model_id = id(b.model)
    t = get_template("stage2", "compact")
    msgs = tuple(build_messages(t, stage2_input([], REF, CLAIMS[0])))
    probs = {}
    for stage in ("stage1", "stage2", "stage3", "stage4"):  # stage4 has no adapter: bare base model
        (r,) = b.run([Request(stage, msgs, labels=t.labels)])
        probs[stage] = r.meta["logprobs"]["VERIFIED"]
    assert len({round(v, 4) for v in probs.values()}) == 4
    assert id(b.model) == model_id
    (base,) = TransformersBackend(str(tiny_smollm2), dtype="float32").run([Request("stage4", msgs, labels=t.labels)])
    assert base.meta["logprobs"]["VERIFIED"] == pytest.approx(probs["stage4"], abs=1e-4)
    # Switching back reproduces the first result: adapters are switched, not stacked or reloaded.
    (again,) = b.run([Request("stage1", msgs, labels=t.labels)])
    assert again.meta["logprobs"]["VERIFIED"] == pytest.approx(probs["stage1"], abs=1e-4)
    # generation through PEFT takes the cache by the keyword this transformers keeps
    gen = stage_request(get_template("stage1"), Fields(history=(("user", "Hi"),), target="Paris."), max_new_tokens=8)
    assert b.run([gen])[0].completion_tokens > 0


def test_merged_stage_adapters_decode_and_label_as_peft_does(adapters_dir, tiny_smollm2):
    """float32 (``merge_adapters="auto"``): each stage's LoRA merged into its own copy of the weights it adapts
    (backends/adapters.MergedStages) decodes the same stage-1 tokens in slots and scores the same labels as PEFT's
    wrapped layers, the stages switching back and forth on one plain model; a stage without an adapter runs the base."""
    from vista_distill.backends.adapters import merged_stages
    from vista_distill.backends.transformers import TransformersBackend

    tiny = str(tiny_smollm2)
    peft = TransformersBackend(tiny, adapters=adapters_dir, dtype="float32", batch_size=2, merge_adapters=False)
    merged = TransformersBackend(tiny, adapters=adapters_dir, dtype="float32", batch_size=2)
    assert peft.merged is None and merged.merged is not None and merged.describe()["merged_adapters"]
    assert not any("lora_" in name for name, _ in merged.model.named_parameters())
    assert merged_stages(peft.model, "auto", torch.bfloat16) is None   # half precision: only when asked
    t1 = get_template("stage1", "compact")
    hist = [("user", "What do you know about Paris?")]
    gen = [stage_request(t1, Fields(history=tuple(hist), target=x), max_new_tokens=20, stop_on_repeat=True)
           for x in ("The Eiffel Tower is in Paris and it is 330 metres tall.", "I love Paris.",
                     "Paris is the capital of France, and the Louvre is the most visited museum in the world.")]
    t3 = get_template("stage3", "compact")
    reqs = [*gen, _stage2("compact"), _stage2("compact", CLAIMS[1]), _stage2("fewshot", CLAIMS[2]),
            stage_request(t3, Fields(reference=REF, claim=CLAIMS[1]), labels=t3.labels),
            dataclasses.replace(_stage2("compact"), stage="stage4")]
    for order in (reqs, reqs[::-1]):
        want, got = peft.run(list(order)), merged.run(list(order))
        assert [r.text for r in got] == [r.text for r in want]
        lists = [r.text for r, q in zip(got, order) if q.stage == "stage1"]
        assert all(lists) and len(set(lists)) == 3
        for w, g in zip(want, got):
            assert g.label == w.label
            assert g.meta.get("logprobs", {}) == pytest.approx(w.meta.get("logprobs", {}), rel=1e-5, abs=1e-4)
    assert merged.stats["decode_steps"] > 0
    # the stage-4 request (no adapter) got the base model: its log-probabilities differ from stage 2's
    base = merged.run([dataclasses.replace(_stage2("compact"), stage="stage4")])[0].meta["logprobs"]
    assert base != pytest.approx(merged.run([_stage2("compact")])[0].meta["logprobs"], abs=1e-3)


def test_missing_adapters_folder_is_a_clear_error(tmp_path):
    from vista_distill.backends.transformers import find_stage_adapters

    with pytest.raises(FileNotFoundError, match="no stage adapters found"):
        find_stage_adapters(tmp_path)
    (tmp_path / "stage2").mkdir()
    with pytest.raises(FileNotFoundError, match=r"stage2.*not a PEFT adapter"):
        find_stage_adapters({"stage2": tmp_path / "stage2"})


def test_four_bit_loading_through_bitsandbytes(embedded_backend):
    pytest.importorskip("bitsandbytes")
    from vista_distill.backends.transformers import TransformersBackend

    b = TransformersBackend(load_in_4bit=True, dtype="bfloat16")
    assert any("4bit" in type(m).__name__ for m in b.model.modules())
    (r,) = b.run([_stage2("compact")])
    assert r.label in ("VERIFIED", "UNVERIFIABLE")


def test_short_bf16_queries_attend_as_transformers_sdpa_does(monkeypatch, tiny_smollm2):
    """Decode steps and label continuations in bf16 (1-4 query tokens over a long padded cache) take the grouped
    float32-score path; their logits sit as close to float32 SDPA's as transformers' own bf16 SDPA does. On the
    tiny random SmolLM2 (grouped-query heads as the embedded model's): a CPU without native bf16 emulates it, and
    the 135M model's bf16 prefills took minutes there."""
    from transformers import DynamicCache

    from vista_distill.backends import forward_paths
    from vista_distill.backends.forward_paths import SHORT_QUERY, cache_keyword
    from vista_distill.backends.transformers import GQA_SDPA, TransformersBackend

    model = TransformersBackend(str(tiny_smollm2), dtype="bfloat16", batch_size=4).model
    kw = cache_keyword(model)
    calls = []
    short = forward_paths._short_query_attention
    monkeypatch.setattr(forward_paths, "_short_query_attention", lambda *a: calls.append(a[0].shape) or short(*a))
    assert model.config._attn_implementation == GQA_SDPA
    torch.manual_seed(0)
    ids = torch.randint(100, 40000, (3, 300))
    mask = torch.ones_like(ids)
    mask[0, :31], mask[2, :120] = 0, 0

    def step_logits(impl: str, dtype: torch.dtype, q: int) -> torch.Tensor:
        model.to(dtype)
        model.set_attn_implementation(impl)
        cache = DynamicCache(config=model.config)
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=mask, **{kw: cache}, use_cache=True)
            new = torch.randint(100, 40000, (3, q), generator=torch.Generator().manual_seed(q))
            ext = torch.cat([mask, torch.ones_like(new)], dim=1)
            pos = mask.sum(-1, keepdim=True) + torch.arange(q)
            return model(input_ids=new, attention_mask=ext, position_ids=pos, **{kw: cache}).logits.float()

    try:
        for q in (1, SHORT_QUERY):
            exact = step_logits("sdpa", torch.float32, q)
            ours = step_logits(GQA_SDPA, torch.bfloat16, q)
            theirs = step_logits("sdpa", torch.bfloat16, q)
            err_ours, err_theirs = (ours - exact).abs().max(), (theirs - exact).abs().max()
            assert err_ours <= 1.25 * err_theirs + 0.05, (q, float(err_ours), float(err_theirs))
            assert (ours.argmax(-1) == exact.argmax(-1)).float().mean() >= (
                theirs.argmax(-1) == exact.argmax(-1)
            ).float().mean() - 0.1
    finally:
        model.to(torch.bfloat16)
        model.set_attn_implementation(GQA_SDPA)
    n_layers = model.config.num_hidden_layers
    assert [s[2] for s in calls] == [1] * n_layers + [SHORT_QUERY] * n_layers   # the bf16 steps, and only them


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("q", [1, 3, 40])
def test_shared_prefix_attention_equals_sdpa(dtype, q, monkeypatch):
    """Attention over a prefix every row shares (decode steps and label continuations after the few-shot prefix)
    gives SDPA's output: short queries by the cascade (a query whose own keys are all masked attends to the
    prefix alone), long ones by SDPA; a prefix some query may not see is never taken for shared."""
    import torch.nn.functional as F

    from vista_distill.backends import forward_paths
    from vista_distill.backends.forward_paths import SHORT_QUERY, _sdpa_gqa, shared_prefix

    prefix_attention = forward_paths._prefix_attention

    class Layer(torch.nn.Module):
        num_key_value_groups = 3

    torch.manual_seed(q)
    b, p, rest = 4, 300, 50
    query = torch.randn(b, 9, q, 64, dtype=dtype)
    key = torch.cat(
        [torch.randn(1, 3, p, 64, dtype=dtype).expand(b, -1, -1, -1), torch.randn(b, 3, rest, 64, dtype=dtype)], 2
    )
    value = torch.cat(
        [torch.randn(1, 3, p, 64, dtype=dtype).expand(b, -1, -1, -1), torch.randn(b, 3, rest, 64, dtype=dtype)], 2
    )
    mask = torch.ones(b, 1, q, p + rest, dtype=torch.bool)
    mask[:, :, :, p:] = torch.rand(b, 1, q, rest) > 0.3
    mask[1, :, 0, p:] = False                      # nothing of its own to attend to
    exact = F.scaled_dot_product_attention(query.float(), key.float(), value.float(), attn_mask=mask,
                                           enable_gqa=True).transpose(1, 2)
    plain, _ = _sdpa_gqa(Layer(), query, key, value, mask, scaling=64 ** -0.5)
    cascades = []
    monkeypatch.setattr(forward_paths, "_prefix_attention",
                        lambda *a: cascades.append(1) or prefix_attention(*a))
    with shared_prefix(p):
        cascade, _ = _sdpa_gqa(Layer(), query, key, value, mask, scaling=64 ** -0.5)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    assert (cascade.float() - exact).abs().max() <= max(tol, 1.5 * float((plain.float() - exact).abs().max()))
    assert len(cascades) == (q <= SHORT_QUERY)
    hidden = mask.clone()
    hidden[0, :, :, 5] = False                     # a prefix position some query may not see: the plain path
    with shared_prefix(p):
        guarded, _ = _sdpa_gqa(Layer(), query, key, value, hidden, scaling=64 ** -0.5)
    assert torch.equal(guarded, _sdpa_gqa(Layer(), query, key, value, hidden, scaling=64 ** -0.5)[0])
    assert len(cascades) == (q <= SHORT_QUERY)


def test_a_label_prompt_asked_again_is_answered_from_the_memo(embedded_backend):
    """``label_memo``: a label prompt asked again, in the same call or a later one, gets a copy of the answer computed
    the first time and runs no forward pass; the memo keeps the most recent ``label_memo`` answers. An empty
    reference's twin is the prompt itself: with an evidence head's features, it runs once."""
    from vista_distill.backends.transformers import TransformersBackend

    b = TransformersBackend(dtype="float32", batch_size=8, label_memo=2)
    reqs = [_stage2(claim=c) for c in CLAIMS]
    first = b.run([reqs[0], reqs[1], reqs[0]])
    assert b.stats["memo_hits"] == 1 and first[2].probs == first[0].probs and first[2] is not first[0]
    for got, fresh in zip(first[:2], embedded_backend.run(reqs[:2])):   # no memo there
        assert got.label == fresh.label and got.probs == pytest.approx(fresh.probs, abs=1e-6)
    tokens = b.stats["prompt_tokens"]
    (again,) = b.run([reqs[1]])
    assert b.stats["prompt_tokens"] == tokens and b.stats["memo_hits"] == 2 and again.probs == first[1].probs
    again.probs["VERIFIED"], again.meta["edited"] = 2.0, True   # a copy: the memo keeps its own
    (third,) = b.run([reqs[1]])
    assert third.probs == first[1].probs and "edited" not in third.meta
    b.run([reqs[2]])                       # holds 2: the least recent (claim 0) goes
    b.run([reqs[0]])
    assert b.stats["memo_hits"] == 3 and b.stats["prompt_tokens"] > tokens

    t = get_template("stage2", "compact")
    empty = stage_request(t, Fields(reference="", claim=CLAIMS[0]), labels=t.labels)
    with_features = TransformersBackend(dtype="float32", batch_size=8, label_memo=16, evidence_features=True)
    (r,) = with_features.run([empty])
    assert with_features.stats == {**with_features.stats, "twin_requests": 1, "memo_hits": 1}
    assert r.meta["evidence"]["pmi"] == pytest.approx(0.0, abs=1e-9)


def test_settings_come_as_an_options_object_or_as_keywords():
    """``BackendOptions`` holds the settings; keywords override it; an unknown keyword is refused before loading."""
    from vista_distill.backends.transformers import BackendOptions, TransformersBackend

    b = TransformersBackend(options=BackendOptions(dtype="float32", batch_size=3, label_memo=4), batch_size=5)
    assert (b.batch_size, b.torch_dtype, b._label_answers.size) == (5, torch.float32, 4)
    with pytest.raises(TypeError, match="batch_sise"):
        TransformersBackend(batch_sise=4)
