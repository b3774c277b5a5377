"""The scoring path every user takes (``VistaScorer.score``, ``vista-distill score``), below evaluation.

* :mod:`.run`: the pipeline over conversations (journalled, so a killed run resumes), and stages 2-3 on given
  human claims;
* :mod:`.evidence`: the evidence probes (does a scorer read its reference?) and their metrics;
* :mod:`.metrics`: turn, claim (matched to human claims) and calibration metrics; :mod:`.claim_matching`;
* :mod:`.significance`: McNemar (exact binomial by default, as the paper) and bootstrap intervals;
* :mod:`.baselines_beside`: the cheap baselines (word overlap, majority label) beside a scorer on the same claims;
* :mod:`.summary`: a run's summary; :mod:`.page`: the records as one HTML page.

:mod:`..eval` builds on these: systems, rounds, results.json and reports.
"""
