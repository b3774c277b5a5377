"""McNemar against the VISTA paper's Appendix B, and seeded bootstrap intervals."""

from __future__ import annotations

import pytest

from vista_distill.scoring.significance import (
    bootstrap_accuracy,
    mcnemar_test,
    paired_mcnemar,
    significance_mark,
)

# (table, model, comparison, b, c, printed p) — Lewis et al. 2025, Appendix B, Tables 7-10.
PAPER_ROWS = [
    ("AIS", "GPT-4o", "VISTA - LLM-as-Judge", 90, 59, 0.013712),
    ("AIS", "GPT-4o", "VISTA - FActScore", 100, 69, 0.020741),
    ("AIS", "GPT-5", "VISTA - FActScore", 64, 89, 0.051989),
    ("AIS", "DeepSeek", "LLM-as-Judge - FActScore", 67, 95, 0.033572),
    ("AIS", "Llama-70B", "VISTA - LLM-as-Judge", 84, 51, 0.005683),
    ("AIS", "Llama-8B", "VISTA - FActScore", 139, 86, 0.000499),
    ("AIS", "GPT-4o", "LLM-as-Judge - FActScore", 88, 88, 1.000000),
    ("BEGIN", "GPT-4o", "LLM-as-Judge - FActScore", 92, 69, 0.082626),
    ("BEGIN", "Llama-70B", "VISTA - LLM-as-Judge", 55, 63, 0.519491),
    ("FADE", "GPT-5", "VISTA - FActScore", 72, 44, 0.01185),
    ("FADE", "Qwen-32B", "LLM-as-Judge - FActScore", 130, 191, 0.000785),
    ("FaithDial", "GPT-5", "VISTA - FActScore", 462, 371, 0.001802),
    ("FaithDial", "GPT-4o", "LLM-as-Judge - FActScore", 335, 388, 0.05305),
]


@pytest.mark.parametrize("table,model,comparison,b,c,p", PAPER_ROWS)
def test_exact_mcnemar_reproduces_appendix_b(table, model, comparison, b, c, p):
    res = mcnemar_test(b, c)   # default variant: exact
    decimals = len(repr(p).split(".")[1])
    assert res["pvalue"] == pytest.approx(p, abs=0.5 * 10 ** -decimals), (table, model, comparison)
    assert (res["b"], res["c"], res["variant"]) == (b, c, "exact")


def test_chi_square_variants_do_not_reproduce_the_paper():
    # AIS, GPT-4o, VISTA vs LLM-as-Judge: printed p = 0.013712
    assert mcnemar_test(90, 59, "chi2")["pvalue"] == pytest.approx(0.011097, abs=1e-6)
    assert mcnemar_test(90, 59, "chi2-cc")["pvalue"] == pytest.approx(0.013983, abs=1e-6)


def test_mcnemar_edge_cases_and_bad_input():
    assert mcnemar_test(0, 0)["pvalue"] == 1.0
    with pytest.raises(ValueError, match="variant"):
        mcnemar_test(1, 2, "fisher")
    with pytest.raises(ValueError, match=">= 0"):
        mcnemar_test(-1, 2)


def test_paired_mcnemar_counts_discordant_pairs_by_hand():
    s1 = [1, 1, 1, 0, 0, 1, 1, 0]
    s2 = [1, 0, 0, 0, 1, 1, 0, 0]
    res = paired_mcnemar(s1, s2)
    # b: s1 right, s2 wrong at positions 1, 2, 6; c: s2 right, s1 wrong at position 4
    assert (res["b"], res["c"], res["n"]) == (3, 1, 8)
    assert res["accuracy_1"] == 5 / 8 and res["accuracy_2"] == 3 / 8 and res["delta"] == pytest.approx(0.25)
    # exact two-sided binomial: 2 * P(X <= 1 | n=4, p=.5) = 2 * 5/16
    assert res["pvalue"] == pytest.approx(0.625)
    assert res["mark"] == "ns"
    with pytest.raises(ValueError, match="differ in number"):
        paired_mcnemar([1], [1, 0])


def test_significance_marks():
    assert [significance_mark(p) for p in (0.0004, 0.004, 0.04, 0.06, None)] == ["***", "**", "*", "ns", ""]


def test_bootstrap_is_seeded_and_brackets_the_accuracy():
    correct = [1, 0, 1, 1, 0, 1, 1, 1] * 5
    a = bootstrap_accuracy(correct, 500, seed=3)
    b = bootstrap_accuracy(correct, 500, seed=3)
    assert a == b
    assert a["accuracy"] == 0.75 and a["low"] < 0.75 < a["high"] and a["n"] == 40
    assert bootstrap_accuracy([1, 1, 1], 100)["low"] == 1.0     # constant sample: zero-width interval
    assert bootstrap_accuracy([], 100)["accuracy"] is None


def test_paired_bootstrap_of_macro_f1_is_seeded_and_separates_a_better_system():
    from vista_distill.scoring.significance import paired_bootstrap_macro_f1

    labels = ["x", "y", "z"]
    gold = ["x", "y", "z"] * 20
    good = list(gold)
    good[0] = "y"                                   # one error
    bad = ["x"] * len(gold)                         # the majority label everywhere
    res = paired_bootstrap_macro_f1(gold, good, bad, labels, n_resamples=300, seed=1)
    assert res == paired_bootstrap_macro_f1(gold, good, bad, labels, n_resamples=300, seed=1)
    assert res["diff"] > 0.5 and res["ci95"][0] > 0 and res["p"] < 0.01 and res["resamples"] == 300
    same = paired_bootstrap_macro_f1(gold, good, good, labels, n_resamples=100)
    assert same["diff"] == 0 and same["p"] == 1.0
    with pytest.raises(ValueError, match="same length"):
        paired_bootstrap_macro_f1(gold, good[:-1], bad, labels)
