"""The VISTA stages and the labels each answers with, defined once.

Stages 1-3 are the method (paper section 3) and the student's three adapters; stage 4 (does the turn
contradict earlier turns?) is this project's optional addition, answered by the base model; ``world``
(is a LACKING EVIDENCE claim true in the world?) is this project's optional world-knowledge stage, after
the mixed-context study (Wang et al., Findings of ACL 2025): it tells a factual hallucination from a
non-factual one, and can be distilled into a fourth adapter like stages 1-3.
"""

from __future__ import annotations

from ..data.schema import STAGE2_LABELS, STAGE3_LABELS

STAGES = ("stage1", "stage2", "stage3")          # the method's stages: one silver dataset and adapter each
OPTIONAL_STAGES = ("stage4", "world")
DISTILLED_STAGES = STAGES + ("world",)          # the stages that can have silver data and an adapter
ALL_STAGES = STAGES + OPTIONAL_STAGES
STAGE4_LABELS = ("YES", "NO")
WORLD_TRUE, WORLD_FALSE, WORLD_UNKNOWN = "TRUE", "FALSE", "NOT ENOUGH KNOWLEDGE"
WORLD_LABELS = (WORLD_TRUE, WORLD_FALSE, WORLD_UNKNOWN)
# the labels a stage's answer is drawn from (stage 1 answers with a list of claims)
LABELS: dict[str, tuple[str, ...]] = {"stage1": (), "stage2": STAGE2_LABELS, "stage3": STAGE3_LABELS,
                                      "stage4": STAGE4_LABELS, "world": WORLD_LABELS}
