"""Every reader fuzzed: 1,000 seeded mutations of a valid input each, and every one is either read or ends in the
product's one-line error (the one the CLI prints as ``error: ...`` and exits 2 for), never another exception.

The mutator replaces a value anywhere in the document with another JSON type (ids above all: ``conversation_id``,
``dialogue_id``, ``turn_index``, ``id``, ...), deletes and duplicates entries, adds unknown keys, or cuts and
corrupts the file's text. Readers that load weights are fuzzed through the JSON files of the adapter folder only.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vista_distill.backends.adapters import trained_with
from vista_distill.backends.evidence_head import EvidenceHead
from vista_distill.backends.human_labels import LabelsBackend
from vista_distill.backends.label_prior import LabelPrior
from vista_distill.config import RecipeError, load_recipe
from vista_distill.data.io import SchemaError, read_conversations, read_jsonl, write_conversations
from vista_distill.data.silver import SilverDataError, read_manifest, validate_rows
from vista_distill.publish.serve_config import ServeConfigError, adapter_rank
from vista_distill.train.silver_data import silver_fingerprint

ROOT = Path(__file__).resolve().parents[1]
N = 1000
ID_KEYS = {"conversation_id", "dialogue_id", "turn_index", "id", "claim_id", "dataset", "source", "stage", "label"}
ODD_KEYS = ["zzz", "", "a\nb", "conversation_id", "id", "meta", "\u2028"]


def _values(rng: random.Random, depth: int = 0):
    pool = [None, True, False, 0, -1, 7, 1.5, -0.0, float("nan"), float("inf"), 10 ** 400, -(10 ** 30), "", "x",
            "N/A", "faithful", "verifiable", "assistant", "line\nbreak", "\u2028", "\x00", [], {}, [1], ["a"],
            {"a": 1}, {"role": "assistant"}, [[1, [2]]], {"x": {"y": [None]}}]
    v = rng.choice(pool)
    if depth < 2 and rng.random() < 0.1:
        return [_values(rng, depth + 1) for _ in range(rng.randint(1, 3))]
    return copy.deepcopy(v)


def _slots(doc):
    """Every (container, key) in the document."""
    out, stack = [], [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            out.append((node, k))
            stack.append(v)
    return out


def _mutate_once(doc, rng: random.Random):
    slots = _slots(doc)
    if not slots or rng.random() < 0.05:
        return _values(rng)
    ids = [s for s in slots if isinstance(s[0], dict) and s[1] in ID_KEYS]
    op = rng.choice(["replace", "replace", "id", "id", "delete", "add", "duplicate", "swap"])
    node, key = rng.choice(ids) if op == "id" and ids else rng.choice(slots)
    if op in ("replace", "id"):
        node[key] = _values(rng)
    elif op == "delete":
        node.pop(key) if isinstance(node, list) else node.pop(key, None)
    elif op == "add":
        dicts = [n for n, _ in slots if isinstance(n, dict)] or [doc]
        target = rng.choice(dicts)
        if isinstance(target, dict):
            target[rng.choice(ODD_KEYS)] = _values(rng)
    elif op == "duplicate" and isinstance(node, list):
        node.insert(key, copy.deepcopy(node[key]))
    else:   # swap with another slot's value
        other_node, other_key = rng.choice(slots)
        node[key] = copy.deepcopy(other_node[other_key])
    return doc


def mutate(doc, seed: int):
    """(mutated document or None, text or None): a seeded mix of structural and textual damage."""
    rng = random.Random(seed)
    doc = copy.deepcopy(doc)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        doc = _mutate_once(doc, rng)
    if rng.random() < 0.12:
        text = json.dumps(doc, ensure_ascii=False)
        cut = rng.randrange(len(text) + 1)
        text = text[:cut] if rng.random() < 0.6 else text[:cut] + rng.choice(["\ufffd", "}", "\x00", ",", "\n"]) + \
            text[cut:]
        return None, text
    return doc, None


def _one_line(e: BaseException) -> bool:
    lines = e.lines() if hasattr(e, "lines") else [str(e)]   # one problem a line
    return all(line.strip() and "\n" not in line.strip() for line in lines)


def fuzz(doc, read, errors: tuple[type[BaseException], ...], dump=json.dumps):
    """Run ``read(text)`` on N mutations; every failure other than a one-line product error is listed."""
    bad = []
    for seed in range(N):
        mutated, text = mutate(doc, seed)
        if text is None:
            text = dump(mutated)
        try:
            read(text)
        except errors as e:
            if not _one_line(e):
                bad.append(f"seed {seed}: not one line: {str(e)[:300]!r}")
        except Exception as e:  # noqa: BLE001 - what the test is for
            bad.append(f"seed {seed}: {type(e).__name__}: {str(e)[:200]} <- {text[:300]!r}")
    assert not bad, f"{len(bad)} of {N} mutations end in a traceback:\n" + "\n".join(bad[:15])


def _authors(path: str):
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


@pytest.mark.parametrize("fixture", ["tests/fixtures/vista_human/dev.json", "data/samples/sample_dialogues.json"])
def test_authors_json_reader(tmp_path, fixture):
    f = tmp_path / "in.json"

    def read(text):
        f.write_text(text, encoding="utf-8")
        read_conversations(f)

    fuzz(_authors(fixture), read, (SchemaError,))


def test_jsonl_reader(tmp_path):
    src = tmp_path / "src.jsonl"
    write_conversations(read_conversations(ROOT / "tests/fixtures/vista_human/dev.json"), src)
    records = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
    f = tmp_path / "in.jsonl"

    def read(text):
        try:   # a whole-file document is written one record per line, as the format is
            lines = [json.dumps(r, ensure_ascii=False) for r in json.loads(text)]
            text = "\n".join(lines) + "\n"
        except (ValueError, TypeError):
            pass
        f.write_text(text, encoding="utf-8")
        read_jsonl(f)

    fuzz(records, read, (SchemaError,))


def test_human_labels_reader(tmp_path):
    """The labels teacher's input: conversations (with their claims' metadata) into a LabelsBackend."""
    doc = _authors("tests/fixtures/vista_human/dev.json")
    doc[1][2]["claims"] = [{"factuality": "false", "claim_id": 3}]
    f = tmp_path / "in.json"

    def read(text):
        f.write_text(text, encoding="utf-8")
        LabelsBackend(read_conversations(f))

    fuzz(doc, read, (SchemaError,))


def test_recipe_reader(tmp_path):
    doc = yaml.safe_load((ROOT / "recipes/demo-cpu.yaml").read_text())
    f = tmp_path / "recipe.yaml"

    def read(text):
        f.write_text(text, encoding="utf-8")
        load_recipe(f)

    fuzz(doc, read, (RecipeError,), dump=lambda d: json.dumps(d, ensure_ascii=False))   # JSON is YAML, and quicker


class _Rows:
    """The two things validate_rows asks of a datasets.Dataset."""

    def __init__(self, rows):
        self.rows = rows
        self.column_names = sorted({k for r in rows for k in r})

    def select_columns(self, cols):
        return [{c: r.get(c) for c in cols} for r in self.rows]


def test_silver_data_reader(tmp_path):
    message = [{"role": "system", "content": "s"}, {"role": "user", "content": "CLAIM:\nOwls fly."}]
    rows = [{"prompt": message, "completion": [{"role": "assistant", "content": "VERIFIED"}], "label": "VERIFIED",
             "stage": "stage2", "conversation_id": "c1", "dialogue_id": "d1", "source": "FaithDial"}] * 2
    manifest = {"teacher": "labels", "fingerprint": "abc", "fingerprints": {"stage2": "f2"}, "counts": {"stage2": 2}}
    f = tmp_path / "manifest.json"

    def read(text):
        try:   # damaged text goes to the manifest as it is
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("rows"), list):
            validate_rows(_Rows([r for r in doc["rows"] if isinstance(r, dict)]), "stage2", "silver/stage2[train]")
        f.write_text(json.dumps(doc["manifest"]) if isinstance(doc, dict) and "manifest" in doc else text)
        silver_fingerprint({}, read_manifest(tmp_path), "stage2")

    fuzz({"manifest": manifest, "rows": rows}, read, (SilverDataError,))


def _adapter_reader(tmp_path, name, load):
    f = tmp_path / name

    def read(text):
        f.write_text(text, encoding="utf-8")
        load(tmp_path)

    return read


def test_evidence_head_file(tmp_path):
    EvidenceHead(0.5, 1.2, -0.1, {"split": "validation", "examples": 8}, 0.3).save(tmp_path)
    doc = json.loads((tmp_path / "evidence_head.json").read_text())
    fuzz(doc, _adapter_reader(tmp_path, "evidence_head.json", EvidenceHead.load), (SchemaError,))


def test_label_prior_file(tmp_path):
    LabelPrior({"LACKING EVIDENCE": 0.4, "OUT-OF-SCOPE": -0.2}, {"accuracy": [0.5, 0.6]}).save(tmp_path)
    doc = json.loads((tmp_path / "label_prior.json").read_text())
    fuzz(doc, _adapter_reader(tmp_path, "label_prior.json", LabelPrior.load), (SchemaError,))


def test_calibration_file(tmp_path):
    from vista_distill.backends.calibration import Calibration

    path = Calibration("mine", EvidenceHead(0.5, 1.2, -0.1, {}, 0.3, threshold=0.6),
                       LabelPrior({"OUT-OF-SCOPE": 1.0, "ABSTENTION": -0.5}),
                       {"dev": {"claims": 19}, "stage2": {"chosen": "head refit"}}).save(tmp_path)
    fuzz(json.loads(path.read_text()), _adapter_reader(path.parent, path.name,
                                                       lambda folder: Calibration.load(folder.parent, "mine")),
         (SchemaError,))


def test_training_summary_file(tmp_path):
    doc = {"stage": "stage2", "base_model_arg": None,
           "silver": {"path": "silver/stage2", "fingerprint": "f", "prompt_style": ["compact"]},
           "hyperparameters": {"load_in_4bit": False, "num_train_epochs": 2}, "label_prior": {"shift": {}}}
    for stage in ("stage1", "stage2"):
        (tmp_path / stage).mkdir()
        (tmp_path / stage / "adapter_config.json").write_text("{}")
    (tmp_path / "stage1" / "training_summary.json").write_text(json.dumps(doc))
    folders = {s: tmp_path / s for s in ("stage1", "stage2")}
    fuzz(doc, _adapter_reader(tmp_path / "stage2", "training_summary.json", lambda _: trained_with(folders)),
         (SchemaError,))


def test_adapter_config_file(tmp_path):
    doc = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"], "peft_type": "LORA",
           "task_type": "CAUSAL_LM", "base_model_name_or_path": None}
    fuzz(doc, _adapter_reader(tmp_path, "adapter_config.json", adapter_rank), (ServeConfigError,))


def test_cli_names_a_bad_conversation_id_in_one_line(tmp_path):
    """The issue's crash: a conversation_id that is a list or an object is one line per problem and exit 2."""
    doc = _authors("tests/fixtures/vista_human/dev.json")
    doc[0][1]["conversation_id"], doc[1][2]["conversation_id"] = [1], {"a": 1}
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, "-m", "vista_distill", "data", "stats", str(f)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2, r.stderr
    for line, (conv, turn, got) in zip(lines, [(0, 1, "list [1]"), (1, 2, 'object {"a": 1}')]):
        assert line == (f"error: {f}, conversation {conv}, turn {turn}, field 'conversation_id': expected a string "
                        f"or an integer or null, got {got}")
