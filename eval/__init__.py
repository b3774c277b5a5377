"""Evaluation of students, teacher and baselines (``vista-distill eval``).

* :mod:`.baselines`: LLM-as-Judge and FActScore-style baselines as engine programs;
* :mod:`.metrics`: turn, claim (matched to human claims) and calibration metrics;
* :mod:`.significance`: McNemar (exact binomial by default, as the paper) and bootstrap intervals;
* :mod:`.run`: the systems, measurement and ``results.json``; :mod:`.report`: ``report.md`` and plots;
* :mod:`.cli`: the ``eval`` subcommand.
"""
