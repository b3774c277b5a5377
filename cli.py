"""``vista-distill`` command line: ``score``, ``calibrate``, ``demo``, ``data``, ``distill``, ``train``, ``eval``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .config.cli_args import add_recipe_subparser, recipe_from_args
from .data.vocabulary import ALL_STAGES
from .pipeline.engine import RULES
from .runtime import exit_codes
from .runtime.exit_codes import OutputError, UsageError, check_writable


def _add_score(sub: argparse._SubParsersAction) -> None:
    p = add_recipe_subparser(
        sub,
        "score",
        config_required=False,
        config_help="a recipe: its student, its pipeline settings and its trained adapters (train.output_dir)",
        help="score dialogues with the VISTA pipeline on a local model",
        description="Score every assistant turn of the input dialogues with VISTA. Settings come "
        "from the recipe (--config; default: the built-in defaults); the options "
        "marked [recipe KEY] and the trailing section.key=value overrides change it.",
    )
    p.add_argument("--input", required=True, help="conversations: authors' .json or our .jsonl")
    p.add_argument("--output", required=True, help="per-turn records (.jsonl); the summary goes beside it")
    p.add_argument(
        "--adapters",
        default=None,
        help="folder with stage1/ stage2/ stage3/ PEFT adapters "
        "(default: the recipe's trained adapters, when --config has any); with --server, the local "
        "folder their evidence heads, priors and calibrations are read from",
    )
    p.add_argument("--rule", choices=RULES, default="safe",
                   help="headline turn rule (all are computed): safe = VERIFIED/ABSTENTION/OUT-OF-SCOPE are safe, "
                        "unparseable or claimless turns unknown; strict = only VERIFIED (paper Table 1 text); "
                        "authors = the released evaluation (see README)")
    p.add_argument("--prompts", choices=("fewshot", "compact"), default=None,
                   help="prompt style (default: fewshot, or pipeline.student_prompt_style with adapters)")
    p.add_argument("--stage2", choices=("score", "generate"), default="score",
                   help="score = pick the label by log-likelihood; generate = free text, parsed")
    p.add_argument("--stage3", choices=("score", "generate"), default="score",
                   help="generate keeps the model's explanation")
    p.add_argument("--stage4", action="store_true", help="also ask whether each turn contradicts earlier turns")
    p.add_argument("--threads", default="auto",
                   help="torch CPU threads: auto (default: the cores not busy with other work) or a number")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--limit", type=int, default=None, help="score only the first N conversations")
    p.add_argument("--one-at-a-time", action="store_true", help="one request per call, like the authors' loop")
    p.add_argument("--chunk-size", type=int, default=16, metavar="N",
                   help="conversations per chunk: each finished chunk's records go to <output stem>.journal.jsonl at "
                        "once, so a killed run, started again with the same command, resumes after its last "
                        "finished chunk (the journal is removed once the output is written)")
    p.add_argument("--no-evidence", action="store_true",
                   help="skip the evidence probes (input with human claims: deletion flip rate, own vs foreign "
                        "reference AUC, claim-only accuracy; scoring/evidence.py)")
    p.add_argument("--server", action="append", metavar="URL",
                   help="an OpenAI-compatible server serving the base model and the stage adapters (vista-distill "
                        "serve-config), e.g. http://127.0.0.1:8000/v1; repeat for replicas [recipe student.servers]")
    p.add_argument("--calibration", default=None, metavar="NAME",
                   help="apply the calibration NAME kept beside the adapters (vista-distill calibrate; default: "
                        "what training fitted)")
    p.add_argument("--attribution", action="store_true",
                   help="input with human claims and gold turn labels: also the turn accuracy with stage 1 or 3 "
                        "answered by its rule or by the humans, so you see which stage loses the turns "
                        "(scoring/attribution.py)")
    p.add_argument("--role", choices=("student", "base"), default="student",
                   help="with servers: student = each stage on its adapter (student.serving.adapters), compact "
                        "prompts; base = the base model with the few-shot prompts")
    for flag, key, kw in _SCORE_OVERRIDES:
        p.add_argument(flag, dest=key.replace(".", "__"), **kw)
    p.set_defaults(func=_score)


# score options that are recipe keys: each one given becomes an override of that key
_SCORE_OVERRIDES: list[tuple[str, str, dict]] = [
    ("--model", "student.model", {"help": "path or hub id of a causal LM (default: embedded SmolLM2-135M) "
                                          "[recipe student.model]"}),
    ("--dtype", "student.dtype", {"choices": ("auto", "bfloat16", "float32", "float16"),
                                  "help": "auto: bf16 where the device computes it natively (on a CPU: and measures it "
                                          "faster), else float16 on a GPU, "
                                          "float32 on a CPU [recipe student.dtype]"}),
    ("--load-in-4bit", "student.load_in_4bit", {"action": "store_const", "const": True,
                                                "help": "4-bit NF4 weights through bitsandbytes "
                                                        "[recipe student.load_in_4bit]"}),
    ("--chat-template-kwargs", "student.chat_template_kwargs",
     {"metavar": "JSON", "help": 'chat-template variables (default {"enable_thinking": false}: reasoning models '
                                 "answer directly) [recipe student.chat_template_kwargs]"}),
    ("--speakers", "pipeline.speakers", {"help": "user,assistant speaker names in prompts (appendix: "
                                                 "apprentice,wizard) [recipe pipeline.speakers]"}),
    ("--max-claims", "pipeline.max_claims", {"type": int, "help": "[recipe pipeline.max_claims]"}),
    ("--world-knowledge", "pipeline.world.knowledge",
     {"metavar": "PATH|model", "help": "run the world-knowledge stage on LACKING EVIDENCE claims (TRUE / FALSE / NOT "
                                       "ENOUGH KNOWLEDGE) and add the three-way verdict: 'model' asks the model's own "
                                       "knowledge, a path (JSONL / JSON / text file or folder) is searched per claim "
                                       "with BM25 [recipe pipeline.world]"}),
    ("--world-concurrent", "pipeline.world.concurrent",
     {"action": "store_const", "const": True, "help": "world stage: also search the turn's reference and background "
                                                      "with the claim [recipe pipeline.world.concurrent]"}),
    ("--max-new-tokens", "pipeline.max_new_tokens",
     {"action": "append", "metavar": "STAGE=N", "help": "generation budget per stage, e.g. stage1=128 (defaults: "
                                                        "stage1 256, stage3 96) [recipe pipeline.max_new_tokens]"}),
]


def _score(args: argparse.Namespace) -> int:
    from .config import RecipeError
    from .data.io import read_conversations
    from .runtime.hardware import prepare_run
    from .scorer import VistaScorer

    conversations = read_conversations(args.input)[: args.limit]   # bad input fails before torch loads
    check_writable(args.output)
    try:
        recipe = recipe_from_args(args, first=_score_overrides(args))
        prepare_run(recipe.student.dtype, args.threads, where="--dtype")  # says what it will use, first
        if recipe.pipeline.world.knowledge:   # a bad knowledge file fails before any model loads
            from .pipeline.knowledge import load_knowledge

            load_knowledge(recipe.pipeline.world.knowledge)
    except (RecipeError, ValueError) as e:
        raise UsageError(str(e)) from None
    options = {"style": args.prompts, "rule": args.rule, "stage2": args.stage2, "stage3": args.stage3,
               "stage4": args.stage4, "calibration": args.calibration}
    from .runtime.exit_codes import hold_output, lock_path

    journal = Path(args.output).with_name(Path(args.output).stem + ".journal.jsonl")
    hold_output(journal).close()   # a live run on this output: refused before any model loads
    if args.server or recipe.student.servers:
        from .backends.factory import backend_for

        local_only = [flag for flag, given in (("--threads", args.threads != "auto"), ("--batch-size",
                                                                                       args.batch_size != 16)) if given]
        if local_only:
            raise UsageError(f"{' and '.join(local_only)} set the in-process model; a served model ignores them")
        backend = backend_for(recipe, args.role, servers=args.server, adapters=args.adapters)
        backend.check_server()   # unreachable: ServerError, exit 3 (main)
        scorer = VistaScorer.from_recipe(recipe, role=args.role, backend=backend, **options)
    else:
        trained = Path(recipe.resolve(recipe.train.output_dir)) if args.config else None
        adapters = args.adapters or (str(trained) if trained is not None and trained.is_dir() else None)
        scorer = VistaScorer.from_recipe(recipe, adapters=adapters, threads=args.threads, batch_size=args.batch_size,
                                         **options)
    if args.chunk_size < 1:
        raise UsageError(f"--chunk-size must be >= 1, got {args.chunk_size}")
    result = scorer.score(conversations, batched=not args.one_at_a_time, progress=True, evidence=not args.no_evidence,
                          journal=journal, chunk_size=args.chunk_size, attribution=args.attribution)
    resumed = result.summary["run"]["journal"]["chunks_resumed"]
    if resumed:
        print(f"resumed: {resumed} of {result.summary['run']['journal']['chunks']} chunk(s) of {args.chunk_size} "
              f"conversations came from {journal} (a run that stopped before its end)")
    out, summary_path = result.write(args.output)
    from .scoring.page import write_score_page

    write_score_page(result, out)
    journal.unlink(missing_ok=True)
    lock_path(journal).unlink(missing_ok=True)
    from .scoring.terminal import print_score_summary

    print_score_summary(result.summary)
    print(f"records: {out}\nsummary: {summary_path}\npage:    {out.with_name(out.stem + '.report.html')}")
    return 0


def _score_overrides(args: argparse.Namespace) -> list[str]:
    """The score options that were given, as recipe overrides (``section.key=value``)."""
    out = []
    for _, key, _ in _SCORE_OVERRIDES:
        value = getattr(args, key.replace(".", "__"))
        if value is None:
            continue
        if key.startswith("pipeline.world."):
            out.append("pipeline.world.enabled=true")
            if key == "pipeline.world.knowledge" and value == "model":
                continue   # the model's own knowledge: no passages
            value = json.dumps(value)
        elif key == "pipeline.max_new_tokens":
            value = json.dumps(_stage_ints(value))
        elif key == "student.chat_template_kwargs":
            try:
                value = json.dumps(json.loads(value))
            except json.JSONDecodeError as e:
                raise UsageError(f"--chat-template-kwargs is not JSON ({e}): {value!r}") from None
        else:
            value = json.dumps(value)
        out.append(f"{key}={value}")
    return out


def _stage_ints(pairs: list[str]) -> dict[str, int]:
    out = {}
    for pair in pairs:
        stage, sep, n = pair.partition("=")
        if not sep or not n.isdigit() or stage not in ALL_STAGES:
            raise UsageError(f"--max-new-tokens expects STAGE=N with STAGE in stage1..stage4, got {pair!r}")
        out[stage] = int(n)
    return out


def _add_check(sub: argparse._SubParsersAction) -> None:
    p = add_recipe_subparser(
        sub,
        "check",
        config_required=False,
        config_help="recipe YAML (default: the built-in defaults)",
        help="preflight a recipe before any large model loads: hardware, data, leaks, "
        "chat templates, thinking, GPU memory, teacher endpoint",
        description="Everything the recipe needs short of loading the large models; one line per "
        "problem, exit 1 when there is any.",
    )
    p.add_argument(
        "--data-root",
        default=None,
        metavar="DIR",
        help="folder the recipe's data sources are relative to (default: data.root, else $VISTA_DISTILL_DATA)",
    )
    p.add_argument("--online", action="store_true", help="also send the teacher endpoint one real request")
    p.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    from .check.recipe_checks import run_checks

    recipe = recipe_from_args(args)
    return 1 if run_checks(recipe, online=args.online).problems else 0


def _add_serve_config(sub: argparse._SubParsersAction) -> None:
    p = add_recipe_subparser(sub, "serve-config", config_required=False,
                             config_help="the recipe the adapters were trained with (its student.model and "
                                         "student.serving names; default: the built-in defaults)",
                             help="write what vLLM, SGLang and llama.cpp need to serve a trained student",
                             description="Writes vllm.sh, sglang.sh, llama_cpp/ (the adapters as GGUF LoRA, a "
                                         "llama_cpp.server config) and serving.yaml (the recipe keys for score and "
                                         "eval) for the stage adapters in --adapters.")
    p.add_argument("--adapters", required=True, help="folder with stage1/ stage2/ stage3/ PEFT adapters")
    p.add_argument("--out", default=None, help="output folder (default: ADAPTERS/serve)")
    p.add_argument("--engines", default="vllm,sglang,llama_cpp", help="comma-separated: vllm, sglang, llama_cpp")
    p.add_argument("--host", default="127.0.0.1", help="address the servers bind (default 127.0.0.1)")
    p.add_argument("--llama-cpp-source", default=None, metavar="DIR",
                   help="a llama.cpp checkout with convert_lora_to_gguf.py (default: the installed "
                        "llama-cpp-python's source distribution, fetched once into the cache)")
    p.add_argument("--outtype", choices=("f32", "f16", "bf16", "q8_0"), default="f32",
                   help="GGUF LoRA precision (default f32)")
    p.set_defaults(func=_serve_config)


def _serve_config(args: argparse.Namespace) -> int:
    from .publish.serve_config import ServeConfigError, write_serve_config

    recipe = recipe_from_args(args)
    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    bad = sorted(set(engines) - {"vllm", "sglang", "llama_cpp"})
    if bad:
        raise UsageError(f"--engines: unknown {bad}; choose from vllm, sglang, llama_cpp")
    try:
        w = write_serve_config(recipe, args.adapters, args.out, engines=engines, host=args.host,
                               llama_cpp_source=args.llama_cpp_source, outtype=args.outtype)
    except ServeConfigError as e:
        raise UsageError(str(e)) from None
    out = Path(w["out"])
    print(f"serving files for {', '.join(w['adapters'])} in {out}:")
    for f in w["files"]:
        print(f"  {f}")
    print(f"start a server (e.g. {out / (engines[0] + '.sh')}), then score against it:\n"
          f"  vista-distill score --server http://{args.host}:PORT/v1 --input DIALOGUES --output OUT.jsonl "
          f"(recipe keys: {out / 'serving.yaml'})")
    return 0


def _add_calibrate(sub: argparse._SubParsersAction) -> None:
    p = add_recipe_subparser(sub, "calibrate", config_required=False,
                             config_help="the recipe the adapters were trained with (its student model and pipeline "
                                         "settings; default: the built-in defaults)",
                             help="fit a student's stage 2 head and threshold and stage 3 prior to your own "
                                  "labelled dialogues",
                             description="Runs the student's stages 2-3 on the human claims of --dev, compares "
                                         "training's head, threshold and label prior with ones refitted on the file "
                                         "and with each stage's cheap rule (stage 1: the sentence splitter, by turn "
                                         "accuracy where the turns have gold labels), by cross-validation over its "
                                         "conversations (a rule wins only by --rule-alpha), and saves the choice as "
                                         "ADAPTERS/calibrations/NAME.json (score --calibration NAME applies it).")
    p.add_argument("--adapters", required=True, help="folder with stage1/ stage2/ stage3/ PEFT adapters")
    p.add_argument("--dev", required=True, help="labelled dialogues: authors' .json or our .jsonl, turns with "
                                                "human claims and their categories")
    p.add_argument("--calibration", default="default", metavar="NAME",
                   help="the calibration's name, as score --calibration NAME reads it (default: default)")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds over conversations (default 5)")
    p.add_argument("--rule-alpha", type=float, default=0.05, metavar="P",
                   help="a stage's cheap rule replaces the student there only when it is more accurate out of fold "
                        "and McNemar's p against the best student candidate is below P (default 0.05)")
    p.add_argument("--threads", default="auto", help="torch CPU threads: auto or a number")
    p.add_argument("--limit", type=int, default=None, help="use only the first N conversations")
    p.set_defaults(func=_calibrate)


def _calibrate(args: argparse.Namespace) -> int:
    from .backends.calibration import calibration_path, check_name
    from .config import RecipeError
    from .data.io import read_conversations
    from .scorer import VistaScorer
    from .scoring.calibrate import summary_rows

    conversations = read_conversations(args.dev)[: args.limit]
    try:
        check_name(args.calibration)
        recipe = recipe_from_args(args)
    except (RecipeError, ValueError) as e:
        raise UsageError(str(e)) from None
    if args.folds < 2:
        raise UsageError(f"--folds must be >= 2, got {args.folds}")
    if not 0.0 < args.rule_alpha <= 1.0:
        raise UsageError(f"--rule-alpha must be in (0, 1], got {args.rule_alpha}")
    check_writable(calibration_path(args.adapters, args.calibration))
    scorer = VistaScorer.from_recipe(recipe, adapters=args.adapters, threads=args.threads)
    try:
        cal = scorer.calibrate(conversations, name=args.calibration, folds=args.folds, dev_path=args.dev,
                               rule_alpha=args.rule_alpha)
    except ValueError as e:
        raise UsageError(f"{args.dev}: {e}") from None
    from .runtime.progress import print_table

    dev = cal.fitted["dev"]
    print_table(f"calibration {cal.name}: {dev['claims']} human claims in {dev['conversations']} conversations, "
                "cross-validated by conversation", ["stage", "candidate", "accuracy %", "balanced %", "chosen"],
                [list(r) for r in summary_rows(cal)], max_width={4: 40})
    if line := cal.rule_line():
        print(line)
    print(f"calibration: {calibration_path(args.adapters, cal.name)}\n"
          f"apply it:    vista-distill score --adapters {args.adapters} --calibration {cal.name} --input ... "
          "--output ...")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vista-distill", description=__doc__, epilog=exit_codes.help_text(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_score(sub)
    _add_check(sub)
    _add_serve_config(sub)
    _add_calibrate(sub)
    from .demo import add_demo_subcommand

    add_demo_subcommand(sub)
    from .data.cli import add_data_subcommands

    add_data_subcommands(sub)
    from .distill.cli import add_distill_subcommand

    add_distill_subcommand(sub)
    from .train.cli import add_train_subcommand

    add_train_subcommand(sub)
    from .eval.cli import add_eval_subcommand

    add_eval_subcommand(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    if not args.verbose:   # library bars and known warnings off; -v shows them (demo: all in its log file)
        from .runtime.progress import quiet_libraries

        quiet_libraries()
    from .backends.openai_compat import ServerError
    from .config import RecipeError
    from .data.io import SchemaError, print_error
    from .data.silver import SilverDataError
    from .data.splits import LeakageError

    try:
        return args.func(args)
    except OutputError as e:   # checked before the work where it can be; after it, the journal is kept
        print(f"error: {e}", file=sys.stderr)
        return exit_codes.OUTPUT
    except (SchemaError, RecipeError, SilverDataError, LeakageError, UsageError, FileNotFoundError) as e:
        print_error(e)   # every problem of the input, one line each
        return exit_codes.BAD_INPUT
    except ServerError as e:   # a server (teacher, student or base) down or refusing mid-run: its one line
        print(f"error: {e}", file=sys.stderr)
        return exit_codes.SERVER
    except KeyboardInterrupt:
        print("interrupted: finished work is kept; the same command resumes", file=sys.stderr)
        return exit_codes.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
