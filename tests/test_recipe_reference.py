"""docs/recipe.md is generated from the recipe dataclasses: it lists every field and fails here when it drifts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from vista_distill.config import Recipe
from vista_distill.config.reference import DOC, field_comments, main, render_reference


def test_docs_recipe_md_is_what_the_dataclasses_generate():
    assert DOC.read_text() == render_reference(), "run: python -m vista_distill.config.reference"


def test_every_recipe_field_is_a_row_with_a_description():
    text = render_reference()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    for section in ("teacher", "pipeline", "data", "distill", "student", "lora", "train", "eval"):
        assert f"## `{section}`" in text
        cls = type(getattr(Recipe(), section))
        for f in dataclasses.fields(cls):
            assert any(r.startswith(f"| `{f.name}` |") for r in rows), f"{section}.{f.name}"
    undocumented = [r.split("|")[1].strip() for r in rows if r.rstrip().endswith("|  |")]
    assert not undocumented, f"give these fields a comment in config/recipe.py: {undocumented}"


@dataclass
class _Probe:
    plain: int = 1                  # a trailing comment
    # a comment above
    above: str = "x"
    continued: list[str] = field(default_factory=list)   # begins here
                                                          # and goes on here
    bare: float = 0.5


def test_comments_are_read_from_where_fields_carry_them():
    assert field_comments(_Probe) == {"plain": "a trailing comment", "above": "a comment above",
                                      "continued": "begins here and goes on here", "bare": ""}


def test_check_fails_on_a_drifted_page(tmp_path):
    page = tmp_path / "recipe.md"
    page.write_text(render_reference())
    assert main(["--check", "--output", str(page)]) == 0
    page.write_text(render_reference().replace("| `max_steps` |", "| `max_step` |"))
    assert main(["--check", "--output", str(page)]) == 1
