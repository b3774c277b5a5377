"""The project's vocabulary, defined once: speaker roles, turn labels, claim categories, the stages and the labels
each answers with, the turn rules and the world stage's verdicts. Every other module imports these names from here
(``data.schema``, ``pipeline.stages`` and ``pipeline.engine`` pass them on).

Stages 1-3 are the method (paper section 3) and the student's three adapters; stage 4 (does the turn contradict
earlier turns?) is this project's optional addition, answered by the base model; ``world`` (is a LACKING EVIDENCE
claim true in the world?) is this project's optional world-knowledge stage, after the mixed-context study (Wang et
al., Findings of ACL 2025): it tells a factual hallucination from a non-factual one, and can be distilled into a
fourth adapter like stages 1-3.
"""

from __future__ import annotations

USER = "user"
ASSISTANT = "assistant"
ROLES = (USER, ASSISTANT)

# Turn labels (gold and predicted). "faithful" is the paper's VERIFIED turn, "hallucinated" its
# UNVERIFIABLE turn; "unknown" is a prediction that could not be made (kept with its reason).
FAITHFUL = "faithful"
HALLUCINATED = "hallucinated"
UNKNOWN = "unknown"
TURN_LABELS = (FAITHFUL, HALLUCINATED)

# Claim categories produced by stages 2 and 3.
VERIFIED = "VERIFIED"
UNVERIFIABLE = "UNVERIFIABLE"
OUT_OF_SCOPE = "OUT-OF-SCOPE"
CONTRADICTED = "CONTRADICTED"
LACKING_EVIDENCE = "LACKING EVIDENCE"
ABSTENTION = "ABSTENTION"
STAGE2_LABELS = (VERIFIED, UNVERIFIABLE)
STAGE3_LABELS = (OUT_OF_SCOPE, CONTRADICTED, LACKING_EVIDENCE, ABSTENTION)
CLAIM_CATEGORIES = (VERIFIED, *STAGE3_LABELS)

# Stages and the labels each answers with (stage 1 answers with a list of claims).
STAGES = ("stage1", "stage2", "stage3")          # the method's stages: one silver dataset and adapter each
OPTIONAL_STAGES = ("stage4", "world")
DISTILLED_STAGES = STAGES + ("world",)          # the stages that can have silver data and an adapter
ALL_STAGES = STAGES + OPTIONAL_STAGES
STAGE4_LABELS = ("YES", "NO")
WORLD_TRUE, WORLD_FALSE, WORLD_UNKNOWN = "TRUE", "FALSE", "NOT ENOUGH KNOWLEDGE"
WORLD_LABELS = (WORLD_TRUE, WORLD_FALSE, WORLD_UNKNOWN)
LABELS: dict[str, tuple[str, ...]] = {"stage1": (), "stage2": STAGE2_LABELS, "stage3": STAGE3_LABELS,
                                      "stage4": STAGE4_LABELS, "world": WORLD_LABELS}

# Turn rules: the claim categories each counts as safe (README "Turn rules").
# * "safe": VERIFIED, ABSTENTION, OUT-OF-SCOPE; a turn with no claims, or with any claim whose category
#   could not be parsed (stage 2 or 3), is unknown.
# * "strict": the paper's Table 1 text, only VERIFIED; unknown as for "safe".
# * "authors": the authors' released evaluation (github.com/ashleylew/VISTA): code_base/run_metric.py
#   drops a claim whose stage 2 answer is neither VERIFIED nor UNVERIFIABLE; evaluation/normalize.py
#   gives an unreadable stage 3 answer the category None and evaluation/metrics.py ``predict_label``
#   makes such a turn unknown; a turn with no claims left is faithful (``all()`` of nothing). Its VISTA
#   score (``turn_vista_score``) leaves None categories out and is None without claims.
SAFE, STRICT, AUTHORS = "safe", "strict", "authors"
SAFE_CATEGORIES = {SAFE: {VERIFIED, ABSTENTION, OUT_OF_SCOPE}, STRICT: {VERIFIED},
                   AUTHORS: {VERIFIED, ABSTENTION, OUT_OF_SCOPE}}
RULES = tuple(SAFE_CATEGORIES)
JOINS_BACKGROUND = {VERIFIED, OUT_OF_SCOPE}     # verified and out-of-scope claims join the background

# The world stage's three-way turn verdict (README "World knowledge"), beside VISTA's own verdicts.
FACTUAL_HALLUCINATION, NON_FACTUAL_HALLUCINATION = "factual hallucination", "non-factual hallucination"
WORLD_VERDICTS = (FAITHFUL, FACTUAL_HALLUCINATION, NON_FACTUAL_HALLUCINATION, UNKNOWN)
