"""The HTML report in a real headless Chromium (Debian's ``chromium`` driven by Playwright): the page a
score run writes loads with no external request, shows every scored turn, and its filters work when
clicked; a screenshot is written."""

from __future__ import annotations

import copy
import importlib.util
import shutil

import pytest
from helpers import SAMPLE

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.browser, pytest.mark.skipif(
    CHROMIUM is None or importlib.util.find_spec("playwright") is None,
    reason="needs Debian's chromium (apt-get install chromium) and playwright (the test extra)")]


@pytest.fixture(scope="module")
def scored(embedded_backend, tmp_path_factory):
    from vista_distill.data.io import read_conversations
    from vista_distill.scorer import VistaScorer

    out = tmp_path_factory.mktemp("html") / "out.jsonl"
    scorer = VistaScorer(backend=embedded_backend, max_claims=3, max_new_tokens={"stage1": 64, "stage3": 16})
    result = scorer.score(read_conversations(SAMPLE)[:1])
    from vista_distill.scoring.page import write_score_page

    result.write(out)
    write_score_page(result, out)
    return result, out


def _browser():
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    return pw, pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])


def _shown(page) -> int:
    return page.evaluate("[...document.querySelectorAll('.turn')].filter(t => t.style.display !== 'none').length")


def test_score_report_loads_counts_turns_and_filters(scored, tmp_path):
    result, out = scored
    page_path = out.with_name("out.report.html")
    assert page_path.exists()
    scored_recs = [r for r in result.records if r["scored"]]
    wrong = [r for r in scored_recs if r["gold_label"] and r["verdicts"]["safe"] != r["gold_label"]]
    pw, browser = _browser()
    try:
        page = browser.new_page()
        requests = []
        page.on("request", lambda req: requests.append(req.url))
        page.goto(page_path.as_uri())
        assert _shown(page) == len(scored_recs) > 0
        assert page.inner_text("#shown") == str(len(scored_recs))
        assert {u.split(":", 1)[0] for u in requests} <= {"file", "data"}     # self-contained
        # every claim is on the page with its category
        assert page.locator(".turn .claim").count() == sum(len(r["claims"]) for r in scored_recs)
        page.click("#f-wrong")
        assert _shown(page) == len(wrong) and page.inner_text("#shown") == str(len(wrong))
        page.click("#f-wrong")
        page.locator("details").first.click()      # the reference opens on demand
        assert page.locator("details[open] pre").first.inner_text().strip() == scored_recs[0]["reference"].strip()
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        assert (tmp_path / "report.png").stat().st_size > 10_000
    finally:
        browser.close()
        pw.stop()


def test_disagreement_and_system_filters(scored, tmp_path):
    from vista_distill.scoring.page import write_html

    result, _ = scored
    student = [r for r in result.records]
    teacher = copy.deepcopy(student)
    flip = next(r for r in teacher if r["scored"])
    flip["verdicts"]["safe"] = "faithful" if flip["verdicts"]["safe"] != "faithful" else "hallucinated"
    path = write_html(tmp_path / "eval.html", "eval", {"student": student, "teacher": teacher})
    n = sum(r["scored"] for r in student)
    pw, browser = _browser()
    try:
        page = browser.new_page()
        page.goto(path.as_uri())
        assert _shown(page) == 2 * n
        page.select_option("#f-system", "teacher")
        assert _shown(page) == n
        page.click("#f-disagree")
        assert _shown(page) == 1
        assert page.locator(".turn:visible .meta").first.inner_text().startswith("teacher")
    finally:
        browser.close()
        pw.stop()
