"""Seeded fuzzing of the recipe reader beyond JSON-shaped mutations: bytes that are not UTF-8, YAML's own features
(aliases, deep nesting, tags), values of the wrong type or range, non-finite numbers. Each of 1,000 mutations of the
demo recipe ends in the product's error (one problem a line, each naming the file) within seconds, or loads a recipe
whose every value is of its field's declared type and in its range."""

from __future__ import annotations

import dataclasses
import math
import random
import time
import typing

import pytest
import yaml
from helpers import ROOT

from vista_distill.config import Recipe, RecipeError, load_recipe
from vista_distill.config.validate import MAX_ALIASES, MAX_DEPTH

N = 1000
DEMO = ROOT / "recipes" / "demo-cpu.yaml"
VALUES = [-1, -1e9, 0, 0.0, 1e400, -1e400, float("nan"), 10**30, True, None, "", "x" * 500, "top8", "a\nb",
          {"a": 1}, [1, 2], [], {}, "unit=sentence", 3.5, "auto", "∞"]


def _paths(node, prefix=()):
    """Every (path, value) of a loaded YAML document."""
    yield prefix, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def _set(doc, path, value):
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _structured(doc, rng):
    doc = yaml.safe_load(yaml.safe_dump(doc))
    for _ in range(rng.choice([1, 1, 2, 3])):
        paths = [p for p, _ in _paths(doc) if p]
        path = rng.choice(paths)
        kind = rng.random()
        if kind < 0.7:
            _set(doc, path, rng.choice(VALUES))
        elif kind < 0.85 and isinstance(path[-1], str):
            node = doc
            for key in path[:-1]:
                node = node[key]
            del node[path[-1]]
        else:
            _set(doc, (*path[:-1], f"{path[-1]}_extra") if isinstance(path[-1], str) else path, {"k": 1})
    return yaml.safe_dump(doc, allow_unicode=True).encode("utf-8")


def _yaml_feature(text: str, rng) -> bytes:
    lines = text.splitlines()
    kind = rng.randrange(6)
    if kind == 0:   # an alias bomb: each level ten times the last
        bomb = ["bomb0: &b0 [x, x, x, x, x, x, x, x, x, x]"] + \
            [f"bomb{i}: &b{i} [{', '.join(f'*b{i - 1}' for _ in range(10))}]" for i in range(1, rng.randint(3, 9))]
        return ("\n".join(bomb) + "\n" + text).encode("utf-8")
    if kind == 1:   # nested deeper than any recipe
        depth = rng.choice([MAX_DEPTH + 1, 200, 5000])
        return (text + "\nnested: " + "[" * depth + "]" * depth + "\n").encode("utf-8")
    if kind == 2:   # tags: YAML's own constructors, and ones a safe loader refuses
        tag = rng.choice(["!!float abc", "!!int x", "!!python/object:os.system {}", "!!binary ===", "!!timestamp 99"])
        key = rng.choice(["train.learning_rate", "eval.seed", "name"]).split(".")
        snippet = f"{key[0]}: {tag}\n" if len(key) == 1 else f"{key[0]}:\n  {key[1]}: {tag}\n"
        return (text + "\n" + snippet).encode("utf-8")
    if kind == 3:   # a few anchors and merges, as a tidy recipe might use them
        return (text + "\nbase: &base {seed: 1}\nextra: {<<: *base}\n").encode("utf-8")
    if kind == 4:   # saved in another encoding
        encoding = rng.choice(["latin-1", "utf-16", "cp1252"])
        return ("# réglages — " + "\n".join(lines)).encode(encoding, "replace")
    broken = bytearray("\n".join(lines).encode("utf-8"))   # stray bytes
    for _ in range(rng.randint(1, 4)):
        broken.insert(rng.randrange(len(broken) + 1), rng.choice([0x00, 0xFF, 0xC3, 0x80, 0x1B]))
    return bytes(broken)


def _declared_types_hold(recipe: Recipe) -> list[str]:
    """Fields whose value is not what the dataclass declares (independent of the reader's validator: numbers finite,
    ints ints, bools bools, strs strs)."""
    wrong = []

    def walk(obj, where):
        hints = typing.get_type_hints(type(obj))
        for f in dataclasses.fields(obj):
            if f.name == "path":
                continue
            value, tp = getattr(obj, f.name), hints[f.name]
            if dataclasses.is_dataclass(value):
                walk(value, f"{where}.{f.name}")
                continue
            if isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
                for i, v in enumerate(value):
                    walk(v, f"{where}.{f.name}[{i}]")
                continue
            if isinstance(value, float) and not math.isfinite(value):
                wrong.append(f"{where}.{f.name}={value}")
            for base, kind in ((int, int), (float, (int, float)), (bool, bool), (str, str)):
                if tp is base and (not isinstance(value, kind) or (base is not bool and isinstance(value, bool))):
                    wrong.append(f"{where}.{f.name}={value!r}")

    walk(recipe, "recipe")
    return wrong


def test_a_thousand_mutations_of_the_demo_recipe_end_in_one_line_errors_or_load_typed(tmp_path):
    text = DEMO.read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    path = tmp_path / "recipe.yaml"
    bad, refused = [], 0
    for seed in range(N):
        rng = random.Random(seed)
        data = _structured(doc, rng) if rng.random() < 0.6 else _yaml_feature(text, rng)
        path.write_bytes(data)
        start = time.perf_counter()
        try:
            recipe = load_recipe(path)
        except RecipeError as e:
            refused += 1
            if not all(line.strip() and "\n" not in line and str(path) in line for line in e.lines()):
                bad.append(f"seed {seed}: not one problem a line naming the file: {str(e)[:300]!r}")
        except Exception as e:  # noqa: BLE001 - what the test is for
            bad.append(f"seed {seed}: {type(e).__name__}: {str(e)[:200]}")
        else:
            bad += [f"seed {seed}: loaded {w}" for w in _declared_types_hold(recipe)]
        if time.perf_counter() - start > 5.0:   # an unbounded alias bomb took a minute
            bad.append(f"seed {seed}: took {time.perf_counter() - start:.1f} s")
    assert not bad, f"{len(bad)} of {N} mutations:\n" + "\n".join(bad[:20])
    assert refused > N // 2   # most mutations break the recipe; the rest load, typed


@pytest.mark.parametrize("data,problem", [
    (b"name: x\ntrain:\n  max_steps: {a: 1}\n", r"train.max_steps: expected an integer, got \{'a': 1\}"),
    (b"lora:\n  layers_to_transform: top8\n", "lora.layers_to_transform: expected a list, got 'top8'"),
    (b"train:\n  learning_rate: .inf\n", "train.learning_rate: expected a finite number, got inf"),
    (b"eval:\n  round_size: .nan\n", "eval.round_size: expected an integer, got nan"),
    (b"lora:\n  r: -1000000000\n", r"lora.r: -1000000000 is out of range \(expected >= 1\)"),
    (b"eval:\n  batch_size: -1\n", r"eval.batch_size: -1 is out of range \(expected >= 1\)"),
    (b"teacher:\n  timeout_s: 0\n", r"teacher.timeout_s: 0.0 is out of range \(expected > 0\)"),
    (b"eval:\n  threads: .inf\n", "eval.threads: expected int or str or null, got inf"),
    (b"data:\n  train:\n  - {benchmark: file, source: x, options: 'unit=sentence'}\n",
     r"data.train\[0\].options: expected a mapping, got 'unit=sentence'"),
    ("name: réglages\n".encode("latin-1"), r"not UTF-8 text \(byte 7"),
    ("name: x\n".encode("utf-16"), "not UTF-8 text"),
    (b"train:\n  learning_rate: !!float abc\n", "not valid YAML"),
    (b"x: " + b"[" * 100 + b"]" * 100 + b"\n", f"nested deeper than {MAX_DEPTH} levels"),
    (b"a: &a [1]\n" + b"".join(b"k%d: *a\n" % i for i in range(MAX_ALIASES + 1)), "uses of YAML aliases"),
])
def test_each_kind_of_bad_recipe_is_one_line_naming_the_key(tmp_path, data, problem):
    path = tmp_path / "r.yaml"
    path.write_bytes(data)
    with pytest.raises(RecipeError, match=problem) as err:
        load_recipe(path)
    assert all(str(path) in line for line in err.value.lines())


def test_every_problem_of_a_recipe_is_listed_each_with_its_key(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("lora:\n  r: 0\n  alpha: x\ntrain:\n  learning_rate: -1\neval:\n  bootstrap: [1]\n")
    with pytest.raises(RecipeError) as err:
        load_recipe(path)
    keys = [line.split(": ")[1] for line in err.value.lines()]
    assert keys == ["lora.r", "lora.alpha", "train.learning_rate", "eval.bootstrap"], err.value.lines()


def test_overrides_are_checked_like_the_file(tmp_path):
    with pytest.raises(RecipeError, match=r"train.max_steps: -5 is out of range \(expected >= -1\)"):
        load_recipe(DEMO, ["train.max_steps=-5"])
    with pytest.raises(RecipeError, match=r"train.per_stage.stage2.max_minutes: 0.0 is out of range"):
        load_recipe(DEMO, ["train.per_stage={stage2: {max_minutes: 0}}"])
    assert load_recipe(DEMO, ["train.max_steps=-1", "lora.layers_to_transform=[-2, -1]"]).train.max_steps == -1
