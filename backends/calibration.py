"""A named calibration of trained stage adapters to a user's own domain, kept beside them.

What is fitted after training (the stage 2 evidence head and its decision threshold, the stage 3 label prior;
:mod:`.evidence_head`, :mod:`.label_prior`) is fitted on the silver validation split the distillation made. A
calibration refits them on a labelled dev file of the user's (``vista-distill calibrate``,
:mod:`..scoring.calibrate`) and is saved as ``<adapters>/calibrations/<name>.json``::

    {"name": ..., "stage2": {evidence head, "threshold": t} | null, "stage3": {"shift": {label: number}} | null,
     "rules": {stage: {"rule": name, "threshold": t (stage 2)}},
     "fitted": {"dev": {path, sha256, conversations, claims}, "stage1": {...}, "stage2": {...}, "stage3": {...}}}

A stage left ``null`` keeps what training left (the cross-validation did not find the refit better); a stage in
``rules`` is answered by its cheap rule (``backends/cheap_baselines.py: StageRules``), which beat the student there
by the margin ``fitted`` states. Applying a calibration (:func:`apply_calibration`; ``VistaScorer.use_calibration``,
``score --calibration NAME``, ``from_pretrained(calibration=NAME)``, ``eval.calibration``) replaces the backend's
stage 2 head and stage 3 prior and routes the ruled stages to their rule, in process and served alike; without one
nothing changes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..pipeline.protocol import Backend
from ..runtime.numbers import percent, pvalue
from .cheap_baselines import RULE_NAMES, StageRules
from .evidence_head import EvidenceHead
from .label_prior import LabelPrior, shift_problem
from .stage_routing import StageRouter

FOLDER = "calibrations"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise ValueError(f"calibration name {name!r}: use letters, digits, '_', '-', '.' (at most 64, no '..')")
    return name


@dataclass(frozen=True)
class Calibration:
    """A stage 2 head (with its threshold) and a stage 3 label prior, either ``None`` where training's stays; the
    stages a cheap rule answers (``rules``: ``{stage: {"rule": name}}``, stage 2 with its ``threshold``)."""

    name: str
    stage2: EvidenceHead | None = None
    stage3: LabelPrior | None = None
    fitted: dict[str, Any] = field(default_factory=dict)
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"name": self.name, "stage2": None if self.stage2 is None else asdict(self.stage2),
                "stage3": None if self.stage3 is None else {"shift": self.stage3.shift},
                "rules": self.rules, "fitted": self.fitted}

    def rule_line(self) -> str | None:
        """One line naming the stages a rule answers and what chose it; None when no rule does."""
        if not self.rules:
            return None
        parts = []
        for stage, rule in sorted(self.rules.items()):
            f = self.fitted.get(stage) or {}
            why = f.get("rule_won") or {}
            cut = f" above {rule['threshold']:g}" if rule.get("threshold") is not None else ""
            rule_pct, student_pct = (percent(why.get(k), unit=" %") for k in ("rule_accuracy", "student_accuracy"))
            parts.append(f"{stage} by the {rule['rule']}{cut}" + (
                f" ({rule_pct} vs the student's {student_pct} out of fold, McNemar p = {pvalue(why['p_value'], 2)})"
                if why else ""))
        dev = (self.fitted.get("dev") or {}).get("path")
        return f"calibration {self.name}{f' (fitted on {dev})' if dev else ''}: " + "; ".join(parts)

    def save(self, adapter_folder: str | Path) -> Path:
        path = calibration_path(adapter_folder, self.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)   # a crash never leaves half a calibration under its name
        return path

    @classmethod
    def load_file(cls, path: str | Path) -> Calibration:
        """The calibration a file holds; a damaged one is a ``SchemaError`` naming the file and field."""
        from ..data.io import SchemaError

        path = Path(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise SchemaError(path, f"not a calibration ({' '.join(str(e).split())}); run vista-distill calibrate "
                                    "again") from e
        if not isinstance(d, dict):
            raise SchemaError(path, "expected an object {name, stage2, stage3, fitted}")
        try:
            head = None if d.get("stage2") is None else EvidenceHead.from_dict(d["stage2"])
        except (ValueError, KeyError, TypeError, OverflowError, AttributeError) as e:
            raise SchemaError(path, f"not an evidence head ({e})", field="stage2") from e
        prior = None
        if d.get("stage3") is not None:
            shift = d["stage3"].get("shift") if isinstance(d["stage3"], dict) else None
            if not isinstance(shift, dict):
                raise SchemaError(path, "expected {shift: {label: number}}", field="stage3")
            if problem := shift_problem(shift):
                raise SchemaError(path, problem[1], field=f"stage3.shift.{problem[0]}")
            prior = LabelPrior({str(k): float(v) for k, v in shift.items()})
        fitted = d.get("fitted") if isinstance(d.get("fitted"), dict) else {}
        rules = d.get("rules") or {}
        if not isinstance(rules, dict):
            raise SchemaError(path, "expected {stage: {rule: name}}", field="rules")
        for stage, rule in rules.items():
            if problem := _rule_problem(stage, rule):
                raise SchemaError(path, problem, field=f"rules.{stage}")
        return cls(str(d.get("name") or path.stem), head, prior, fitted, rules)

    @classmethod
    def load(cls, adapter_folder: str | Path, name: str) -> Calibration:
        """The calibration ``name`` kept beside ``adapter_folder``; a missing one names those that exist."""
        path = calibration_path(adapter_folder, name)
        if not path.exists():
            have = available(adapter_folder)
            raise FileNotFoundError(f"no calibration {name!r} in {path.parent} (there: {', '.join(have) or 'none'}); "
                                    f"make one with: vista-distill calibrate --adapters {adapter_folder} --dev FILE "
                                    f"--calibration {name}")
        return cls.load_file(path)


def _rule_problem(stage: str, rule: Any) -> str | None:
    if stage not in RULE_NAMES:
        return f"no rule answers {stage!r} (rules answer {', '.join(RULE_NAMES)})"
    if not isinstance(rule, dict) or rule.get("rule") != RULE_NAMES[stage]:
        return f"expected {{\"rule\": \"{RULE_NAMES[stage]}\"}}, got {rule!r}"
    t = rule.get("threshold")
    if t is not None and (stage != "stage2" or isinstance(t, bool) or not isinstance(t, (int, float))
                          or not 0.0 <= t <= 1.0):
        return f"threshold {t!r}: only stage 2's overlap rule has one, a share in [0, 1]"
    return None


def calibration_path(adapter_folder: str | Path, name: str) -> Path:
    return Path(adapter_folder) / FOLDER / f"{check_name(name)}.json"


def available(adapter_folder: str | Path) -> list[str]:
    return sorted(p.stem for p in (Path(adapter_folder) / FOLDER).glob("*.json"))


def reset_calibration(backend: Backend) -> Backend:
    """``backend`` as training left it: a calibration's router taken off, training's stage 2 heads and stage 3
    priors put back (kept the first time a calibration is applied), so one calibration never mixes with the one
    before it."""
    if isinstance(backend, StageRouter) and backend.purpose == "calibration":
        backend = backend.inner
    if not hasattr(backend, "heads") or not hasattr(backend, "priors"):
        raise TypeError(f"{getattr(backend, 'name', type(backend).__name__)}: a calibration applies to the student "
                        "(in process or served), not to this backend")
    if not hasattr(backend, "trained_heads"):
        backend.trained_heads, backend.trained_priors = dict(backend.heads), dict(backend.priors)
    backend.heads, backend.priors = dict(backend.trained_heads), dict(backend.trained_priors)
    backend.calibration = None
    return backend


def apply_calibration(backend: Backend, calibration: Calibration) -> Backend:
    """The backend that scores with ``calibration``: its stage 2 head and stage 3 prior put in ``backend`` (in
    process or served: both keep ``heads`` and ``priors`` by stage; a stage the calibration leaves ``None`` keeps
    what it had), and, where it chose a rule, ``backend`` behind a :class:`StageRouter` that sends those stages to
    the rule. A calibration applied before is taken off first (:func:`reset_calibration`)."""
    backend = reset_calibration(backend)
    if calibration.stage2 is not None:
        backend.heads["stage2"] = calibration.stage2
    if calibration.stage3 is not None:
        backend.priors["stage3"] = calibration.stage3
    backend.calibration = calibration.name
    if not calibration.rules:
        return backend
    rules = StageRules(threshold=(calibration.rules.get("stage2") or {}).get("threshold"))
    return StageRouter(backend, {stage: rules for stage in calibration.rules}, purpose="calibration")
