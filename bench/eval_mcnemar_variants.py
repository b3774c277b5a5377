"""Which McNemar variant did the VISTA paper use? Recompute every Appendix B row (Tables 7-10:
AIS, BEGIN, FADE, FaithDial) from its discordant counts with each variant and count the rows whose
printed p-value is reproduced to the printed precision.

    python bench/eval_mcnemar_variants.py [PAPER_TXT] > bench/results/eval_mcnemar_variants.md
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from vista_distill.scoring.significance import MCNEMAR_VARIANTS, mcnemar_test

DEFAULT_PAPER = Path(__file__).resolve().parents[2] / "shared" / "papers" / "000_39f77af0f91519fa.txt"
ROW = re.compile(r"^(?:(?P<model>[\w.-]+)\s+)?(?P<cmp>(?:VISTA|LLM-as-Judge)\s+–\s+\S+)\s+(?P<delta>-?[\d.]+)\s+"
                 r"(?P<p>[\d.]+)\s+(?P<sig>\*+|ns)\s+b=(?P<b>\d+),\s*c=(?P<c>\d+)\s*$")
TABLE = re.compile(r"^Table (7|8|9|10): \**(\w+)")


def parse_rows(text: str) -> list[dict]:
    """Rows of Tables 7-10; a table's caption follows its rows, so rows are buffered until it."""
    rows, buf, model = [], [], None
    for line in text.splitlines():
        line = line.strip()
        m = ROW.match(line)
        if m:
            model = m.group("model") or model
            buf.append({"model": model, "comparison": m.group("cmp"), "p": m.group("p"),
                        "b": int(m.group("b")), "c": int(m.group("c"))})
            continue
        t = TABLE.match(line)
        if t and buf:
            for r in buf:
                r["benchmark"] = t.group(2)
            rows += buf
            buf = []
    return rows


def main(argv: list[str]) -> int:
    paper = Path(argv[1]) if len(argv) > 1 else DEFAULT_PAPER
    rows = parse_rows(paper.read_text(encoding="utf-8"))
    if not rows:
        print(f"{paper}: no Appendix B rows found", file=sys.stderr)
        return 2
    hits = {v: 0 for v in MCNEMAR_VARIANTS}
    lines = []
    for r in rows:
        decimals = len(r["p"].split(".")[1]) if "." in r["p"] else 0
        tol = 0.5 * 10 ** -decimals + 1e-12
        cells = []
        for v in MCNEMAR_VARIANTS:
            p = mcnemar_test(r["b"], r["c"], v)["pvalue"]
            ok = abs(p - float(r["p"])) <= tol
            hits[v] += ok
            cells.append(f"{p:.6f}{'' if ok else ' ✗'}")
        lines.append(f"| {r['benchmark']} | {r['model']} | {r['comparison']} | {r['b']} | {r['c']} | {r['p']} | "
                     + " | ".join(cells) + " |")
    print(f"# McNemar variant behind the VISTA paper's Appendix B\n\nSource: `{paper.name}`, Tables 7-10, "
          f"{len(rows)} rows. A row is reproduced when the recomputed p-value equals the printed one to the printed "
          "precision (✗ marks the others). Variants: `exact` = two-sided binomial test on b, c; `chi2` = "
          "chi-square without, `chi2-cc` = with continuity correction (statsmodels `mcnemar`).\n")
    print("| variant | rows reproduced |\n| --- | --- |")
    for v in MCNEMAR_VARIANTS:
        print(f"| {v} | {hits[v]}/{len(rows)} |")
    print("\n| benchmark | model | comparison | b | c | paper p | " + " | ".join(MCNEMAR_VARIANTS) + " |")
    print("| --- | --- | --- | --- | --- | --- | " + " | ".join("---" for _ in MCNEMAR_VARIANTS) + " |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
