"""Every file of an adapter folder damaged, one corruption at a time: ``VistaScorer.from_pretrained`` and a scoring run
end in the product's one-line error naming the file, or give the clean folder's verdicts, labels and probabilities.

The folder: three LoRA adapters with random (non-zero) weights on the tiny random SmolLM2, stage 2 with an evidence
head, stage 3 with a label prior, a calibration beside them, a training summary per stage."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from helpers import SAMPLE

from vista_distill.data.io import SchemaError

STAGES = ("stage1", "stage2", "stage3")
DOCS = ["The Eiffel Tower is 330 metres tall and stands in Paris.", "Paris is the capital of France."]
CLAIMS = ["The tower is 330 m high.", "Paris is the capital of Spain."]


@pytest.fixture(scope="module")
def clean(tmp_path_factory, tiny_smollm2) -> Path:
    """The clean folder, every file a user could damage present."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from vista_distill.backends.calibration import Calibration
    from vista_distill.backends.evidence_head import EvidenceHead
    from vista_distill.backends.label_prior import LabelPrior
    from vista_distill.backends.model_loading import quiet_peft_wrap

    root = tmp_path_factory.mktemp("adapters")
    for i, stage in enumerate(STAGES):
        torch.manual_seed(i)
        with quiet_peft_wrap():
            model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_smollm2),
                                   LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                              init_lora_weights=False, task_type="CAUSAL_LM"))
        model.save_pretrained(root / stage)
        (root / stage / "training_summary.json").write_text(json.dumps(
            {"stage": stage, "base_model_arg": str(tiny_smollm2), "silver": {"prompt_style": ["compact"]},
             "hyperparameters": {"max_steps": 4}, "results": {"global_step": 4, "planned_steps": 4}}))
    EvidenceHead(w_margin=0.8, w_pmi=1.5, bias=-0.4, w_overlap=1.2).save(root / "stage2")
    LabelPrior({"OUT-OF-SCOPE": -1.0, "LACKING EVIDENCE": 0.5}).save(root / "stage3")
    Calibration("dev", EvidenceHead(w_margin=1.0, w_pmi=1.0, bias=-0.2, threshold=0.4),
                LabelPrior({"ABSTENTION": 0.7})).save(root)
    return root


def _outputs(folder: Path, calibration: str | None) -> tuple:
    """What a user sees: the MiniCheck-style labels and probabilities, and a dialogue's verdicts and categories."""
    from vista_distill import VistaScorer, read_conversations

    scorer = VistaScorer.from_pretrained(folder, threads=1, calibration=calibration, max_claims=2,
                                         max_new_tokens={"stage1": 16, "stage3": 8})
    labels = [(c.label, round(c.p_verified, 5)) for c in scorer.label_claims(DOCS, CLAIMS)]
    result = scorer.score(read_conversations(SAMPLE)[:1])
    turns = [(t.verdicts.safe, [(c.text, c.category) for c in t.claims]) for t in result.turns if t.scored]
    return labels, turns


def _flip_float(path: Path, value: float) -> None:
    """The first float32 of a safetensors file's data set to ``value``."""
    data = bytearray(path.read_bytes())
    header = struct.unpack("<Q", data[:8])[0]
    data[8 + header:8 + header + 4] = struct.pack("<f", value)
    path.write_bytes(bytes(data))


def _json_edit(name: str, change):
    def corrupt(folder: Path) -> None:
        path = folder / name
        d = json.loads(path.read_text())
        change(d)
        path.write_text(json.dumps(d))
    return corrupt


def _bytes(name: str, make):
    def corrupt(folder: Path) -> None:
        path = folder / name
        path.write_bytes(make(path.read_bytes()))
    return corrupt


def _delete(name: str):
    return lambda folder: (folder / name).unlink()


def _corruptions() -> dict[str, object]:
    out: dict[str, object] = {}
    for s in STAGES:
        cfg, w = f"{s}/adapter_config.json", f"{s}/adapter_model.safetensors"
        out |= {
            f"{cfg} deleted": _delete(cfg),
            f"{cfg} truncated": _bytes(cfg, lambda b: b[: len(b) // 2]),
            f"{cfg} not UTF-8": _bytes(cfg, lambda b: b"\xff\xfe" + b),
            f"{cfg} a list": _bytes(cfg, lambda b: b"[1, 2]"),
            f"{cfg} r 0": _json_edit(cfg, lambda d: d.update(r=0)),
            f"{cfg} r text": _json_edit(cfg, lambda d: d.update(r="x")),
            f"{cfg} r 8 (weights of 4)": _json_edit(cfg, lambda d: d.update(r=8)),
            f"{cfg} lora_alpha 1e30": _json_edit(cfg, lambda d: d.update(lora_alpha=1e30)),
            f"{cfg} lora_alpha NaN": _bytes(cfg, lambda b: b.replace(b'"lora_alpha": 8', b'"lora_alpha": NaN')),
            f"{cfg} IA3": _json_edit(cfg, lambda d: d.update(peft_type="IA3")),
            f"{cfg} unknown modules": _json_edit(cfg, lambda d: d.update(target_modules=["nope_proj"])),
            f"{w} deleted": _delete(w),
            f"{w} truncated": _bytes(w, lambda b: b[: len(b) // 2]),
            f"{w} empty": _bytes(w, lambda b: b""),
            f"{w} header garbage": _bytes(w, lambda b: b[:8] + b"{not json" + b[17:]),
            f"{w} NaN weight": lambda folder, w=w: _flip_float(folder / w, float("nan")),
            f"{w} Infinity weight": lambda folder, w=w: _flip_float(folder / w, float("inf")),
            f"{w} tensor renamed": _bytes(w, lambda b: b.replace(b"lora_A", b"lora_Z", 1)),
            f"{s}/training_summary.json garbage": _bytes(f"{s}/training_summary.json", lambda b: b"{oops"),
        }
    head, prior, cal = "stage2/evidence_head.json", "stage3/label_prior.json", "calibrations/dev.json"
    out |= {
        f"{head} NaN": _bytes(head, lambda b: b.replace(b'"bias": -0.4', b'"bias": NaN')),
        f"{head} Infinity": _bytes(head, lambda b: b.replace(b'"w_pmi": 1.5', b'"w_pmi": Infinity')),
        f"{head} w_margin missing": _json_edit(head, lambda d: d.pop("w_margin")),
        f"{head} w_margin text": _json_edit(head, lambda d: d.update(w_margin="big")),
        f"{head} threshold 2": _json_edit(head, lambda d: d.update(threshold=2)),
        f"{head} not JSON": _bytes(head, lambda b: b"w_margin=1"),
        f"{prior} NaN": _bytes(prior, lambda b: b.replace(b"-1.0", b"NaN")),
        f"{prior} lower-case label": _json_edit(prior, lambda d: d.update(shift={"out-of-scope": -1.0})),
        f"{prior} shift null": _json_edit(prior, lambda d: d.update(shift=None)),
        f"{prior} shift text": _json_edit(prior, lambda d: d.update(shift="-1")),
        f"{prior} 1e400": _bytes(prior, lambda b: b.replace(b"0.5", b"1e400")),
        f"{cal} stage 2 NaN": _bytes(cal, lambda b: b.replace(b'"bias": -0.2', b'"bias": NaN')),
        f"{cal} stage 3 unknown label": _json_edit(cal, lambda d: d["stage3"].update(shift={"abstain": 1.0})),
        f"{cal} not JSON": _bytes(cal, lambda b: b[:10]),
    }
    return out


CORRUPTIONS = _corruptions()


@pytest.mark.slow   # a folder loaded and scored once per corruption
def test_every_corruption_of_every_file_ends_in_one_line_or_the_clean_verdicts(clean, tmp_path):
    expected = {cal: _outputs(clean, cal) for cal in (None, "dev")}
    assert len(CORRUPTIONS) >= 50
    silent, tracebacks, refused = [], [], 0
    for i, (what, corrupt) in enumerate(CORRUPTIONS.items()):
        folder = tmp_path / f"c{i}"
        shutil.copytree(clean, folder)
        corrupt(folder)
        cal = "dev" if what.startswith("calibrations/") else None
        try:
            got = _outputs(folder, cal)
        except (SchemaError, FileNotFoundError, ValueError) as e:
            refused += 1
            lines = e.lines() if hasattr(e, "lines") else [str(e)]
            if not all(line.strip() and "\n" not in line and str(folder) in line for line in lines):
                tracebacks.append(f"{what}: not one line naming the file: {str(e)[:300]}")
        except Exception as e:  # noqa: BLE001 - what the test is for
            tracebacks.append(f"{what}: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
        else:
            if got != expected[cal]:
                silent.append(what)
        shutil.rmtree(folder)
    assert not tracebacks, "\n".join(tracebacks)
    assert not silent, f"verdicts changed without a word: {silent}"
    assert refused >= 45, refused   # the rest (a training summary's fields, say) leave every output as it was
