"""The VISTA paper's prompts, verbatim: Lewis et al., "VISTA Score: Verification In Sequential
Turn-based Assessment", arXiv 2510.27052, Appendix A.1 (stages 1-3) and A.2 (LLM-as-Judge).

Only text lives here (instructions and worked examples as data); :mod:`.templates` turns it into
prompts. ``tests/test_templates.py`` checks it against a verbatim copy of the appendix.
"""

from __future__ import annotations

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
STAGE1_EXAMPLES: tuple[tuple[tuple[tuple[str, str], ...], str, tuple[str, ...]], ...] = (
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
STAGE2_EXAMPLES: tuple[tuple[tuple[str, ...], str, str, str], ...] = (
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

STAGE3_EXAMPLES: tuple[tuple[tuple[str, ...], str, str, str], ...] = (
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
