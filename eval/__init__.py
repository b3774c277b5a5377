"""Evaluation of students, teacher and baselines."""
