"""Evaluation of students, teacher and baselines (``vista-distill eval``), on top of :mod:`..scoring` (the
pipeline runs, metrics, significance tests, evidence probes and the records page).

* :mod:`.systems`: each system (student, base, teacher, cheap baselines, the paper's baselines) run over the material;
* :mod:`.baselines`: LLM-as-Judge and FActScore-style baselines as engine programs;
* :mod:`.comparison`: McNemar per pair, common coverage, bootstrap intervals, comparison with an earlier run;
* :mod:`.run`: the rounds, journal, metrics and ``results.json``; :mod:`.report`: ``report.md`` and plots;
* :mod:`.cli`: the ``eval`` subcommand.
"""
