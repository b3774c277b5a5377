"""Every measured figure in README.md, docs/ and bench/results/cpu_kinds.md is rendered from the result file that holds
it.

A page holds its figures in cog blocks (https://nedbatchelder.com/code/cog/): the code names the file and the value,
the text under it is what that code rendered, never typed::

    <!-- [[[cog fig("{s:.2f} s a turn (`{f}`)", f=F, s=js(F := "x.json", "turns.seconds")) ]]] -->
    1.23 s a turn (`bench/results/x.json`)
    <!-- [[[end]]] -->

    python bench/figures.py            # render every page again
    python bench/figures.py --check    # exit 1 when a page differs from a fresh rendering (tests/test_figures.py)
    python bench/figures.py docs/performance.md   # one page

What a block may call: ``js`` (a JSON value by path), ``md`` (a value a benchmark wrote into a markdown file, by
regular expression), ``fig`` (write the text), ``demo`` (a demo summary, refused when a time limit cut its run)
and ``pct`` / ``p`` (formats). A missing file, key or match fails the rendering with the file and what was sought.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from vista_distill.runtime.numbers import percent, pvalue

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PAGES = ["README.md", "docs/*.md", "bench/results/cpu_kinds.md"]   # cpu_kinds.md: the per-kind table docs cite

results_root = RESULTS   # where js / md read (a test points it at a changed copy)
cited: set[Path] = set()   # every result file a rendering read


class FigureError(Exception):
    """A figure whose file, key or match is not there."""


def _path(file: str) -> Path:
    path = results_root / file
    if not path.is_file():
        raise FigureError(f"bench/results/{file}: no such result file")
    cited.add(path)
    return path


def js(file: str, key: str) -> Any:
    """The value at ``key`` (dotted, ``[i]`` for a list item) of the JSON file ``bench/results/<file>``."""
    value: Any = json.loads(_path(file).read_text(encoding="utf-8"))
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", key):
        try:
            value = value[int(part[1:-1])] if part.startswith("[") else value[part]
        except (KeyError, IndexError, TypeError):
            raise FigureError(f"bench/results/{file}: no {key!r} (at {part!r})") from None
    return value


def md(file: str, pattern: str, group: int = 1) -> str:
    """What group ``group`` of the regular expression ``pattern`` matches first in ``bench/results/<file>``."""
    found = re.search(pattern, _path(file).read_text(encoding="utf-8"), re.M)
    if found is None:
        raise FigureError(f"bench/results/{file}: nothing matches {pattern!r}")
    return found.group(group)


def num(file: str, pattern: str, group: int = 1) -> float:
    """``md``'s match as a number (thousands commas allowed)."""
    return float(md(file, pattern, group).replace(",", ""))


def pct(x: float, digits: int = 1) -> str:
    """A fraction as a percentage: 0.7164 -> '71.6%'."""
    return percent(x, digits, unit="%")


def p(x: float) -> str:
    """A p-value as the reports print it: two significant digits."""
    return pvalue(x, 2)


def cells(file: str, start: str) -> list[str]:
    """The cells of the first table row of ``bench/results/<file>`` starting with the regular expression ``start``."""
    line = md(file, rf"^(\| (?:{start}).*)$")
    return [c.strip() for c in line.strip().strip("|").split("|")]


def rng(values: list[float], f: str = "{:.0f}") -> str:
    """``lo-hi`` of ``values`` in format ``f``; one figure where both read the same."""
    lo, hi = f.format(min(values)), f.format(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def hw(file: str, dtype: str, threads: int) -> list[float]:
    """Matmul GFLOP/s, prefill tok/s, decode tok/s and LoRA step s of a ``bench/hardware.py`` row."""
    return [float(c) for c in cells(file, rf"{dtype} \| \w+ \| {threads} \|")[3:7]]


def demo(file: str) -> dict[str, Any]:
    """A demo summary (``bench/results/demo_cpu/<file>``), refused when a time limit cut its run: a cut run's figures
    are never a headline."""
    summary = js(f"demo_cpu/{file}", "")
    if summary.get("full_run") is not True:
        cut = "; ".join(summary.get("cut") or ["it records no steps done and planned"])
        raise FigureError(f"bench/results/demo_cpu/{file}: not a full run ({cut})")
    return summary


def headline(summary: dict[str, Any], prefix: str) -> str:
    """The line of a demo summary's ``headline`` that starts with ``prefix``."""
    for line in summary.get("headline") or []:
        if line.startswith(prefix):
            return line
    raise FigureError(f"demo summary: no headline line starting {prefix!r}")


def demo_facts(file: str) -> dict[str, Any]:
    """A full demo run's figures from its summary's headline lines (the closing summary's, as the demo prints them):
    ``claims``, ``turns`` (safe rule) and ``tuned`` per system, ``fixed`` per tuned system, and the student against
    each other system as ``(difference, n, McNemar p)`` in ``vs_claims``, ``vs_turns`` and ``vs_tuned``; with the
    summary's own ``minutes``, ``steps``, ``dialogues``, ``tuned_on``, ``hardware``, ``commit``."""
    s = demo(file)
    out: dict[str, Any] = {k: s.get(k) for k in ("minutes", "steps", "dialogues", "tuned_on", "hardware", "commit",
                                                  "minutes_with_install")}
    out.update(claims={}, turns={}, tuned={}, fixed={}, vs_claims={}, vs_turns={}, vs_tuned={})
    for line in s.get("headline") or []:
        name = line.split()[0].rstrip(",")   # "adapter, no head: ..." is the student's adapter alone
        if m := re.search(r"claims \(stage 2\) fixed ([\d.]+), tuned ([\d.]+)", line):
            out["fixed"][name], out["tuned"][name] = float(m[1]), float(m[2])
            continue
        if m := re.match(r"student - (\w+), (claims \(stage 2\)|turns \(safe\)|claims, both tuned): "
                         r"([+-][\d.]+) over (\d+), McNemar p = ([\d.e-]+)", line):
            key = {"claims (stage 2)": "vs_claims", "turns (safe)": "vs_turns", "claims, both tuned": "vs_tuned"}[m[2]]
            out[key][m[1]] = (float(m[3]), int(m[4]), float(m[5]))
            continue
        if m := re.search(r"claims \(stage 2\) ([\d.]+)", line):
            out["claims"].setdefault(name, float(m[1]))
        if m := re.search(r"turn accuracy safe ([\d.]+)", line):
            out["turns"][name] = float(m[1])
    return out


def ahead(mine: float, other: float, p_value: float, name: str = "the student", rival: str = "the overlap rule") -> str:
    """Which system is ahead, said plainly, and whether chance could explain it."""
    if mine == other:
        return f"{name} and {rival} tie"
    first, second = (name, rival) if mine > other else (rival, name)
    return f"{first} is ahead of {second}" + (" (within chance)" if p_value >= 0.05 else "")


def demo_table(file: str) -> str:
    """A full demo run's accuracies as a markdown table: claims fixed and tuned, turns (safe rule), per system, with
    McNemar p of the student against each."""
    d = demo_facts(file)
    systems = ["student", "overlap", "pmi", "base", "majority"]

    def cell(level: str, name: str) -> str:
        value = d[level].get(name)
        if value is None:
            return ""
        vs = d[{"claims": "vs_claims", "tuned": "vs_tuned", "turns": "vs_turns"}[level]].get(name)
        return pct(value) + (f" (p = {p(vs[2])})" if vs else "")

    n = d["vs_claims"]["overlap"][1]
    rows = [f"| claims (stage 2, {n} human claims), fixed | " + " | ".join(cell("claims", s) for s in systems) + " |",
            f"| claims, cut-off tuned on {d['tuned_on']['dev_dialogues']} dev dialogues | "
            + " | ".join(cell("tuned", s) for s in systems) + " |",
            f"| turns (whole pipeline, safe rule, {d['dialogues']['whole_pipeline']}) | "
            + " | ".join(cell("turns", s) for s in systems) + " |"]
    head = "| " + " | ".join(["held-out FaithDial", *systems]) + " |\n| --- |" + " ---: |" * len(systems)
    return head + "\n" + "\n".join(rows)


def attribution(table: dict[str, Any] | None, where: str) -> str:
    """An attribution table (``scoring/attribution.py``: results.json ``attribution.<system>.rows.<rule>``) as
    markdown; ``where`` names the file it came from in the error when there is none."""
    from vista_distill.eval.report_format import markdown_table
    from vista_distill.scoring.attribution import ROW_HEADER, attribution_rows

    if not table or not table.get("rows"):
        raise FigureError(f"{where}: no attribution table")
    return markdown_table(ROW_HEADER, attribution_rows(table))


def calibration(file: str) -> dict[str, Any]:
    """A ``bench/vista_human_dev.py --calibration`` result, refused when its adapters do not record their training
    steps or a time limit cut them (``adapter_steps``: done < planned)."""
    data = js(file, "")
    steps = data.get("adapter_steps")
    if not steps:
        raise FigureError(f"bench/results/{file}: its adapters record no training steps (adapter_steps)")
    cut = [f"{stage}: {s['done']} of {s['planned']} steps" for stage, s in steps.items()
           if s.get("done") is None or s.get("planned") is None or s["done"] < s["planned"]]
    if cut:
        raise FigureError(f"bench/results/{file}: adapters cut by a time limit ({'; '.join(cut)})")
    return data


def machine(hardware: dict[str, Any]) -> str:
    """``2-core Intel Xeon with AMX, bf16``: a demo summary's machine as the docs name it."""
    cpu = re.sub(r"\((R|TM)\)|\bProcessor\b|\bCPU\b", "", str(hardware.get("cpu") or "CPU")).split("@")[0]
    dtype = {"bfloat16": "bf16"}.get(str(hardware.get("dtype")), str(hardware.get("dtype")))
    isa = hardware.get("cpu_isa")
    return f"{hardware.get('usable_cores', '?')}-core {' '.join(cpu.split())}" + (f" with {isa}" if isa else "") \
        + f", {dtype}"


def readme_demo(file: str, float32_file: str) -> None:
    """README.md's demo paragraphs: the full run of ``file`` (which system is ahead at each level, and whether chance
    explains it) and the float32 run of ``float32_file`` (its minutes, steps and dialogues)."""
    d = demo_facts(file)
    rows = [("claims", d["claims"], d["vs_claims"]), ("turns", d["turns"], d["vs_turns"]),
            ("tuned claims", d["tuned"], d["vs_tuned"])]
    behind = [level for level, acc, _ in rows if acc["student"] < acc["overlap"]]
    lead = ("the word-overlap rule is ahead of the student at all three levels" if len(behind) == 3 else
            "the student is ahead of the word-overlap rule at all three levels" if not behind else
            f"the word-overlap rule is ahead of the student on the {' and '.join(behind)} only")
    chance = ("none of these differences is significant at 0.05" if all(vs["overlap"][2] >= 0.05 for _, _, vs in rows)
              else "p below 0.05 where marked")
    steps = " / ".join(str(v["done"]) for v in d["steps"].values())
    fig("{m} minutes with the install on a {machine}: every training step ({steps}) and all {n} held-out dialogues "
        "(`bench/results/demo_cpu/{f}`, which names the commit). At this 135M scale {lead}, and {chance}: the student "
        "scores {sc} of the {nc} human claims against the rule's {oc} (McNemar p = {pc}), {st} of the turns against "
        "{ot} (p = {pt}), and with each system's stage 2 cut-off tuned on {dev} of FaithDial's validation dialogues "
        "{su} against {ou} (p = {pu}). The whole table: [docs/demo.md](docs/demo.md).", width=116,
        m=d["minutes_with_install"], machine=machine(d["hardware"]), n=d["dialogues"]["held_out"], f=file,
        steps=steps, lead=lead, chance=chance, nc=d["vs_claims"]["overlap"][1], sc=pct(d["claims"]["student"]),
        oc=pct(d["claims"]["overlap"]), pc=p(d["vs_claims"]["overlap"][2]), st=pct(d["turns"]["student"]),
        ot=pct(d["turns"]["overlap"]), pt=p(d["vs_turns"]["overlap"][2]), dev=d["tuned_on"]["dev_dialogues"],
        su=pct(d["tuned"]["student"]), ou=pct(d["tuned"]["overlap"]), pu=p(d["vs_tuned"]["overlap"][2]))
    rows = {(r["stage1"], r["stage3"]): r for r in demo(file)["attribution"]["rows"]["safe"]["rows"]}
    runs, human1, human3 = (rows[k] for k in (("student", "student"), ("human claims", "student"),
                                               ("human claims", "human labels")))
    fig("\nStage by stage ([docs/evaluate.md](docs/evaluate.md#where-the-turns-are-lost-stage-by-stage)): with each "
        "response judged whole, as FaithDial's annotators judged it, in place of the student's own claims, {h1} of the "
        "{n} turns are right against {r} as it runs (p = {p1}); with the human categories at stage 3 as well, {h3} "
        "(p = {p3}).", width=116, n=runs["turns"], r=pct(runs["accuracy"]), h1=pct(human1["accuracy"]),
        p1=p(human1["vs_above"]["pvalue"]), h3=pct(human3["accuracy"]), p3=p(human3["vs_above"]["pvalue"]))
    d = demo_facts(float32_file)
    fig("\nWith the CPU's bf16 path off (`student.dtype=float32`, as `auto` chooses on a CPU without AMX or "
        "AVX512-BF16) the same machine ran it whole in {m} minutes with the install: {steps} steps, {n} of {n} "
        "held-out dialogues (`bench/results/demo_cpu/{f}`). An AVX2-only CPU is not measured with this version; "
        "the demo sets no time limit, so there it takes longer and still runs every step.", width=116,
        m=d["minutes_with_install"], f=float32_file, n=d["dialogues"]["held_out"],
        steps=" / ".join(str(v["done"]) for v in d["steps"].values()))


def readme_tests(kind: str) -> None:
    """README.md's test-command line: both tiers' minutes on ``kind`` (``test_command_time.json``)."""
    runs = [r for r in js("test_command_time.json", "runs") if r["cpu_kind"] == kind]
    if not runs:
        raise FigureError(f"bench/results/test_command_time.json: no run on {kind}")
    r = runs[0]
    fig("{w} minutes with the install, {n} passed and none skipped, on a fresh clone on a 2-core {cpu} with AMX; the "
        "fast tier {fast} minutes, {nf} passed (`bench/results/test_command_time.json`, which names the commit).",
        width=116, w=r["full"]["wall_minutes"], n=r["full"]["passed"], cpu=r["cpu"],
        fast=r["fast"]["pytest_minutes"], nf=r["fast"]["passed"])


def fig(template: str, width: int | None = None, **values: Any) -> None:
    """Write ``template`` with ``values`` filled in as the block's text; ``width``: wrap each paragraph (blank-line
    separated, not a table or a list) at that many columns."""
    import textwrap

    import cog  # the module cog provides while it runs a page's code

    text = template.format(**values)
    if width:
        lead = text[:len(text) - len(text.lstrip("\n"))]   # blank lines before the text stay
        text = lead + "\n\n".join(textwrap.fill(part, width, break_on_hyphens=False, break_long_words=False)
                                    if not part.lstrip().startswith(("|", "- ")) else part
                                    for part in text.lstrip("\n").split("\n\n"))
    cog.outl(text)


def _files(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in PAGES for p in root.glob(pattern)})


def run(check: bool = False, pages: list[Path] | None = None) -> int:
    """Render (or with ``check`` compare) every page; 0 when all are as rendered."""
    from cogapp import Cog
    from cogapp.errors import CogCheckFailed, CogUserException

    cited.clear()
    argv = ["cog", "--verbosity=0", "-p", "from figures import *"]   # bench/ is on sys.path: the script's folder
    argv += ["--check", "--diff"] if check else ["-r"]
    try:
        Cog().callable_main(argv + [str(p) for p in pages or _files()])
    except CogCheckFailed:
        return 1
    except CogUserException as err:   # the page's code failed: its last line says why (file, key or match)
        where = re.findall(r'File "([^"]+)", line (\d+)', str(err))
        raise FigureError(str(err).strip().splitlines()[-1].removeprefix("FigureError: ")
                          + (f" (in {where[-1][0]}, line {where[-1][1]})" if where else "")) from None
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 when a page differs from a fresh rendering")
    ap.add_argument("pages", nargs="*", type=Path, help="these pages only (default: README.md and docs/*.md)")
    a = ap.parse_args(argv)
    status = run(check=a.check, pages=a.pages or None)
    if a.check and status:
        print("the figures differ from their result files: run python bench/figures.py", file=sys.stderr)
    return 1 if status else 0


if __name__ == "__main__":
    sys.exit(main())
