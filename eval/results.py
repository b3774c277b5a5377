"""``results.json`` as dataclasses: what an evaluation run measured, read by attribute.

:class:`Results` is the whole file; its parts are :class:`TurnMetrics` and :class:`ClaimMetrics` per system, group
(benchmark or ``overall``) and rule, the McNemar pairs (:class:`McNemarPair`), the bootstrap intervals, the claim
level with the human claims given, the three-way verdicts, each system's status, efficiency and evidence probes.
``Results.from_dict(d).to_dict() == d`` key for key and in order, so ``results.json`` on disk stays as it was:
a key a part does not declare is kept in its ``extra``, a section the run did not write stays ``None`` and is not
written back. A mistyped name raises ``AttributeError`` where a dict walk printed '–'; the tuning section too
(:class:`Tuning`). The generic :class:`Part`, the metric and comparison parts and the stage rules and attribution
(:class:`StageRules`, :class:`AttributionEntry`) are in :mod:`.result_parts`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..scoring.metrics import OVERALL
from .result_parts import (
    PAIRS,
    AttributionEntry,
    Calibration,
    ClaimMetrics,
    GroupMetrics,
    Interval,
    McNemarPair,
    Part,
    StageRules,
    TurnMetrics,
    _f,
    list_of,
    map_of,
    part,
)


@dataclass
class Significance(Part):
    test: str | None = _f()
    by_rule: dict[str, dict[str, list[McNemarPair]]] | None = _f(PAIRS)


@dataclass
class CommonGroup(Part):
    """``common_coverage.by_rule.<rule>.<group>``: the gold turns every system gave a verdict."""

    n: int | None = _f()
    n_gold: int | None = _f()
    coverage: float | None = _f()
    accuracy: dict[str, float] | None = _f()


@dataclass
class CommonCoverage(Part):
    systems: list[str] | None = _f()
    by_rule: dict[str, dict[str, CommonGroup]] | None = _f(map_of(map_of(part(CommonGroup))))


@dataclass
class MajorityTurn(Part):
    label: str | None = _f()
    n_gold: int | None = _f()
    accuracy: float | None = _f()


@dataclass
class MajorityClaim(Part):
    label: str | None = _f()
    human_claims: int | None = _f()
    accuracy: float | None = _f()
    macro_f1: float | None = _f()
    binary_label: str | None = _f()
    binary_accuracy: float | None = _f()


@dataclass
class MajorityGroup(Part):
    """``majority.<group>``: the majority of the test labels."""

    turn: MajorityTurn | None = _f(part(MajorityTurn))
    claim: MajorityClaim | None = _f(part(MajorityClaim))


# -- the claims given, the probes, the three-way verdicts ---------------------------------------------------

@dataclass
class StageParts(Part):
    """``given_claims.parts.<system>``: stage 2 part by part on the human claims."""

    claims: int | None = _f()
    head_applied: int | None = _f()
    adapter_alone: float | None = _f()
    as_labelled: float | None = _f()
    overlap_rule: float | None = _f()


@dataclass
class GivenClaims(Part):
    """``given_claims``: stages 2 and 3 on the human claims (``systems.<name>.<group>``, ``turns.<name>.<rule>``,
    ``significance.<stage2|category>.<group>``)."""

    systems: dict[str, dict[str, ClaimMetrics]] | None = _f(map_of(map_of(part(ClaimMetrics))))
    turns: dict[str, dict[str, TurnMetrics]] | None = _f(map_of(map_of(part(TurnMetrics))))
    parts: dict[str, StageParts] | None = _f(map_of(part(StageParts)))
    significance: dict[str, dict[str, list[McNemarPair]]] | None = _f(PAIRS)


@dataclass
class WorldMetrics(Part):
    n: int | None = _f()
    macro_precision: float | None = _f()
    macro_recall: float | None = _f()
    macro_f1: float | None = _f()
    unknown: int | None = _f()
    label_accuracy: dict[str, float] | None = _f()
    support: dict[str, int] | None = _f()
    confusion: dict[str, Any] | None = _f()


@dataclass
class World(Part):
    """``world``: three-way verdicts beside the published rows."""

    systems: dict[str, WorldMetrics] | None = _f(map_of(part(WorldMetrics)))
    published_macro_f1: dict[str, float] | None = _f()
    note: str | None = _f()


@dataclass
class EvidenceProbes(Part):
    """``systems.<name>.evidence``: the evidence probes (scoring/evidence.py); the counts stay in ``extra``."""

    stage: str | None = _f()
    deletion_flip_rate: float | None = _f()
    foreign_reference_auc: float | None = _f()
    claim_only_accuracy: float | None = _f()
    accuracy: float | None = _f()
    edit_flip_rate: float | None = _f()
    edit_auc: float | None = _f()


# -- systems, material, settings -----------------------------------------------------------------------------

@dataclass
class Description(Part):
    """``systems.<name>.description``: what the system is (the backend's own keys stay in ``extra``)."""

    backend: str | None = _f()
    prompts: str | None = _f()
    baseline: str | None = _f()
    adapters: dict[str, str] | None = _f()
    judge_parsed_from: dict[str, Any] | None = _f()
    note: str | None = _f()
    load_s: float | None = _f()


@dataclass
class Efficiency(Part):
    wall_s: float | None = _f()
    turns_per_s: float | None = _f()
    prompt_tokens: int | None = _f()
    completion_tokens: int | None = _f()
    peak_rss_mb: float | None = _f()
    cuda_max_memory_allocated_mb: float | None = _f()
    cost_per_1k_turns: dict[str, Any] | None = _f()
    cache_hit_share: float | None = _f()


@dataclass
class SystemEntry(Part):
    """``systems.<name>``: status (``ok``, ``skipped``, ...), the reason, what it is, its cost and probes."""

    status: str | None = _f()
    reason: str | None = _f()
    description: Description | None = _f(part(Description))
    efficiency: Efficiency | None = _f(part(Efficiency))
    evidence: EvidenceProbes | None = _f(part(EvidenceProbes))


@dataclass
class TimeBudget(Part):
    max_minutes: float | None = _f()
    first_round: int | None = _f()
    rounds_run: int | None = _f()
    conversations_planned: int | None = _f()
    conversations_evaluated: int | None = _f()
    conversations_claim_level: int | None = _f()


@dataclass
class TrainingOverlap(Part):
    checked_against: str | None = _f()
    evaluated_conversations_in_student_training: int | None = _f()
    test_conversations_in_student_training: int | None = _f()


@dataclass
class Material(Part):
    """``material``: the test conversations (``sources``: one report per data source)."""

    sources: list[dict[str, Any]] | None = _f()
    input: str | None = _f()
    limit: int | None = _f()
    heldout_only: bool | None = _f()
    conversations: int | None = _f()
    scored_turns: int | None = _f()
    gold_turns: int | None = _f()
    human_claims: int | None = _f()
    conversation_ids_sha256: str | None = _f()
    student_training_overlap: TrainingOverlap | None = _f(part(TrainingOverlap))
    time_budget: TimeBudget | None = _f(part(TimeBudget))


@dataclass
class Settings(Part):
    rules: list[str] | None = _f()
    systems: list[str] | None = _f()
    seed: int | None = _f()
    bootstrap: int | None = _f()
    mcnemar: str | None = _f()
    match_threshold: float | None = _f()
    match_embeddings: bool | None = _f()
    calibration_bins: int | None = _f()
    batch_size: int | None = _f()
    threads: int | None = _f()
    evidence_conversations: int | None = _f()


@dataclass
class Hardware(Part):
    device: str | None = _f()
    device_name: str | None = _f()
    torch: str | None = _f()
    dtype: str | None = _f()
    dtype_reason: str | None = _f()
    threads: int | None = _f()
    threads_reason: str | None = _f()


@dataclass
class Comparison(Part):
    """``compare``: this run against a previous ``results.json`` (``--compare``)."""

    previous: str | None = _f()
    identical: bool | None = _f()
    differences: list[str] | None = _f()


@dataclass
class ClaimMatching(Part):
    method: str | None = _f()
    threshold: float | None = _f()


@dataclass
class TunedSystem(Part):
    """``tuned.systems.<name>``: the stage 2 cut-off tuned on the dev split, fixed and tuned on the test claims
    (or only ``reason`` where it could not be tuned)."""

    reason: str | None = _f()
    threshold: float | None = _f()
    dev_claims: int | None = _f()
    dev_accuracy_tuned: float | None = _f()
    dev_accuracy_fixed: float | None = _f()
    test_claims: int | None = _f()
    fixed: float | None = _f()
    tuned: float | None = _f()
    delta: float | None = _f()
    pvalue: float | None = _f()
    b: int | None = _f()
    c: int | None = _f()


@dataclass
class TuningDev(Part):
    sources: list[dict[str, Any]] | None = _f()
    conversations: int | None = _f()


@dataclass
class Tuning(Part):
    """``tuned`` (eval/tuning.py): fixed against tuned stage 2, and the tuned student against each tuned system."""

    method: str | None = _f()
    dev: TuningDev | None = _f(part(TuningDev))
    systems: dict[str, TunedSystem] | None = _f(map_of(part(TunedSystem)))
    student_vs_tuned: list[McNemarPair] | None = _f(list_of(part(McNemarPair)))


BOOTSTRAP = map_of(map_of(map_of(map_of(part(Interval)))))   # {system: {rule: {group: {metric: interval}}}}


@dataclass
class Results(Part):
    """The whole of ``results.json``."""

    recipe: str | None = _f()
    recipe_path: str | None = _f()
    settings: Settings | None = _f(part(Settings))
    material: Material | None = _f(part(Material))
    systems: dict[str, SystemEntry] | None = _f(map_of(part(SystemEntry)))
    metrics: dict[str, dict[str, GroupMetrics]] | None = _f(map_of(map_of(part(GroupMetrics))))
    common_coverage: CommonCoverage | None = _f(part(CommonCoverage))
    majority: dict[str, MajorityGroup] | None = _f(map_of(part(MajorityGroup)))
    claim_matching: ClaimMatching | None = _f(part(ClaimMatching))
    significance: Significance | None = _f(part(Significance))
    bootstrap: dict[str, dict[str, dict[str, dict[str, Interval]]]] | None = _f(BOOTSTRAP)
    world: World | None = _f(part(World))
    given_claims: GivenClaims | None = _f(part(GivenClaims))
    stage_rules: StageRules | None = _f(part(StageRules))
    attribution: dict[str, AttributionEntry] | None = _f(map_of(part(AttributionEntry)))
    tuned: Tuning | None = _f(part(Tuning))
    fingerprint: str | None = _f()
    wall_s: float | None = _f()
    hardware: Hardware | None = _f(part(Hardware))
    model_loads: dict[str, Any] | None = _f()
    compare: Comparison | None = _f(part(Comparison))
    plots: list[str] | None = _f()

    @classmethod
    def of(cls, results: Results | Mapping[str, Any]) -> Results:
        """``results`` typed (a dict as ``run_eval`` builds it or ``results.json`` holds it)."""
        return results if isinstance(results, Results) else cls.from_dict(results)

    @property
    def rules(self) -> list[str]:
        return list(self.settings.rules or []) if self.settings else []

    def group(self, system: str, group: str) -> GroupMetrics:
        """``metrics.<system>.<group>`` (empty where that system has no such group)."""
        return ((self.metrics or {}).get(system) or {}).get(group) or GroupMetrics()

    def turn(self, system: str, group: str, rule: str) -> TurnMetrics:
        """``metrics.<system>.<group>.turn.<rule>`` (empty where absent)."""
        return (self.group(system, group).turn or {}).get(rule) or TurnMetrics()

    def interval(self, system: str, rule: str, group: str, metric: str = "accuracy") -> Interval:
        """``bootstrap.<system>.<rule>.<group>.<metric>`` (empty where absent)."""
        return (((self.bootstrap or {}).get(system) or {}).get(rule) or {}).get(group, {}).get(metric) or Interval()

    def majority_of(self, group: str) -> MajorityGroup:
        return (self.majority or {}).get(group) or MajorityGroup()

    def pairs(self, rule: str, group: str) -> list[McNemarPair]:
        """The McNemar pairs of one rule and group."""
        by_rule = (self.significance.by_rule if self.significance else None) or {}
        return list((by_rule.get(rule) or {}).get(group) or [])

    def pair(self, rule: str, group: str, a: str, b: str) -> McNemarPair | None:
        """The McNemar pair of (a, b) with b/c and Δ oriented as a - b."""
        for p in self.pairs(rule, group):
            if (p.system_1, p.system_2) == (a, b):
                return p
            if (p.system_1, p.system_2) == (b, a):
                return p.flipped()
        return None

    def ok_systems(self) -> list[str]:
        """The systems that ran the whole pipeline (a claim-level-only one has no turn metrics)."""
        return [n for n, s in (self.systems or {}).items() if s.status == "ok" and (self.metrics or {}).get(n)]

    def benchmark_groups(self) -> list[str]:
        """Every benchmark any system has, then ``overall``."""
        groups: list[str] = []
        for m in (self.metrics or {}).values():
            groups += [g for g in m if g not in groups]
        return [g for g in groups if g != OVERALL] + [OVERALL]

    def common_systems(self) -> list[str]:
        return list((self.common_coverage.systems if self.common_coverage else None) or [])

    def common_group(self, rule: str, group: str) -> CommonGroup:
        by_rule = (self.common_coverage.by_rule if self.common_coverage else None) or {}
        return (by_rule.get(rule) or {}).get(group) or CommonGroup()


__all__ = [
    "Calibration", "ClaimMatching", "ClaimMetrics", "CommonCoverage", "CommonGroup", "Comparison", "Description",
    "Efficiency", "EvidenceProbes", "GivenClaims", "GroupMetrics", "Hardware", "Interval", "MajorityClaim",
    "MajorityGroup", "MajorityTurn", "Material", "McNemarPair", "Part", "Results", "Settings", "Significance",
    "StageParts", "SystemEntry", "TimeBudget", "TrainingOverlap", "TunedSystem", "Tuning", "TuningDev",
    "TurnMetrics", "World", "WorldMetrics",
]
