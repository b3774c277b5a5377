"""The recipe reference (``docs/recipe.md``), generated from the recipe dataclasses so it cannot drift from them.

Each section of :class:`~.recipe.Recipe` becomes a table of its fields: YAML key, type, default and the comment the
field carries in ``config/recipe.py`` (a trailing comment, the comment lines above it, or indented lines below it). A
section that is a backend's settings (the teacher, ``student.serving``) lists its own keys, then those of the settings
class, commented where that class is defined.

    python -m vista_distill.config.reference            # rewrite docs/recipe.md
    python -m vista_distill.config.reference --check    # exit 1 when docs/recipe.md differs from the dataclasses
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import io
import json
import re
import sys
import tokenize
import typing
from pathlib import Path
from typing import Any

from . import recipe as recipe_module
from .recipe import Recipe

DOC = Path(__file__).resolve().parents[1] / "docs" / "recipe.md"
HEADER = """# Recipe reference

Every key a recipe YAML file may hold, section by section: its type, its default and what it does. A recipe is read
by every command (`distill`, `train`, `eval`, `score`, `check`, `serve-config`, `demo`); any key can also be set on
the command line as `section.key=value` (e.g. `train.max_steps=20`). An unknown key, or a value not of its field's type
or range (a count below 1, a number that is not finite, a fraction outside 0-1), is an error that names the file and the
key, every such problem one line, before anything runs (`config/validate.py`). `{name}` in a path is the recipe's
`name`. Examples: [`recipes/`](../recipes/).

This page is generated from the dataclasses in `config/recipe.py` (`python -m vista_distill.config.reference`);
`tests/test_recipe_reference.py` fails when the two differ.
"""


def field_comments(cls: type) -> dict[str, str]:
    """The comment of each field of dataclass ``cls`` where it is declared (``cls`` or a dataclass it extends):
    trailing, above it, or continued below it."""
    out: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if dataclasses.is_dataclass(base):
            out.update(_declared_comments(base))
    return out


def _declared_comments(cls: type) -> dict[str, str]:
    """The comments of the fields declared in the body of ``cls`` (see :func:`field_comments`)."""
    lines, first = inspect.getsourcelines(cls)
    source = "".join(lines)
    comments: dict[int, tuple[int, str, bool]] = {}   # line -> (column, text, comment alone on its line)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            alone = not lines[row - 1][:col].strip()
            comments[row] = (col, tok.string.lstrip("#").strip(), alone)
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    fields = [n for n in body.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
    out: dict[str, str] = {}
    claimed: set[int] = set()   # comment lines that continue the field above them
    for i, node in enumerate(fields):
        name = node.target.id  # type: ignore[union-attr]
        end = node.end_lineno or node.lineno
        above: list[str] = []
        row = node.lineno - 1
        while row in comments and comments[row][2] and row not in claimed:
            above.insert(0, comments[row][1])
            row -= 1
        trailing = [comments[r][1] for r in range(node.lineno, end + 1) if r in comments and not comments[r][2]]
        below: list[str] = []
        row = end + 1
        stop = fields[i + 1].lineno if i + 1 < len(fields) else len(lines) + 1
        while trailing and row < stop and row in comments and comments[row][2] and comments[row][0] > node.col_offset:
            below.append(comments[row][1])
            claimed.add(row)
            row += 1
        out[name] = " ".join(above + trailing + below)
    return out


def _type_name(annotation: Any) -> str:
    """The annotation as written, a ``Literal`` alias of ``config/recipe.py`` spelt out as its values."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))

    def spell(match: re.Match[str]) -> str:
        alias = getattr(recipe_module, match.group(0), None)
        if typing.get_origin(alias) is typing.Literal:
            return " | ".join(json.dumps(v) for v in typing.get_args(alias))
        return match.group(0)

    return re.sub(r"\b[A-Z][A-Za-z]*\b", spell, text.replace("typing.", ""))


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "(required)"
    if dataclasses.is_dataclass(value):
        return "(section below)"
    return json.dumps(value, ensure_ascii=False)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _section(key: str, cls: type, out: list[str], seen: dict[type, str]) -> None:
    seen[cls] = key
    out += [f"## `{key}`", ""]
    doc = inspect.getdoc(cls) or ""
    if doc and not doc.startswith(cls.__name__ + "("):   # dataclasses give undocumented classes their signature
        out += [" ".join(doc.split()), ""]
    comments = field_comments(cls)
    out += ["| key | type | default | what it does |", "| --- | --- | --- | --- |"]
    nested: list[tuple[str, type]] = []
    own = list(inspect.get_annotations(cls))   # declared here, in source order; then the extended class's
    for f in sorted(dataclasses.fields(cls), key=lambda f: own.index(f.name) if f.name in own else len(own)):
        if not f.init or (cls is Recipe and f.name == "path"):
            continue
        section = _nested_dataclass(cls, f)
        note = comments.get(f.name, "")
        if section is not None and section in seen:
            note = f"{note} (entries: the keys of `{seen[section]}`)".strip()
        elif section is not None:
            seen[section] = f"{key}.{f.name}"
            nested.append((f"{key}.{f.name}", section))
        out.append(f"| `{f.name}` | `{_cell(_type_name(f.type))}` | `{_cell(_default(f))}` | {_cell(note)} |")
    out.append("")
    for sub_key, sub_cls in nested:
        _section(sub_key, sub_cls, out, seen)


def _nested_dataclass(cls: type, f: dataclasses.Field) -> type | None:
    """The dataclass a field holds (a section, or a list of data sources), else None."""
    hint = typing.get_type_hints(cls).get(f.name)
    candidates = [hint, *getattr(hint, "__args__", ())]
    return next((c for c in candidates if dataclasses.is_dataclass(c)), None)


def render_reference() -> str:
    """``docs/recipe.md``, from the dataclasses as they are."""
    out = [HEADER]
    out += ["## Top level", "", "| key | type | default | what it does |", "| --- | --- | --- | --- |",
            f"| `name` | `str` | `{json.dumps(Recipe().name)}` | the recipe's name: `{{name}}` in every path |", ""]
    seen: dict[type, str] = {}
    for f in dataclasses.fields(Recipe):
        section = _nested_dataclass(Recipe, f)
        if section is not None:
            _section(f.name, section, out, seen)
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write (or --check) docs/recipe.md from the recipe dataclasses.")
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/recipe.md is not what would be written")
    ap.add_argument("--output", type=Path, default=DOC)
    args = ap.parse_args(argv)
    text = render_reference()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} differs from the recipe dataclasses; run python -m vista_distill.config.reference",
                  file=sys.stderr)
            return 1
        print(f"{args.output} matches the recipe dataclasses")
        return 0
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
