"""Re-parse every recorded raw model answer with the current parsers and count what changes.

Looks through JSON and JSONL files for two record shapes:

* engine turn records (``TurnResult.to_dict``: eval ``records/*.jsonl``): ``stage1_raw`` and its claims,
  each claim's ``stage2``/``stage3`` dict ({"label", "probs", "raw", ...}) and the turn's ``stage4``;
* distillation records (silver ``records.jsonl``): ``stage``, ``raw`` and ``parsed``.

A label chosen by likelihood scoring (a stage dict with ``probs`` and no ``explanation``, or a silver
record whose call-cache entry has ``probs``, or that generated no tokens and whose raw is the label)
was never parsed, so it is counted as skipped. For the rest the recorded label is compared with
``parse_label`` now; stage 1 compares the recorded claims with ``parse_claim_list`` now (after the
engine's de-duplication and ``max_claims`` cap). Where a turn's claims are unchanged its verdict is
recomputed with ``engine.turn_verdict`` from the re-parsed categories (ignoring that a changed category
of an earlier turn would change the background of later ones).

    python bench/reparse.py [PATH ...] [--out-dir bench/results]

PATH defaults to bench/results. Writes reparse.md and reparse.json to --out-dir.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUTPUTS = ("reparse.json", "reparse.md")
N_EXAMPLES = 5


def _records(obj: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(kind, record) for every turn or silver record anywhere inside a parsed JSON value."""
    if isinstance(obj, dict):
        if "stage1_raw" in obj and isinstance(obj.get("claims"), list):
            yield "turn", obj
            return
        if obj.get("stage") in ("stage1", "stage2", "stage3", "stage4") and "raw" in obj and "parsed" in obj:
            yield "silver", obj
            return
        for v in obj.values():
            yield from _records(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _records(v)


def _load(path: Path) -> Iterator[Any]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        print(f"warning: {path}: unreadable ({e}); file skipped", file=sys.stderr)
        return
    if path.suffix != ".jsonl":
        try:
            yield json.loads(text)
        except ValueError as e:
            print(f"warning: {path}: not JSON ({e}); file skipped", file=sys.stderr)
        return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except ValueError as e:
                print(f"warning: {path}:{n}: not JSON ({e}); line skipped", file=sys.stderr)


def _text_parsed(stage: dict[str, Any]) -> bool:
    """Was this stage dict's label read from generated text (rather than chosen by scoring)?"""
    return "explanation" in stage or not stage.get("probs")


class Tally:
    """Counts for one file."""

    def __init__(self) -> None:
        self.labels: dict[str, Counter] = defaultdict(Counter)        # stage -> reparsed/skipped/changed
        self.transitions: dict[str, Counter] = defaultdict(Counter)   # stage -> "old -> new"
        self.claims = Counter()
        self.verdicts: dict[str, Counter] = defaultdict(Counter)      # rule -> recomputed/changed/...
        self.verdict_transitions: dict[str, Counter] = defaultdict(Counter)
        self.examples: list[dict[str, Any]] = []

    def label(self, stage: str, raw: str | None, old: str | None, labels: tuple[str, ...]) -> str | None:
        from vista_distill.pipeline.parsing import parse_label

        parsed = parse_label(raw or "", labels)
        self.labels[stage]["reparsed"] += 1
        self.transitions[stage][f"{old} -> {parsed.label}"] += 1
        if parsed.label != old:
            self.labels[stage]["changed"] += 1
            self._example(stage, raw, old, parsed.label, parsed.error)
        return parsed.label

    def stage1(self, raw: str, old: list[str], truncated: bool, limit: int) -> bool:
        from vista_distill.pipeline.engine import dedupe_claims
        from vista_distill.pipeline.parsing import parse_claim_list

        parsed = parse_claim_list(raw, truncated=truncated)
        new = dedupe_claims(parsed.claims, limit)[0]
        c = self.claims
        c["reparsed"] += 1
        c["claims_old"] += len(old)
        c["claims_new"] += len(new)
        c["refusals"] += parsed.refusal
        c["truncated_lines"] += parsed.truncated_line is not None
        c["rejected_lines"] += len(parsed.rejected)
        for _, why in parsed.rejected:
            c[f"rejected: {why}"] += 1
        if new != old:
            c["changed"] += 1
            self._example("stage1", raw, old, new, "; ".join(f"{ln!r}: {why}" for ln, why in parsed.rejected))
        return new == old

    def _example(self, stage: str, raw: str | None, old: Any, new: Any, why: str | None) -> None:
        if sum(e["stage"] == stage for e in self.examples) < N_EXAMPLES:
            self.examples.append({"stage": stage, "raw": (raw or "")[:300], "old": old, "new": new, "why": why})

    def to_dict(self) -> dict[str, Any]:
        return {
            "labels": {s: dict(c) for s, c in sorted(self.labels.items())},
            "label_transitions": {s: dict(c.most_common()) for s, c in sorted(self.transitions.items())},
            "stage1": dict(self.claims),
            "verdicts": {r: dict(c) for r, c in sorted(self.verdicts.items())},
            "verdict_transitions": {r: dict(c.most_common()) for r, c in sorted(self.verdict_transitions.items())},
            "examples": self.examples,
        }


def _stage_label(t: Tally, stage: str, d: Any, labels: tuple[str, ...]) -> str | None:
    """A claim's stage label: re-parsed when it was read from text, as recorded when it was scored."""
    if not isinstance(d, dict):
        return None
    if _text_parsed(d):
        return t.label(stage, d.get("raw"), d.get("label"), labels)
    t.labels[stage]["skipped (scored)"] += 1
    return d.get("label")


def _turn(rec: dict[str, Any], t: Tally, limit: int) -> None:
    from vista_distill.pipeline.engine import RULES, ClaimResult, turn_verdict
    from vista_distill.pipeline.templates import get_template

    s2_labels = tuple(get_template("stage2", "fewshot").labels)
    s3_labels = tuple(get_template("stage3", "fewshot").labels)
    same_claims = t.stage1(rec.get("stage1_raw") or "", [c.get("text", "") for c in rec["claims"]],
                           bool(rec.get("stage1_truncated")), limit)
    stage4 = rec.get("stage4")
    if isinstance(stage4, dict):
        if _text_parsed(stage4):
            t.label("stage4", stage4.get("raw"), stage4.get("label"), ("YES", "NO"))
        else:
            t.labels["stage4"]["skipped (scored)"] += 1

    blocked: str | None = None if same_claims else "claim list changed"
    rebuilt: list[ClaimResult] = []
    for c in rec["claims"]:
        label2 = _stage_label(t, "stage2", c.get("stage2"), s2_labels)
        label3 = _stage_label(t, "stage3", c.get("stage3"), s3_labels)
        if label2 == "VERIFIED":
            category = "VERIFIED"
        elif label2 == "UNVERIFIABLE":
            if not isinstance(c.get("stage3"), dict):
                blocked = blocked or "stage 3 needed but never asked"
            category = label3
        else:
            category = None
        rebuilt.append(ClaimResult(c.get("text", ""), category=category,
                                   error=None if category else "unparseable after re-parse"))
    if not rec.get("scored") or not rec.get("verdicts"):
        return
    for rule in RULES:
        old = rec["verdicts"].get(rule)
        if old is None:
            continue
        if blocked:
            t.verdicts[rule][f"not recomputed: {blocked}"] += 1
            continue
        new = turn_verdict(rebuilt, rule)[0]
        t.verdicts[rule]["recomputed"] += 1
        t.verdict_transitions[rule][f"{old} -> {new}"] += 1
        if new != old:
            t.verdicts[rule]["changed"] += 1


def _silver_scored(rec: dict[str, Any], path: Path) -> bool:
    key = rec.get("cache_key")
    if key:
        entry = path.parent / "calls" / key[:2] / f"{key}.json"
        if entry.is_file():
            cached = json.loads(entry.read_text(encoding="utf-8"))
            return bool(cached.get("probs")) and cached.get("label") is not None
    label = (rec.get("parsed") or {}).get("label")
    return not rec.get("votes") and rec.get("completion_tokens") == 0 and (rec.get("raw") or "").strip() == label


def _silver(rec: dict[str, Any], path: Path, t: Tally, limit: int) -> None:
    from vista_distill.pipeline.templates import get_template

    stage, parsed = rec["stage"], rec.get("parsed") or {}
    if stage == "stage1":
        t.stage1(rec.get("raw") or "", list(parsed.get("claims") or []), False, limit)
    elif _silver_scored(rec, path):
        t.labels[stage]["skipped (scored)"] += 1
    else:
        t.label(stage, rec.get("raw"), parsed.get("label"), tuple(get_template(stage, "fewshot").labels))


def reparse(paths: list[Path], out_dir: Path) -> dict[str, Any]:
    from vista_distill.pipeline.engine import EngineConfig

    limit = EngineConfig().max_claims
    files: dict[str, Any] = {}
    scanned = 0
    for root in paths:
        found = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in (".json", ".jsonl"))
        for path in found:
            if path.parent.name == "calls" or path.parent.parent.name == "calls" or \
                    (path.parent.resolve() == out_dir.resolve() and path.name in OUTPUTS):
                continue   # call-cache entries duplicate the silver records; skip our own output
            scanned += 1
            t, n = Tally(), Counter()
            for obj in _load(path):
                for kind, rec in _records(obj):
                    n[kind] += 1
                    if kind == "turn":
                        _turn(rec, t, limit)
                    else:
                        _silver(rec, path, t, limit)
            if n:
                files[_show(path)] = {"records": dict(n), **t.to_dict()}
    return {"paths": [_show(p) for p in paths], "files_scanned": scanned, "max_claims": limit,
            "paths_with_records": {_show(p): sum(f == _show(p) or f.startswith(_show(p).rstrip("/") + "/")
                                                 for f in files) for p in paths},
            "files": files, "totals": _totals(files)}


def _show(p: Path) -> str:
    p = p.resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def _totals(files: dict[str, Any]) -> dict[str, Any]:
    labels: dict[str, Counter] = defaultdict(Counter)
    trans: dict[str, Counter] = defaultdict(Counter)
    stage1, verdicts = Counter(), defaultdict(Counter)
    vtrans: dict[str, Counter] = defaultdict(Counter)
    for f in files.values():
        for s, c in f["labels"].items():
            labels[s].update(c)
        for s, c in f["label_transitions"].items():
            trans[s].update(c)
        stage1.update(f["stage1"])
        for r, c in f["verdicts"].items():
            verdicts[r].update(c)
        for r, c in f["verdict_transitions"].items():
            vtrans[r].update(c)
    return {"labels": {s: dict(c) for s, c in sorted(labels.items())},
            "label_transitions": {s: dict(c.most_common()) for s, c in sorted(trans.items())},
            "stage1": dict(stage1), "verdicts": {r: dict(c) for r, c in sorted(verdicts.items())},
            "verdict_transitions": {r: dict(c.most_common()) for r, c in sorted(vtrans.items())}}


def _markdown(res: dict[str, Any]) -> str:
    where = ", ".join(f"`{p}`" + (" (outside this repository)" if p.startswith("/") else "") for p in res["paths"])
    per_path = ", ".join(f"`{p}`: {n}" for p, n in res["paths_with_records"].items())
    out = ["# Re-parse of recorded raw answers with the strict parsers", "",
           (f"Paths: {where}; {res['files_scanned']} JSON/JSONL files scanned, {len(res['files'])} with records "
           f"of raw answers ({per_path}). Produced by `python bench/reparse.py {' '.join(res['paths'])}`."), "",
           ("A label chosen by likelihood scoring was never parsed from text: it is counted as skipped. Stage 1 "
           "compares the recorded claims with the new parse after de-duplication and the `max_claims` cap "
           f"({res['max_claims']}); turn verdicts are recomputed where the claims are unchanged."), ""]
    if not res["files"]:
        out += ["No recorded raw model answers were found: nothing to re-parse.", ""]
    sections = [("Totals", res["totals"])] + [(f"`{k}` ({v['records']})", v) for k, v in res["files"].items()]
    for title, d in sections:
        out += [f"## {title}", "", "| stage | re-parsed | skipped (scored) | label changed |", "|---|---|---|---|"]
        for s, c in d["labels"].items():
            out.append(f"| {s} | {c.get('reparsed', 0)} | {c.get('skipped (scored)', 0)} | {c.get('changed', 0)} |")
        s1 = d["stage1"]
        if s1:
            out.append(f"| stage1 (claim lists) | {s1.get('reparsed', 0)} | - | {s1.get('changed', 0)} |")
        out.append("")
        if s1:
            extra = ", ".join(f"{k} {v}" for k, v in sorted(s1.items()) if k not in ("reparsed", "changed"))
            out += [f"Stage 1: {extra}.", ""]
        for s, c in d["label_transitions"].items():
            out += [f"{s} old -> new: " + ", ".join(f"{k}: {v}" for k, v in c.items()), ""]
        for r, c in d["verdicts"].items():
            out += [f"Turn verdicts ({r}): " + ", ".join(f"{k} {v}" for k, v in c.items())
                    + ("; old -> new: " + ", ".join(f"{k}: {v}" for k, v in d["verdict_transitions"].get(r, {}).items())
                       if d["verdict_transitions"].get(r) else ""), ""]
        for e in d.get("examples", []):
            out += [f"- {e['stage']}: {e['raw'][:160]!r} -> old {e['old']!r}, new {e['new']!r}"
                    + (f" ({e['why'][:160]})" if e["why"] else "")]
        if d.get("examples"):
            out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path, default=[ROOT / "bench" / "results"])
    ap.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args(argv)
    missing = [p for p in args.paths if not p.exists()]
    if missing:
        print(f"error: {', '.join(map(str, missing))}: no such file or directory", file=sys.stderr)
        return 1
    res = reparse(args.paths, args.out_dir)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "reparse.json").write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    (args.out_dir / "reparse.md").write_text(_markdown(res) + "\n", encoding="utf-8")
    t = res["totals"]
    print(f"{res['files_scanned']} files scanned, {len(res['files'])} with raw answers; labels: {t['labels']}; "
          f"stage1: {t['stage1']}; verdicts: {t['verdicts']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
