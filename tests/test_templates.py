"""Tests for vista_distill.pipeline.templates.

Golden tests compare the few-shot templates with ``fixtures/vista_appendix_a.txt``, a verbatim copy
of Appendix A (A.1 + A.2) of the VISTA paper's text extraction, after whitespace normalisation (the
extraction puts blank lines between most lines). Renderer tests use tiny tokenizers built offline.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from vista_distill.pipeline import templates as P
from vista_distill.pipeline.render import render
from vista_distill.pipeline.templates import (
    Example,
    PromptTemplate,
    Speakers,
    build_messages,
    get_template,
    judge_input,
    stage1_input,
    stage2_input,
    stage3_input,
)

FIXTURE = Path(__file__).parent / "fixtures" / "vista_appendix_a.txt"
APPENDIX = FIXTURE.read_text(encoding="utf-8")
ROLE_OF = {"apprentice": "user", "wizard": "assistant"}
# The one intentional deviation: the paper text lost the braces of the judge's JSON line.
JUDGE_JSON_BRACED = '{"faithfulness": "faithful" | "hallucinated", "explanation": "Your explanation here."}'
JUDGE_JSON_PAPER = '"faithfulness": "faithful" | "hallucinated", "explanation": "Your explanation here."'


def norm(text: str) -> str:
    """Collapse every run of whitespace (blank lines included) to one space."""
    return " ".join(text.split())


def section(start: str, end: str | None) -> str:
    """Text between a heading line and the next heading line of the appendix."""
    m = re.search(rf"^{re.escape(start)}$", APPENDIX, re.M)
    assert m, start
    rest = APPENDIX[m.end():]
    if end is None:
        return rest
    e = re.search(rf"^{re.escape(end)}$", rest, re.M)
    assert e, end
    return rest[: e.start()]


def between(text: str, start: str, end: str | None) -> str:
    """Text strictly between two header lines inside a section."""
    m = re.search(rf"^{re.escape(start)}$", text, re.M)
    assert m, start
    rest = text[m.end():]
    if end is None:
        return rest.strip()
    e = re.search(rf"^{re.escape(end)}$", rest, re.M)
    assert e, end
    return rest[: e.start()].strip()


def parse_stage(sec: str, block_word: str, answer_header: str) -> tuple[str, list[tuple[str, str]]]:
    """(instructions, [(input, answer), ...]) of one stage; the last pair is the target slot."""
    instructions = between(sec, "INSTRUCTIONS:", f"{block_word} 1")
    parts = re.split(rf"^{block_word} \d+$", sec, flags=re.M)[1:]
    blocks = []
    for part in parts:
        inp, _, out = part.partition(f"\n{answer_header}\n")
        blocks.append((inp.strip(), out.strip()))
    return instructions, blocks


STAGE1 = parse_stage(section("A.1.1 Stage 1", "A.1.2 Stage 2"), "CONVERSATION", "DECOMPOSITION:")
STAGE2 = parse_stage(section("A.1.2 Stage 2", "A.1.3 Stage 3"), "EXAMPLE", "CATEGORY:")
STAGE3 = parse_stage(section("A.1.3 Stage 3", "A.2 LLM-as-Judge Prompt"), "EXAMPLE", "CATEGORY:")
JUDGE = section("A.2 LLM-as-Judge Prompt", None)
PARSED = {"stage1": STAGE1, "stage2": STAGE2, "stage3": STAGE3}


def stage1_fields(block: str) -> tuple[list[tuple[str, str]], str]:
    """History pairs and target text of a stage-1 example from the appendix."""
    hist = between(block, "CONVERSATION HISTORY:", "TARGET TURN:")
    history = []
    for line in filter(None, (ln.strip() for ln in hist.splitlines())):
        speaker, _, text = line.partition(": ")
        history.append((ROLE_OF[speaker], text))
    target = between(block, "TARGET TURN:", None)
    assert target.startswith("wizard: ")
    return history, target[len("wizard: "):]


def claim_fields(block: str) -> tuple[list[str], str, str]:
    """Background items, reference (paragraphs joined by a blank line) and claim of a stage-2/3 example."""
    bg = between(block, "BACKGROUND KNOWLEDGE:", "REFERENCE TEXT:")
    background = [re.sub(r"^\d+\. ", "", ln.strip()) for ln in bg.splitlines() if ln.strip()]
    ref = between(block, "REFERENCE TEXT:", "CLAIM:")
    reference = "\n\n".join(p.strip() for p in re.split(r"\n\s*\n", ref))
    claim = between(block, "CLAIM:", None)
    return background, reference, claim


# ----------------------------------------------------------------------------- golden: appendix A.1


def test_fixture_is_the_appendix() -> None:
    assert APPENDIX.startswith("A Prompts\n")
    assert "B Significance Testing" not in APPENDIX
    assert len(STAGE1[1]) == 7 and len(STAGE2[1]) == 7 and len(STAGE3[1]) == 9  # examples + target slot


@pytest.mark.parametrize("name,count", [("stage1", 6), ("stage2", 6), ("stage3", 8)])
def test_example_counts(name: str, count: int) -> None:
    assert len(get_template(name).examples) == count
    assert len(PARSED[name][1]) == count + 1


@pytest.mark.parametrize("name", ["stage1", "stage2", "stage3"])
def test_instructions_match_appendix(name: str) -> None:
    instructions = get_template(name).instructions
    assert not instructions.startswith("INSTRUCTIONS")
    assert norm(instructions) == norm(PARSED[name][0])


@pytest.mark.parametrize("name", ["stage1", "stage2", "stage3"])
def test_examples_match_appendix(name: str) -> None:
    template = get_template(name)
    golden = PARSED[name][1][:-1]
    for i, (example, (inp, out)) in enumerate(zip(template.examples, golden, strict=True), 1):
        assert norm(example.input) == norm(inp), f"{name} example {i} input"
        assert norm(example.output) == norm(out), f"{name} example {i} output"
        if name != "stage1":  # labels and "LABEL. explanation" answers are single lines
            assert example.output == out


def test_stage1_outputs_are_numbered_lines() -> None:
    for example in get_template("stage1").examples:
        lines = example.output.split("\n")
        assert [ln.split(". ", 1)[0] for ln in lines] == [str(i) for i in range(1, len(lines) + 1)]


def test_answer_slots_are_empty() -> None:
    assert STAGE1[1][-1][1] == ""
    assert STAGE3[1][-1][1] == ""
    # The appendix's stage-2 slot ends with a stray "VERIFIED": it is the (empty) answer slot.
    assert STAGE2[1][-1][1] in ("", "VERIFIED")


def test_stage1_builder_reproduces_examples_exactly() -> None:
    template = get_template("stage1")
    for example, (block, _) in zip(template.examples, STAGE1[1][:-1], strict=True):
        history, target = stage1_fields(block)
        assert stage1_input(history, target) == example.input


@pytest.mark.parametrize("name,build", [("stage2", stage2_input), ("stage3", stage3_input)])
def test_claim_builders_reproduce_examples(name: str, build) -> None:
    template = get_template(name)
    for i, (example, (block, _)) in enumerate(zip(template.examples, PARSED[name][1][:-1], strict=True), 1):
        rebuilt = build(*claim_fields(block))
        if name == "stage3" and i == 1:
            # The extraction merged two paragraphs of this reference text (stage 2 keeps the break);
            # the template uses stage 2's layout, so only the normalised text can match here.
            assert norm(rebuilt) == norm(example.input)
            assert example.input == get_template("stage2").examples[0].input.replace(
                "an outdoor laboratory", "an indoor laboratory"
            )
        else:
            assert rebuilt == example.input, f"{name} example {i}"


def test_stage2_example1_exact_layout() -> None:
    first = get_template("stage2").examples[0].input
    assert first.startswith(
        "BACKGROUND KNOWLEDGE:\n1. The wizard is a virtual tour guide at a museum.\n2. "
    )
    assert (
        "\n3. The wizard can talk about the museum exhibits.\n\n"
        "REFERENCE TEXT:\nEXHIBIT: Big Science Park\n\n" in first
    )
    assert first.endswith("With science, it's a cinch.\n\nCLAIM:\nBig Science Park is an outdoor laboratory.")


def test_target_slots_have_example_layout() -> None:
    slot1 = stage1_input([("user", "H")], "T").replace("apprentice: H", "[Conversation history]")
    assert norm(slot1.replace("wizard: T", "[Target turn]")) == norm(STAGE1[1][-1][0])
    for name, build in (("stage2", stage2_input), ("stage3", stage3_input)):
        slot = build(["BG"], "[reference text]", "[claim]").replace("1. BG", "[background knowledge]")
        assert norm(slot) == norm(PARSED[name][1][-1][0])


def test_empty_fields_render_na() -> None:
    assert stage1_input([], "Hi.") == "CONVERSATION HISTORY:\nN/A\n\nTARGET TURN:\nwizard: Hi."
    assert stage2_input([], "R", "C") == "BACKGROUND KNOWLEDGE:\nN/A\n\nREFERENCE TEXT:\nR\n\nCLAIM:\nC"
    assert judge_input([], "R", "A").startswith("CONVERSATION CONTEXT\nN/A\n\nRETRIEVED DOCUMENT(S)\nR\n\n")
    with pytest.raises(ValueError, match="role"):
        stage1_input([("wizard", "x")], "T")


# ----------------------------------------------------------------------------- golden: appendix A.2


def test_judge_matches_appendix() -> None:
    template = get_template("llm_judge")
    assert template.examples == () and template.labels == ()
    assert JUDGE_JSON_BRACED in template.instructions
    paper_instructions = between(JUDGE, "INSTRUCTIONS:", "INPUT:")
    as_in_paper = template.instructions.replace(JUDGE_JSON_BRACED, JUDGE_JSON_PAPER)
    assert norm(as_in_paper) == norm(paper_instructions)
    user = judge_input([("user", "H")], "[retrieved documents]", "[answer]").replace(
        "apprentice: H", "[conversation context]"
    )
    assert norm(user) == norm(between(JUDGE, "INPUT:", "OUTPUT (JSON only):"))
    messages = build_messages(template, user)
    assert [m["role"] for m in messages] == ["system", "user"]


# ----------------------------------------------------------------------------- templates and messages


def test_labels() -> None:
    assert get_template("stage2").labels == ("VERIFIED", "UNVERIFIABLE")
    assert get_template("stage3").labels == ("OUT-OF-SCOPE", "CONTRADICTED", "LACKING EVIDENCE", "ABSTENTION")
    assert get_template("stage4").labels == ("YES", "NO")
    assert get_template("factscore_verify").labels == ("SUPPORTED", "NOT SUPPORTED")
    for name in ("stage2", "stage3", "stage4"):
        assert get_template(name, "compact").labels == get_template(name).labels


def test_own_fewshot_outputs_follow_conventions() -> None:
    for name in ("stage2", "factscore_verify"):
        t = get_template(name)
        assert all(e.output in t.labels for e in t.examples)
    for name in ("stage3", "stage4"):
        t = get_template(name)
        for e in t.examples:
            label, sep, why = e.output.partition(". ")
            assert label in t.labels and sep and why
    assert {e.output.split(".")[0] for e in get_template("stage4").examples} == {"YES", "NO"}
    for e in get_template("factscore_decompose").examples:
        assert e.output.startswith("1. ") and "\n2. " in e.output


def test_factscore_inputs_carry_no_context() -> None:
    decompose = get_template("factscore_decompose")
    verify = get_template("factscore_verify")
    for e in (*decompose.examples, *verify.examples):
        assert "CONVERSATION" not in e.input and "BACKGROUND" not in e.input
    assert P.factscore_decompose_input("The zoo opened in 1927.") == "TEXT:\nThe zoo opened in 1927."
    assert P.factscore_verify_input("R", "C") == "REFERENCE TEXT:\nR\n\nCLAIM:\nC"
    for label in ("OUT-OF-SCOPE", "CONTRADICTED", "LACKING EVIDENCE", "ABSTENTION"):
        assert label not in verify.instructions


@pytest.mark.parametrize("name", ["stage1", "stage2", "stage3", "stage4"])
def test_compact_templates(name: str) -> None:
    compact = get_template(name, "compact")
    assert compact.examples == ()
    assert 2 <= len(compact.instructions.splitlines()) <= 4
    for label in compact.labels:
        assert label in compact.instructions
    messages = build_messages(compact, "TARGET")
    assert messages == [
        {"role": "system", "content": compact.instructions},
        {"role": "user", "content": "TARGET"},
    ]


def test_build_messages_fewshot_structure() -> None:
    template = get_template("stage3")
    target = stage3_input(["b"], "ref", "claim")
    messages = build_messages(template, target)
    assert len(messages) == 2 + 2 * len(template.examples)
    assert messages[0] == {"role": "system", "content": template.instructions}
    assert [m["role"] for m in messages[1:]] == ["user", "assistant"] * 8 + ["user"]
    assert messages[2]["content"].startswith("CONTRADICTED. The wizard has said")
    assert messages[-1]["content"] == target


def test_speaker_substitution() -> None:
    generic = Speakers("user", "assistant")
    template = get_template("stage1")
    target = stage1_input([("user", "Hi")], "Hello.", generic)
    messages = build_messages(template, target, generic)
    text = "\n".join(m["content"] for m in messages)
    assert not re.search(r"\b(wizard|apprentice)\b", text, re.I)
    assert "The user's name is Marie." in text
    assert '"assistant: I didn\'t know that embroidery' in messages[0]["content"]
    assert messages[-1]["content"].endswith("TARGET TURN:\nassistant: Hello.")
    # Swapped names are replaced in one pass, not chained.
    swapped = build_messages(template, "x", Speakers(user="wizard", assistant="apprentice"))
    assert "1. The wizard's name is Marie." in swapped[4]["content"]
    assert "1. The apprentice is named after Dr. Ilse Lehiste." in swapped[6]["content"]
    # Whole words only; the default speakers change nothing.
    custom = PromptTemplate(
        "stage1", "fewshot", "The wizard's wizardry. Wizard!", (Example("apprentice", "x"),)
    )
    out = build_messages(custom, "t", Speakers("User", "Bot"))
    assert out[0]["content"] == "The Bot's wizardry. Bot!"
    assert out[1]["content"] == "User"
    assert build_messages(template, "t")[1]["content"] == template.examples[0].input


def test_get_template_errors() -> None:
    with pytest.raises(ValueError, match="stage1.*factscore_verify"):
        get_template("stage5")
    with pytest.raises(ValueError, match="fewshot, compact"):
        get_template("stage1", "zeroshot")
    with pytest.raises(ValueError, match="no 'compact' style"):
        get_template("llm_judge", "compact")
    assert set(P.PROMPT_NAMES) == {
        "stage1", "stage2", "stage3", "stage4", "world", "world_judge", "llm_judge", "factscore_decompose",
        "factscore_verify"
    }
    for name in P.PROMPT_NAMES:
        assert get_template(name).name == name and get_template(name).style == "fewshot"


def test_fingerprint() -> None:
    fewshot, compact = get_template("stage2"), get_template("stage2", "compact")
    assert re.fullmatch(r"[0-9a-f]{12}", fewshot.fingerprint)
    assert fewshot.fingerprint != compact.fingerprint
    assert dataclasses.replace(fewshot).fingerprint == fewshot.fingerprint
    assert dataclasses.replace(fewshot, version="other").fingerprint != fewshot.fingerprint
    changed = dataclasses.replace(fewshot, examples=fewshot.examples[:-1])
    assert changed.fingerprint != fewshot.fingerprint
    assert len({get_template(n).fingerprint for n in P.PROMPT_NAMES}) == len(P.PROMPT_NAMES)


# ----------------------------------------------------------------------------- renderer

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
GEMMA_LIKE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n{{ m['content'] | trim }}"
    "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
DROPS_SYSTEM = (
    "{% for m in messages %}{% if m['role'] != 'system' %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def make_tokenizer(chat_template: str | None):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "<bos>": 1, "<eos>": 2, "the": 3, "wizard": 4}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", bos_token="<bos>", eos_token="<eos>"
    )
    tok.chat_template = chat_template
    return tok


def stage2_messages(style: str = "fewshot") -> list[dict[str, str]]:
    return build_messages(get_template("stage2", style), stage2_input(["b"], "ref", "A claim."))


def test_render_chatml_keeps_system() -> None:
    messages = stage2_messages()
    text = render(make_tokenizer(CHATML), messages)
    instructions = get_template("stage2").instructions
    assert text.startswith(f"<|im_start|>system\n{instructions}<|im_end|>\n<|im_start|>user\nBACKGROUND")
    assert text.count("<|im_start|>user\n") == 7 and text.count("<|im_start|>assistant\n") == 7
    assert text.count(instructions) == 1
    assert text.endswith("CLAIM:\nA claim.<|im_end|>\n<|im_start|>assistant\n")
    no_gen = render(make_tokenizer(CHATML), messages, add_generation_prompt=False)
    assert no_gen.endswith("A claim.<|im_end|>\n")


def test_render_merges_system_when_template_rejects_it() -> None:
    tok = make_tokenizer(GEMMA_LIKE)
    messages = stage2_messages()
    with pytest.raises(Exception, match="System role not supported"):
        tok.apply_chat_template(messages, tokenize=False)
    text = render(tok, messages)
    instructions = get_template("stage2").instructions
    first_input = get_template("stage2").examples[0].input
    assert text.startswith(f"<bos><start_of_turn>user\n{instructions}\n\n{first_input}<end_of_turn>\n")
    assert "<start_of_turn>system" not in text and text.count(instructions) == 1
    assert text.endswith("A claim.<end_of_turn>\n<start_of_turn>model\n")
    compact = render(tok, stage2_messages("compact"))
    assert compact.count("<start_of_turn>user") == 1 and compact.count("<start_of_turn>model") == 1


def test_render_merges_system_when_template_drops_it() -> None:
    text = render(make_tokenizer(DROPS_SYSTEM), stage2_messages("compact"))
    instructions = get_template("stage2", "compact").instructions
    assert text.startswith(f"<|user|>\n{instructions}\n\nBACKGROUND KNOWLEDGE:")
    assert text.endswith("<|assistant|>\n")


def test_render_errors() -> None:
    with pytest.raises(ValueError, match="no chat template"):
        render(make_tokenizer(None), stage2_messages())
    broken = make_tokenizer("{{ raise_exception('broken template') }}")
    with pytest.raises(Exception, match="broken template"):
        render(broken, stage2_messages())
