"""Prompt templates for the VISTA pipeline, its baselines and the distilled students.

The few-shot prompts of stages 1-3 and the LLM-as-Judge prompt are the method's specification and
are reproduced verbatim from Lewis et al., "VISTA Score: Verification In Sequential Turn-based
Assessment", arXiv 2510.27052, Appendix A.1 (stages 1-3) and A.2 (LLM-as-Judge): the same
instructions, the same worked examples, the appendix's speaker names ("wizard" / "apprentice").
Layout follows the authors' released code: the instructions are the system message (without the
"INSTRUCTIONS:" header), each worked example is a user/assistant pair whose assistant message is the
text after "DECOMPOSITION:" / "CATEGORY:", single newlines inside a block and one blank line between
blocks. ``tests/test_prompts.py`` checks them against a verbatim copy of the appendix.

Written for this project (not from the paper): the optional stage 4 (does the target turn contradict
the earlier conversation?), a FActScore-style baseline (Min et al., 2023: decompose the turn without
any context, then check each atomic fact against the reference alone) and the ``compact`` prompts
used by fine-tuned students (a short task line with the labels, the same target fields, no examples).

Output conventions that the parsers rely on: stage 1 and ``factscore_decompose`` answer with a
numbered list, stage 2 and ``factscore_verify`` with a bare label, stage 3 and stage 4 with
"LABEL. explanation", the judge with JSON.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Example",
    "Speakers",
    "PromptTemplate",
    "PROMPT_NAMES",
    "STYLES",
    "PROMPTS_VERSION",
    "get_template",
    "stage1_input",
    "stage2_input",
    "stage3_input",
    "stage4_input",
    "judge_input",
    "factscore_decompose_input",
    "factscore_verify_input",
    "build_messages",
    "render",
]

PROMPTS_VERSION = "1"
NA = "N/A"
STYLES = ("fewshot", "compact")
PROMPT_NAMES = (
    "stage1",
    "stage2",
    "stage3",
    "stage4",
    "llm_judge",
    "factscore_decompose",
    "factscore_verify",
)


@dataclass(frozen=True)
class Example:
    """One worked example: a user message and the assistant's answer."""

    input: str
    output: str


@dataclass(frozen=True)
class Speakers:
    """Names given to the two dialogue roles in prompts.

    The default is the appendix's ("apprentice", "wizard"); ``Speakers("user", "assistant")``
    reproduces the authors' released code.
    """

    user: str = "apprentice"
    assistant: str = "wizard"

    def name(self, role: str) -> str:
        """Speaker name for a conversation role ("user" / "assistant")."""
        if role == "user":
            return self.user
        if role == "assistant":
            return self.assistant
        raise ValueError(f"unknown role {role!r}; expected 'user' or 'assistant'")


DEFAULT_SPEAKERS = Speakers()


@dataclass(frozen=True)
class PromptTemplate:
    """A system instruction, its worked examples and the labels the answer is drawn from."""

    name: str
    style: str
    instructions: str
    examples: tuple[Example, ...]
    labels: tuple[str, ...] = ()
    version: str = PROMPTS_VERSION

    @property
    def fingerprint(self) -> str:
        """First 12 hex digits of a sha256 over everything that shapes the prompt (a cache key)."""
        payload = json.dumps(
            {
                "name": self.name,
                "style": self.style,
                "instructions": self.instructions,
                "examples": [[e.input, e.output] for e in self.examples],
                "labels": list(self.labels),
                "version": self.version,
            },
            ensure_ascii=False,
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:12]


# --------------------------------------------------------------------------------------------------
# Target-message builders (shared by the worked examples, so examples and target use one layout)
# --------------------------------------------------------------------------------------------------


def _history_lines(history: Sequence[tuple[str, str]], speakers: Speakers) -> str:
    if not history:
        return NA
    return "\n".join(f"{speakers.name(role)}: {text}" for role, text in history)


def _numbered(items: Sequence[str]) -> str:
    if not items:
        return NA
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))


def stage1_input(
    history: Sequence[tuple[str, str]], target: str, speakers: Speakers = DEFAULT_SPEAKERS
) -> str:
    """Stage 1 user message: the conversation so far and the (assistant) target turn."""
    return (
        f"CONVERSATION HISTORY:\n{_history_lines(history, speakers)}\n\n"
        f"TARGET TURN:\n{speakers.assistant}: {target}"
    )


def stage2_input(background: Sequence[str], reference: str, claim: str) -> str:
    """Stage 2 user message: numbered background claims, the reference text and one claim."""
    return (
        f"BACKGROUND KNOWLEDGE:\n{_numbered(background)}\n\n"
        f"REFERENCE TEXT:\n{reference}\n\n"
        f"CLAIM:\n{claim}"
    )


def stage3_input(background: Sequence[str], reference: str, claim: str) -> str:
    """Stage 3 user message: the same fields as stage 2."""
    return stage2_input(background, reference, claim)


def stage4_input(
    history: Sequence[tuple[str, str]], target: str, speakers: Speakers = DEFAULT_SPEAKERS
) -> str:
    """Stage 4 user message: the same layout as stage 1."""
    return stage1_input(history, target, speakers)


def judge_input(
    history: Sequence[tuple[str, str]], reference: str, answer: str, speakers: Speakers = DEFAULT_SPEAKERS
) -> str:
    """LLM-as-Judge user message (Appendix A.2): context, retrieved document(s), answer, task."""
    return (
        f"CONVERSATION CONTEXT\n{_history_lines(history, speakers)}\n\n"
        f"RETRIEVED DOCUMENT(S)\n{reference}\n\n"
        f"ANSWER\n{answer}\n\n"
        "TASK\nDoes the answer contain any hallucinated content? Respond in the JSON format described."
    )


def factscore_decompose_input(target: str) -> str:
    """FActScore-style decomposition input: the target turn alone, no history."""
    return f"TEXT:\n{target}"


def factscore_verify_input(reference: str, claim: str) -> str:
    """FActScore-style verification input: the reference and one claim, nothing else."""
    return f"REFERENCE TEXT:\n{reference}\n\nCLAIM:\n{claim}"


# --------------------------------------------------------------------------------------------------
# Appendix A.1.1: stage 1 (verbatim)
# --------------------------------------------------------------------------------------------------

_U, _A = "user", "assistant"

STAGE1_INSTRUCTIONS = """\
Extract all distinct factual or belief-based statements from the TARGET TURN only.

- Break down compound or complex sentences into individual, atomic claims.
- Resolve any references (e.g., use proper names instead of "he", "it", etc.).
- Capture each idea as stated or implied by the speaker, regardless of accuracy.
- Treat presuppositions as mandatory outputs. If an utterance contains a presupposition, you MUST \
list it as one or more separate atomic statements. For example, if the utterance is "wizard: I didn't \
know that embroidery is a needlework technique", you MUST list "Embroidery is a needlework technique" \
as an atomic statement as well as "The wizard didn't know that embroidery is a needlework technique".
- Do NOT evaluate or comment on whether a statement is correct.
- Simply list the statements as they appear to be intended.
- Format your output as a numbered list of standalone claims.
- Do not include any commentary or qualification.
- Only include what was communicated in the TARGET TURN."""

# (history, target turn, decomposition)
_STAGE1_EXAMPLES: tuple[tuple[tuple[tuple[str, str], ...], str, tuple[str, ...]], ...] = (
    (
        (
            (_U, "Hi Dr. Ilsa, what can I expect at the COSI museum?"),
            (_A, "Welcome! At COSI, you can explore live science shows, special exhibits, and other "
                 "activities that make science fascinating and fun. You'll definitely enjoy your trip!"),
            (_U, "Are there any live science shows happening right now?"),
            (_A, "Absolutely! You can check the program schedule at the Box Office or Guest Services Desk "
                 "for details about the current live shows."),
            (_U, "I heard there was an outdoor exhibit?"),
        ),
        "Big Science Park is an outdoor laboratory full of exciting science activities. You can try lifting "
        "a car with a lever or even roll a giant granite sphere!",
        (
            "Big Science Park is an outdoor laboratory.",
            "Big Science Park features exciting science activities.",
            "Visitors can try lifting a car using a lever at Big Science Park.",
            "Visitors can roll a giant granite sphere at Big Science Park.",
        ),
    ),
    (
        (
            (_U, "Hi! What's your name?"),
            (_A, "My name is Dr. Ilsa. I'm named after the woman who founded the OSU Linguistics department, "
                 "Dr. Ilsa Lehiste. What's your name?"),
            (_U, "My name is Marie!"),
        ),
        "Hello Marie, welcome to COSI.",
        (
            "The apprentice's name is Marie.",
            "The apprentice and wizard are at COSI.",
        ),
    ),
    (
        ((_U, "Hi Dr. Ilsa. Where did your name come from?"),),
        "I'm named after Dr. Ilse Lehiste who founded the Department of Linguistics at the Ohio State "
        "University.",
        (
            "The wizard is named after Dr. Ilse Lehiste.",
            "Ilse Lehiste founded the Department of Linguistics at the Ohio State University.",
        ),
    ),
    (
        ((_U, "Hi! What is this place?"),),
        "Hello! The Language Pod is a research lab from Ohio State University. Here we study different "
        "aspects of language like how people talk differently, how children learn language, and how "
        "computers and humans can interact using language.",
        (
            "The Language Pod is a research lab.",
            "The Language Pod is from Ohio State University.",
            "The Language Pod studies different aspects of language.",
            "One focus of the Language Pod is how people talk differently.",
            "Another focus of the Language Pod is how children learn language.",
            "The Language Pod also studies how computers and humans can interact using language.",
        ),
    ),
    (
        (
            (_U, "Could you recommend a few Pixar movies, please?"),
            (_A, "Have you seen A Bug's Life? That was one of their earlier films."),
            (_U, "I haven't! Is that one of their more popular ones?"),
            (_A, "It came out in 1998, right after Toy Story. Would you like me to suggest a couple more "
                 "Pixar films?"),
            (_U, "Yes, please. Maybe one or two more, just so I have some options."),
        ),
        "I'll give you my personal favorite, Finding Nemo. Do you know that one?",
        (
            "The wizard is giving the apprentice a recommendation for a Pixar movie.",
            "The wizard recommends the movie Finding Nemo.",
            "Finding Nemo is a Pixar movie.",
            "Finding Nemo is the wizard's personal favorite Pixar movie.",
        ),
    ),
    (
        (
            (_U, "I love superhero movies."),
            (_A, "Me too. I'm a big fan of Iron Man."),
            (_U, "Yeah Robert Downey Jr. is a favorite."),
        ),
        "I didn't know that RDJ was in that movie.",
        (
            "Iron Man is a movie.",
            "Robert Downey Jr. was in Iron Man.",
            "The wizard did not know that Robert Downey Jr. was in Iron Man.",
        ),
    ),
)

# --------------------------------------------------------------------------------------------------
# Appendix A.1.2 / A.1.3: stages 2 and 3 (verbatim)
# --------------------------------------------------------------------------------------------------

STAGE2_INSTRUCTIONS = """\
Determine whether the CLAIM can be verified using only the BACKGROUND KNOWLEDGE and REFERENCE TEXT.

- If the CLAIM is supported as factually TRUE using only the BACKGROUND KNOWLEDGE and REFERENCE TEXT, \
classify as: VERIFIED
- If the CLAIM cannot be confirmed as factually TRUE given the provided information, classify as: \
UNVERIFIABLE

Return ONLY the category name."""

STAGE3_INSTRUCTIONS = """\
The following CLAIM has been judged UNVERIFIABLE based on the REFERENCE TEXT.
Your task: explain WHY it is unverifiable.

Important:
- BACKGROUND KNOWLEDGE is only for checking contradictions with earlier conversation context.
- Do NOT use BACKGROUND KNOWLEDGE to decide if a claim is LACKING EVIDENCE.
- Choose exactly ONE category below, then give a short explanation.

1. OUT-OF-SCOPE - The claim is not a factual assertion that can be verified against the REFERENCE TEXT. \
It is an opinion, recommendation, personal experience, or conversational remark.
2. CONTRADICTED - The claim makes a factual assertion that is explicitly contradicted by the REFERENCE TEXT.
3. LACKING EVIDENCE - The claim makes a factual assertion, but the sources do not provide enough \
information to confirm or deny it.
4. ABSTENTION - The claim is itself a refusal, expression of uncertainty, or lack of knowledge \
(e.g., "I don't know")."""

_REF_BIG_SCIENCE_PARK = (
    "EXHIBIT: Big Science Park\n\n"
    "This laboratory in the sun is proof that science is anything but boring. Its outdoor, "
    "larger-than-life activities are designed to let your inner scientist stomp around and shout out "
    "loud. Lift a car with the help of a lever, roll a giant granite sphere, and play with air pressure.\n\n"
    "Ready for a workout? Try lifting a 2,437-lb car, or giving Big Science Park's two-and-a-half-ton "
    "granite sphere a roll. With science, it's a cinch."
)
_REF_GUARDIANS = (
    "The Cleveland Guardians are a professional baseball team based in Cleveland, Ohio. The team changed "
    "its name from the Cleveland Indians in 2021. They have a long-standing rivalry with the Detroit Tigers."
)
_REF_WASHING_MACHINE = (
    "A washing machine is a home appliance used to wash laundry. Modern machines typically come in "
    "front-loading or top-loading designs and include cycles for washing, rinsing, and spinning. Many "
    "newer models are equipped with energy-saving features and smart technology that can connect to "
    "home networks."
)
_REF_CORK = (
    "Cork is a natural material harvested from the bark of cork oak trees, primarily found in Mediterranean "
    "countries. The harvesting process does not harm the tree and can be repeated every 9 to 12 years. "
    "After harvesting, the cork bark is boiled to increase flexibility and then processed into products "
    "such as wine stoppers, flooring, and insulation."
)
_REF_DOGS = (
    "Dogs are a domesticated species of the family Canidae. Over centuries, humans have bred dogs for "
    "specific traits, resulting in a wide variety of breeds. Breed characteristics often include size, "
    "coat type, temperament, and purpose, such as herding, guarding, or companionship. Different kennel "
    "clubs around the world maintain breed standards and registries."
)
_REF_IMPRESSIONISTS = (
    "The museum's Impressionist collection features works by Claude Monet, Pierre-Auguste Renoir, and "
    "Edgar Degas. These paintings highlight themes of light, leisure, and everyday life in late "
    "19th-century France. The collection is housed in Gallery 4 on the second floor."
)
_REF_LEONARDO = (
    "Leonardo da Vinci was a Renaissance polymath born in 1452. He was known for his contributions to art, "
    "science, engineering, and anatomy. Among his most famous works are the paintings *Mona Lisa* and "
    "*The Last Supper*. He left behind numerous notebooks filled with sketches, inventions, and "
    "observations."
)
_REF_EARTHQUAKES = (
    "Earthquakes occur when stress along geological faults or by volcanic activity causes the ground to "
    "shake. The severity of an earthquake is measured using the Richter scale or the moment magnitude "
    "scale. Aftershocks are smaller tremors that often follow a main seismic event."
)

_BG_COSI = (
    "The wizard is a virtual tour guide at a museum.",
    "The museum is called the Center of Science and Industry (COSI).",
    "The wizard can talk about the museum exhibits.",
)
_BG_CORK = (
    "The wizard answers questions about natural materials and how they're produced.",
    "The wizard verifies facts based on provided source texts.",
)
_BG_BASEBALL_FAN = (
    "The wizard likes baseball.",
    "The wizard is a fan of the Cleveland Guardians.",
    "The apprentice doesn't know the rules of baseball.",
    "The apprentice is from Ohio.",
)

# (background, reference, claim, answer)
_STAGE2_EXAMPLES: tuple[tuple[tuple[str, ...], str, str, str], ...] = (
    (_BG_COSI, _REF_BIG_SCIENCE_PARK, "Big Science Park is an outdoor laboratory.", "VERIFIED"),
    (
        (
            "The wizard can answer general knowledge questions.",
            "The wizard avoids speculation about team culture or opinions.",
        ),
        _REF_GUARDIANS,
        "The Cleveland Guardians are the only baseball team in Ohio.",
        "UNVERIFIABLE",
    ),
    (
        (
            "The wizard can answer general science and technology questions.",
            "The wizard bases answers only on factual reference material.",
        ),
        _REF_WASHING_MACHINE,
        "Most people prefer front-loading washing machines because they look more modern.",
        "UNVERIFIABLE",
    ),
    (_BG_CORK, _REF_CORK, "Cork is obtained in a way that allows the tree to keep growing.", "VERIFIED"),
    (
        (
            "The wizard answers general knowledge questions about animals.",
            "The wizard does not guess or speculate about unknown facts.",
        ),
        _REF_DOGS,
        "The wizard does not know how many dog breeds there are.",
        "UNVERIFIABLE",
    ),
    (
        (
            "The wizard can answer questions about art and museum collections.",
            "The wizard uses provided source texts for factual verification.",
        ),
        _REF_IMPRESSIONISTS,
        "The wizard's favorite painter is Claude Monet.",
        "UNVERIFIABLE",
    ),
)

_STAGE3_EXAMPLES: tuple[tuple[tuple[str, ...], str, str, str], ...] = (
    (
        _BG_COSI,
        _REF_BIG_SCIENCE_PARK,
        "Big Science Park is an indoor laboratory.",
        "CONTRADICTED. The wizard has said that Big Science Park is an indoor laboratory, but the reference "
        "text says it has outdoor activities.",
    ),
    (
        _BG_BASEBALL_FAN,
        _REF_GUARDIANS,
        "The Cleveland Guardians are the only baseball team in Ohio.",
        "LACKING EVIDENCE. The reference text does not have information about the Cleveland Guardians being "
        "the only baseball team in Ohio.",
    ),
    (
        (
            "There are many different types of home appliances.",
            "Appliances seem to be getting more and more advanced.",
            "Appliances are getting more eco-friendly.",
        ),
        _REF_WASHING_MACHINE,
        "Most people prefer front-loading washing machines because they look more modern.",
        "OUT-OF-SCOPE. The claim is about personal preferences, which is not factual content.",
    ),
    (
        _BG_CORK,
        _REF_CORK,
        "The wizard does not know how long it takes to boil the cork bark.",
        "ABSTENTION. The wizard does not answer the question, but rather expresses a lack of knowledge.",
    ),
    (
        (
            "The wizard answers general knowledge questions about animals.",
            "The wizard likes dogs.",
            "The apprentice doesn't know the number of dog breeds.",
            "The apprentice is from the United States.",
            "The apprentice is curious about dogs.",
            "There are many different types of dogs.",
        ),
        _REF_DOGS,
        "The wizard is unsure how many dog breeds there are.",
        "ABSTENTION. The wizard does not answer the question, but rather expresses a lack of knowledge.",
    ),
    (
        (
            "The wizard likes art.",
            'The wizard likes the painting "Mona Lisa".',
            "Leonardo da Vinci is an artist.",
            "Leonardo da Vinci is a scientist.",
            "The wizard has not seen some of Leonardo da Vinci's paintings.",
        ),
        _REF_LEONARDO,
        "The wizard has seen the Mona Lisa.",
        "OUT-OF-SCOPE. The claim is about a personal experience, which is not factual content.",
    ),
    (
        (
            "Earthquakes are natural disasters.",
            "There are many different types of natural disasters.",
            "The apprentice has never lived through a natural disaster.",
            "The apprentice is from the United States.",
            "The apprentice has been to California.",
        ),
        _REF_EARTHQUAKES,
        "The 1906 San Francisco earthquake was the deadliest earthquake in U.S. history.",
        "LACKING EVIDENCE. The reference text does not have information about the 1906 San Francisco "
        "earthquake being the deadliest earthquake in U.S. history.",
    ),
    (
        _BG_BASEBALL_FAN,
        _REF_GUARDIANS,
        "The wizard does not like the Cleveland Guardians.",
        "OUT-OF-SCOPE. The claim is about the wizard's personal opinion, which is not factual content.",
    ),
)

# --------------------------------------------------------------------------------------------------
# Appendix A.2: LLM-as-Judge (verbatim except the restored JSON braces)
# --------------------------------------------------------------------------------------------------

# The paper text shows the output-format line without its surrounding braces (lost in typesetting);
# they are restored so that the requested output is a JSON object. Nothing else differs.
LLM_JUDGE_INSTRUCTIONS = """\
You are a careful and impartial evaluator. Your task is to determine whether the provided answer is \
fully supported by the retrieved context.

Definition:
- Faithful → Every factual statement in the answer is directly supported or can be logically inferred \
from the retrieved documents.
- Hallucinated → The answer contains any factual claim that is not present in, or cannot be inferred \
from, the retrieved documents.

Instructions:
1. Read the retrieved documents carefully.
2. Compare each factual element of the answer to the documents.
3. Decide whether it is faithful or hallucinated.
4. Provide a short, clear explanation for your decision.

Output format (JSON only):
```
{"faithfulness": "faithful" | "hallucinated", "explanation": "Your explanation here."}
```

Do not include any extra commentary outside the JSON."""

# --------------------------------------------------------------------------------------------------
# Written for this project: stage 4, FActScore-style baseline, compact student prompts
# --------------------------------------------------------------------------------------------------

STAGE4_INSTRUCTIONS = """\
Determine whether the TARGET TURN contradicts anything said earlier in the CONVERSATION HISTORY.

- Compare the statements in the TARGET TURN with every earlier turn, by either speaker.
- A contradiction is a statement that cannot be true together with an earlier one (e.g., a different \
name, number, time, or place for the same thing).
- New information, changes of topic, opinions, and expressions of uncertainty are not contradictions.
- Do NOT use outside knowledge; judge only consistency with the conversation.

Answer YES or NO, then a period and one short sentence explaining why."""

# (history, target, answer)
_STAGE4_EXAMPLES: tuple[tuple[tuple[tuple[str, str], ...], str, str], ...] = (
    (
        (
            (_U, "When does the museum open on Saturdays?"),
            (_A, "COSI opens at 10 a.m. on Saturdays."),
            (_U, "Great, and when does it close?"),
        ),
        "It closes at 5 p.m. Since it opens at 9 a.m., you'll have eight hours to explore.",
        "YES. The wizard earlier said COSI opens at 10 a.m. on Saturdays, but now says it opens at 9 a.m.",
    ),
    (
        (
            (_U, "Is the planetarium show included in admission?"),
            (_A, "No, the planetarium show needs a separate ticket."),
            (_U, "How long is the show?"),
        ),
        "The show lasts about 25 minutes, and you can buy tickets at the Box Office.",
        "NO. The wizard adds new details about the show that are consistent with the earlier turns.",
    ),
    (
        (
            (_U, "Hi, my name is Marie. Where are the dinosaur exhibits?"),
            (_A, "The dinosaur exhibits are on the second floor."),
        ),
        "Enjoy your visit, Anna!",
        "YES. The apprentice said her name is Marie, but the wizard calls her Anna.",
    ),
)

FACTSCORE_DECOMPOSE_INSTRUCTIONS = """\
Break the TEXT into atomic facts. An atomic fact is a short, self-contained statement that conveys \
exactly one piece of information.

- Use only the TEXT; do not add information from elsewhere.
- Replace pronouns with the names they refer to when the TEXT makes this clear.
- Format your output as a numbered list, one fact per line, with no other commentary."""

_FACTSCORE_DECOMPOSE_EXAMPLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "The Eiffel Tower was completed in 1889, and it is about 330 metres tall.",
        ("The Eiffel Tower was completed in 1889.", "The Eiffel Tower is about 330 metres tall."),
    ),
    (
        "Sure! The planetarium show lasts 25 minutes and is narrated by a live astronomer.",
        (
            "The planetarium show lasts 25 minutes.",
            "The planetarium show is narrated by a live astronomer.",
        ),
    ),
)

FACTSCORE_VERIFY_INSTRUCTIONS = """\
Decide whether the CLAIM is supported by the REFERENCE TEXT.

- SUPPORTED: the REFERENCE TEXT states the claim or directly implies it.
- NOT SUPPORTED: the REFERENCE TEXT contradicts the claim or does not contain enough information to \
confirm it.

Return ONLY the label."""

_REF_ZOO = (
    "The Columbus Zoo and Aquarium is located in Powell, Ohio. It opened in 1927 and is home to more than "
    "10,000 animals."
)
# (reference, claim, label)
_FACTSCORE_VERIFY_EXAMPLES: tuple[tuple[str, str, str], ...] = (
    (_REF_ZOO, "The Columbus Zoo and Aquarium opened in 1927.", "SUPPORTED"),
    (_REF_ZOO, "The Columbus Zoo and Aquarium is the largest zoo in Ohio.", "NOT SUPPORTED"),
)

COMPACT_INSTRUCTIONS = {
    "stage1": (
        "Decompose the TARGET TURN of the conversation into atomic, standalone claims, resolving references "
        "and including presuppositions.\n"
        "Output only a numbered list, one claim per line."
    ),
    "stage2": (
        "Can the CLAIM be verified as true using only the BACKGROUND KNOWLEDGE and REFERENCE TEXT?\n"
        "Answer with one label only: VERIFIED or UNVERIFIABLE."
    ),
    "stage3": (
        "The CLAIM could not be verified from the REFERENCE TEXT. Say why with one label:\n"
        "OUT-OF-SCOPE (opinion, recommendation, personal experience or remark), CONTRADICTED (the reference "
        "contradicts it), LACKING EVIDENCE (factual but unconfirmed), ABSTENTION (refusal or lack of "
        "knowledge).\n"
        "Answer as: LABEL. short explanation"
    ),
    "stage4": (
        "Does the TARGET TURN contradict an earlier turn of the CONVERSATION HISTORY?\n"
        "Answer as: YES or NO, then a period and a short reason."
    ),
}

_LABELS = {
    "stage1": (),
    "stage2": ("VERIFIED", "UNVERIFIABLE"),
    "stage3": ("OUT-OF-SCOPE", "CONTRADICTED", "LACKING EVIDENCE", "ABSTENTION"),
    "stage4": ("YES", "NO"),
    "llm_judge": (),
    "factscore_decompose": (),
    "factscore_verify": ("SUPPORTED", "NOT SUPPORTED"),
}


def _numbered_output(items: Sequence[str]) -> str:
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))


def _build_templates() -> dict[tuple[str, str], PromptTemplate]:
    fewshot: dict[str, tuple[str, tuple[Example, ...]]] = {
        "stage1": (
            STAGE1_INSTRUCTIONS,
            tuple(Example(stage1_input(h, t), _numbered_output(d)) for h, t, d in _STAGE1_EXAMPLES),
        ),
        "stage2": (
            STAGE2_INSTRUCTIONS,
            tuple(Example(stage2_input(b, r, c), a) for b, r, c, a in _STAGE2_EXAMPLES),
        ),
        "stage3": (
            STAGE3_INSTRUCTIONS,
            tuple(Example(stage3_input(b, r, c), a) for b, r, c, a in _STAGE3_EXAMPLES),
        ),
        "stage4": (
            STAGE4_INSTRUCTIONS,
            tuple(Example(stage4_input(h, t), a) for h, t, a in _STAGE4_EXAMPLES),
        ),
        "llm_judge": (LLM_JUDGE_INSTRUCTIONS, ()),
        "factscore_decompose": (
            FACTSCORE_DECOMPOSE_INSTRUCTIONS,
            tuple(
                Example(factscore_decompose_input(t), _numbered_output(f))
                for t, f in _FACTSCORE_DECOMPOSE_EXAMPLES
            ),
        ),
        "factscore_verify": (
            FACTSCORE_VERIFY_INSTRUCTIONS,
            tuple(Example(factscore_verify_input(r, c), a) for r, c, a in _FACTSCORE_VERIFY_EXAMPLES),
        ),
    }
    out: dict[tuple[str, str], PromptTemplate] = {}
    for name, (instructions, examples) in fewshot.items():
        out[name, "fewshot"] = PromptTemplate(name, "fewshot", instructions, examples, _LABELS[name])
    for name, instructions in COMPACT_INSTRUCTIONS.items():
        out[name, "compact"] = PromptTemplate(name, "compact", instructions, (), _LABELS[name])
    return out


_TEMPLATES = _build_templates()


def get_template(name: str, style: str = "fewshot") -> PromptTemplate:
    """The template for a prompt name and style; ValueError lists what exists."""
    if name not in PROMPT_NAMES:
        raise ValueError(f"unknown prompt name {name!r}; valid names: {', '.join(PROMPT_NAMES)}")
    if style not in STYLES:
        raise ValueError(f"unknown prompt style {style!r}; valid styles: {', '.join(STYLES)}")
    try:
        return _TEMPLATES[name, style]
    except KeyError:
        have = [s for (n, s) in _TEMPLATES if n == name]
        raise ValueError(
            f"prompt {name!r} has no {style!r} style; valid styles for it: {', '.join(have)}"
        ) from None


# --------------------------------------------------------------------------------------------------
# Messages and rendering
# --------------------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"\b(wizard|apprentice|Wizard|Apprentice)\b")


def _substitute(text: str, speakers: Speakers) -> str:
    """Replace the appendix's speaker names by ``speakers`` (whole words, one pass)."""
    mapping = {"wizard": speakers.assistant, "apprentice": speakers.user}

    def repl(m: re.Match[str]) -> str:
        word = m.group(1)
        new = mapping[word.lower()]
        return new[:1].upper() + new[1:] if word[0].isupper() else new

    return _NAME_RE.sub(repl, text)


def build_messages(
    template: PromptTemplate, target_input: str, speakers: Speakers = DEFAULT_SPEAKERS
) -> list[dict[str, str]]:
    """Chat messages: system instructions, one user/assistant pair per example, the target as user.

    ``target_input`` is used as is (build it with the same ``speakers``); the appendix names in the
    instructions and examples are substituted when ``speakers`` is not the default.
    """

    def sub(text: str) -> str:
        return text if speakers == DEFAULT_SPEAKERS else _substitute(text, speakers)

    messages = [{"role": "system", "content": sub(template.instructions)}]
    for ex in template.examples:
        messages.append({"role": "user", "content": sub(ex.input)})
        messages.append({"role": "assistant", "content": sub(ex.output)})
    messages.append({"role": "user", "content": target_input})
    return messages


def _merge_system(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Fold a leading system message into the first user message ("{system}\\n\\n{user}")."""
    system, rest = messages[0]["content"], [dict(m) for m in messages[1:]]
    for m in rest:
        if m["role"] == "user":
            m["content"] = f"{system}\n\n{m['content']}"
            return rest
    return [{"role": "user", "content": system}, *rest]


# Variables every render passes to the chat template unless told otherwise: reasoning models
# (Qwen3, and templates that read the same switch) answer directly instead of opening a <think> block
# that the VISTA prompts' short budgets would cut off. Templates that do not read a variable ignore it.
THINKING_OFF: dict[str, Any] = {"enable_thinking": False}


def render(tokenizer: Any, messages: list[dict[str, str]], add_generation_prompt: bool = True,
           template_kwargs: Mapping[str, Any] | None = None) -> str:
    """Render messages with the tokenizer's own chat template (the one renderer for all families).

    ``template_kwargs`` are passed to the template (default :data:`THINKING_OFF`; ``{}`` passes
    nothing). Templates without a system role (ones that raise on it, like Gemma's or old Mistral's, or
    that silently drop it) get the system message merged into the first user message.
    """
    extra = dict(THINKING_OFF if template_kwargs is None else template_kwargs)
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"{type(tokenizer).__name__} has no chat template; set tokenizer.chat_template (or load a "
            "chat/instruct model) before rendering prompts"
        )

    def apply(msgs: list[dict[str, str]]) -> str:
        return tokenizer.apply_chat_template(
            msgs, tokenize=False, add_generation_prompt=add_generation_prompt, **extra
        )

    has_system = bool(messages) and messages[0]["role"] == "system"
    if not has_system:
        return apply(messages)
    system = messages[0]["content"]
    first_error: Exception | None
    try:
        text = apply(messages)
    except Exception as err:  # jinja2 TemplateError from raise_exception, or similar
        first_error = err
    else:
        if not system.strip() or system.strip() in text:
            return text
        first_error = None  # the template silently dropped the system message
    try:
        return apply(_merge_system(messages))
    except Exception as err:
        raise err from first_error
