"""Prompt texts written for this project (the paper's own are verbatim in :mod:`.paper_prompts`): stage 4's
contradiction check, the world-knowledge stage and its judge, the FActScore-style baseline, and the compact
prompts the students are trained on. :mod:`.templates` builds the prompt templates from both."""

from __future__ import annotations

_U, _A = "user", "assistant"

STAGE4_INSTRUCTIONS = """\
Determine whether the TARGET TURN contradicts anything said earlier in the CONVERSATION HISTORY.

- Compare the statements in the TARGET TURN with every earlier turn, by either speaker.
- A contradiction is a statement that cannot be true together with an earlier one (e.g., a different \
name, number, time, or place for the same thing).
- New information, changes of topic, opinions, and expressions of uncertainty are not contradictions.
- Do NOT use outside knowledge; judge only consistency with the conversation.

Answer YES or NO, then a period and one short sentence explaining why."""

# (history, target, answer)
STAGE4_EXAMPLES: tuple[tuple[tuple[tuple[str, str], ...], str, str], ...] = (
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

WORLD_INSTRUCTIONS = """\
The CLAIM below is not supported by the conversation's reference text. Determine whether it is true \
in the world.

- TRUE: the EVIDENCE, or well-established world knowledge, shows that the claim is correct.
- FALSE: the EVIDENCE, or well-established world knowledge, shows that the claim is wrong (e.g., a \
wrong name, number, date, place, or description of an entity).
- NOT ENOUGH KNOWLEDGE: neither the EVIDENCE nor well-established knowledge settles it (e.g., a \
private detail or an obscure local fact).
- When EVIDENCE is given, prefer it to what you remember; when it is N/A, use your own knowledge.

Answer with the label, then a period and one short sentence explaining why."""

# (evidence, claim, answer): written for this project, in the appendix's style (the appendix has no such stage)
WORLD_EXAMPLES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    ((), "Belfast is a city in the United Kingdom.",
     "TRUE. Belfast is the capital of Northern Ireland, which is part of the United Kingdom."),
    (("Mount Kilimanjaro, in Tanzania, is the highest mountain in Africa, at 5,895 metres.",),
     "Mount Kilimanjaro is in Kenya.",
     "FALSE. The evidence places Mount Kilimanjaro in Tanzania, not Kenya."),
    ((), "The bakery on Elm Street in Dayton sells about 300 loaves a day.",
     "NOT ENOUGH KNOWLEDGE. The daily sales of a local bakery are not general knowledge."),
    (("The Louvre, in Paris, is the world's most-visited art museum.",),
     "The Louvre is the most visited art museum in the world.",
     "TRUE. The evidence states that the Louvre is the world's most-visited art museum."),
)

WORLD_JUDGE_INSTRUCTIONS = """\
Judge the TEXT against the DOCUMENT it is based on.

- FAITHFUL: everything the TEXT states is supported by the DOCUMENT.
- FACTUAL HALLUCINATION: the TEXT states something the DOCUMENT does not support, but it is true in the \
world.
- NON-FACTUAL HALLUCINATION: the TEXT states something the DOCUMENT does not support, and it is false \
in the world, or the TEXT contradicts the DOCUMENT.

Answer with the label only."""
WORLD_JUDGE_LABELS = ("FAITHFUL", "FACTUAL HALLUCINATION", "NON-FACTUAL HALLUCINATION")

FACTSCORE_DECOMPOSE_INSTRUCTIONS = """\
Break the TEXT into atomic facts. An atomic fact is a short, self-contained statement that conveys \
exactly one piece of information.

- Use only the TEXT; do not add information from elsewhere.
- Replace pronouns with the names they refer to when the TEXT makes this clear.
- Format your output as a numbered list, one fact per line, with no other commentary."""

FACTSCORE_DECOMPOSE_EXAMPLES: tuple[tuple[str, tuple[str, ...]], ...] = (
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
FACTSCORE_VERIFY_EXAMPLES: tuple[tuple[str, str, str], ...] = (
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
    "world": (
        "Is the CLAIM true in the world? Use the EVIDENCE when given, else your own knowledge.\n"
        "Answer as: TRUE, FALSE or NOT ENOUGH KNOWLEDGE, then a period and a short reason."
    ),
}
