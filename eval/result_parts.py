"""The parts of ``results.json`` (:mod:`.results`): :class:`Part`, one JSON object as a dataclass that writes back
the keys it was read with, in order (undeclared ones in ``extra``), and the metric and comparison parts:
:class:`TurnMetrics`, :class:`ClaimMetrics`, :class:`GroupMetrics`, :class:`Interval`, :class:`McNemarPair`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

P = TypeVar("P", bound="Part")


@dataclass(frozen=True)
class _Conv:
    """How a field's JSON value becomes its typed value and back (``None`` passes through both ways)."""

    load: Callable[[Any], Any]
    dump: Callable[[Any], Any]


def part(cls: type[Part]) -> _Conv:
    return _Conv(cls.from_dict, lambda p: p.to_dict())


def map_of(conv: _Conv) -> _Conv:
    return _Conv(lambda d: {k: _load(conv, v) for k, v in d.items()},
                 lambda d: {k: _dump(conv, v) for k, v in d.items()})


def list_of(conv: _Conv) -> _Conv:
    return _Conv(lambda xs: [_load(conv, x) for x in xs], lambda xs: [_dump(conv, x) for x in xs])


def _load(conv: _Conv | None, v: Any) -> Any:
    return v if conv is None or v is None else conv.load(v)


def _dump(conv: _Conv | None, v: Any) -> Any:
    return v if conv is None or v is None else conv.dump(v)


def _f(conv: _Conv | None = None) -> Any:
    """A declared key: ``None`` when absent; ``conv`` types its value."""
    return field(default=None, metadata={"conv": conv})


@dataclass
class Part:
    """One object of ``results.json``. ``extra``: its keys no field declares; the keys' order is kept."""

    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    _keys: tuple[str, ...] = field(default=(), repr=False, compare=False)
    _SKIP: ClassVar[frozenset[str]] = frozenset({"extra", "_keys"})

    @classmethod
    def _fields(cls) -> dict[str, _Conv | None]:
        return {f.name: f.metadata.get("conv") for f in fields(cls) if f.name not in cls._SKIP}

    @classmethod
    def from_dict(cls: type[P], d: Mapping[str, Any]) -> P:
        declared = cls._fields()
        kw = {k: _load(declared[k], v) for k, v in d.items() if k in declared}
        return cls(**kw, extra={k: v for k, v in d.items() if k not in declared}, _keys=tuple(d))

    def to_dict(self) -> dict[str, Any]:
        """The object as ``results.json`` holds it: the keys it was read with, in their order, then any set since."""
        declared = self._fields()
        keys = list(self._keys) + [k for k in declared if k not in self._keys and getattr(self, k) is not None]
        keys += [k for k in self.extra if k not in keys]
        return {k: _dump(declared[k], getattr(self, k)) if k in declared else self.extra[k] for k in keys}

    def __bool__(self) -> bool:   # like the dict it was: empty is false
        return bool(self._keys or self.extra) or any(getattr(self, k) is not None for k in self._fields())


# -- metrics (scoring/metrics.py) ----------------------------------------------------------------------------

@dataclass
class TurnMetrics(Part):
    """``metrics.<system>.<group>.turn.<rule>``: turn verdicts against the gold labels under one rule."""

    n_gold: int | None = _f()
    n: int | None = _f()
    coverage: float | None = _f()
    gold_balance: dict[str, int] | None = _f()
    accuracy_all: float | None = _f()
    accuracy: float | None = _f()
    balanced_accuracy: float | None = _f()
    precision: float | None = _f()
    recall: float | None = _f()
    f1: float | None = _f()
    macro_f1: float | None = _f()
    confusion: dict[str, Any] | None = _f()
    auc_vista_score: float | None = _f()
    accuracy_common: float | None = _f()
    n_common: int | None = _f()


@dataclass
class Calibration(Part):
    """Stage 2 P(VERIFIED) on matched claims."""

    n: int | None = _f()
    brier: float | None = _f()
    ece: float | None = _f()
    bins: int | None = _f()
    roc_auc: float | None = _f()
    curve: dict[str, list[float]] | None = _f()


@dataclass
class ClaimMetrics(Part):
    """``metrics.<system>.<group>.claim`` (and ``given_claims.systems``): claims against the human claims."""

    turns: int | None = _f()
    human_claims: int | None = _f()
    predicted_claims: int | None = _f()
    matched: int | None = _f()
    matched_exact: int | None = _f()
    matched_embedding: int | None = _f()
    human_claims_matched: float | None = _f()
    set_f1: float | None = _f()
    set_jaccard: float | None = _f()
    set_f1_turn_mean: float | None = _f()
    set_jaccard_turn_mean: float | None = _f()
    n_labelled_matches: int | None = _f()
    binary_accuracy: float | None = _f()
    accuracy: float | None = _f()
    macro_f1: float | None = _f()
    macro_f1_labels: list[str] | None = _f()
    confusion: dict[str, Any] | None = _f()
    stage2_calibration: Calibration | None = _f(part(Calibration))


@dataclass
class GroupMetrics(Part):
    """``metrics.<system>.<group>``: the turn metrics per rule and the claim metrics."""

    scored_turns: int | None = _f()
    turn: dict[str, TurnMetrics] | None = _f(map_of(part(TurnMetrics)))
    claim: ClaimMetrics | None = _f(part(ClaimMetrics))


@dataclass
class Interval(Part):
    """``bootstrap.<system>.<rule>.<group>.<metric>``: a seeded bootstrap interval."""

    accuracy: float | None = _f()
    low: float | None = _f()
    high: float | None = _f()
    n: int | None = _f()
    resamples: int | None = _f()
    confidence: float | None = _f()


# -- comparisons (scoring/significance.py) ------------------------------------------------------------------

@dataclass
class McNemarPair(Part):
    """One McNemar test of two systems on the same items; ``b`` / ``c`` the discordant counts, ``delta`` = 1 - 2."""

    system_1: str | None = _f()
    system_2: str | None = _f()
    b: int | None = _f()
    c: int | None = _f()
    statistic: float | None = _f()
    pvalue: float | None = _f()
    variant: str | None = _f()
    n: int | None = _f()
    accuracy_1: float | None = _f()
    accuracy_2: float | None = _f()
    delta: float | None = _f()
    mark: str | None = _f()

    def flipped(self) -> McNemarPair:
        """The same test with the systems swapped (b/c and Δ oriented as system_1 - system_2)."""
        d = dict(self.to_dict(), system_1=self.system_2, system_2=self.system_1, b=self.c, c=self.b)
        if self.delta is not None:
            d.update(delta=-self.delta, accuracy_1=self.accuracy_2, accuracy_2=self.accuracy_1)
        return McNemarPair.from_dict(d)


PAIRS = map_of(map_of(list_of(part(McNemarPair))))   # {rule or level: {group: [pair, ...]}}


# -- each stage beside its rule, and the attribution (eval/stage_rules.py) ---------------------------------

@dataclass
class StageSystem(Part):
    """``stage_rules.<stage2|stage3>.systems.<name>``: the system's accuracy beside the stage's rule's, McNemar."""

    n: int | None = _f()
    system_accuracy: float | None = _f()
    rule_accuracy: float | None = _f()
    pvalue: float | None = _f()


@dataclass
class Stage1System(Part):
    """``stage_rules.stage1.systems.<name>``: claim F1 against the human claims, the system's and the rule's."""

    human_claims: int | None = _f()
    f1: float | None = _f()
    rule: dict[str, Any] | None = _f()


@dataclass
class StageSection(Part):
    rule: str | None = _f()
    items: str | None = _f()
    reason: str | None = _f()
    systems: dict[str, Any] | None = _f()


@dataclass
class Stage1Section(StageSection):
    systems: dict[str, Stage1System] | None = _f(map_of(part(Stage1System)))


@dataclass
class Stage23Section(StageSection):
    systems: dict[str, StageSystem] | None = _f(map_of(part(StageSystem)))


@dataclass
class StageRules(Part):
    """``stage_rules``: each model-backed system against the rule of each stage."""

    rules: dict[str, str] | None = _f()
    stage1: Stage1Section | None = _f(part(Stage1Section))
    stage2: Stage23Section | None = _f(part(Stage23Section))
    stage3: Stage23Section | None = _f(part(Stage23Section))


@dataclass
class Fallback(Part):
    """``attribution.<name>.stage1_fallback``: the turns stage 1 left to the sentence splitter."""

    turns: int | None = _f()
    by_rule: dict[str, dict[str, Any]] | None = _f()


@dataclass
class AttributionEntry(Part):
    """``attribution.<name>``: the rows under each rule (scoring/attribution.py reads each table)."""

    rows: dict[str, dict[str, Any]] | None = _f()
    stage1_fallback: Fallback | None = _f(part(Fallback))
