"""The benchmarks ``vista-distill data fetch`` knows: where each comes from, under what licence, and the
files it lays out under the data root.

A :class:`Source` lists what goes in one benchmark folder: :class:`Remote` files (a repository file
pinned to a commit, a Hugging Face Hub file, or a member of a zip / tar.gz archive), :class:`Subset`
files cut out of a downloaded file (the development splits of single-file releases, see
:mod:`.fetch_subsets`), and :class:`Manual` files that cannot be downloaded automatically (the entry
says how to get them). :func:`registry` is the built-in catalogue; :func:`load_registry_file` reads
one from JSON (``data fetch --registry``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from . import fetch_subsets

GITHUB_RAW = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class Remote:
    """One file downloaded from ``url`` (or taken as ``member`` out of the archive at ``url``)."""

    dest: str                      # path under the data root, starting with the benchmark folder
    url: str                       # official URL of the file, or of the archive that holds it
    sha256: str | None = None      # of the file as written; None: recorded on first download
    member: str | None = None      # path inside the zip / tar.gz archive at ``url``
    archive_sha256: str | None = None
    hub: bool = False              # a Hugging Face Hub file: send the user's token, if any


@dataclass(frozen=True)
class Subset:
    """A JSON list cut out of the downloaded file ``source``: the items whose key is in ``keep``.

    ``key`` names the item field that identifies an item; None identifies items by content
    (:func:`fingerprint`). The output is ``json.dumps(items, indent=1)`` in the order of ``keep``.
    """

    dest: str
    source: str
    keep: tuple[Any, ...]
    key: str | None = None
    sha256: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Manual:
    """A file fetch cannot download; ``instructions`` say how to get it."""

    dest: str
    instructions: str


@dataclass(frozen=True)
class Source:
    """Where one benchmark comes from, under what licence, and the layout it produces."""

    name: str                      # the folder under the data root
    title: str
    home: str                      # the official location, for people
    licence: str
    commit: str                    # may the files be committed to the project? ("yes", "no: why", "never: why")
    remotes: tuple[Remote, ...]
    subsets: tuple[Subset, ...] = ()
    manual: tuple[Manual, ...] = ()
    note: str = ""
    warning: str = ""              # printed whenever the benchmark is fetched

    def layout(self) -> list[str]:
        """Every path (under the data root) this benchmark produces."""
        return [r.dest for r in self.remotes] + [s.dest for s in self.subsets] + [m.dest for m in self.manual]


def gh(repo: str, commit: str, path: str) -> str:
    """The raw URL of ``path`` in GitHub repository ``repo`` at ``commit``."""
    return f"{GITHUB_RAW}/{repo}/{commit}/{path}"


def hub_url(repo_id: str, filename: str, revision: str = "main") -> str:
    """The download URL of a Hub dataset file (honours ``HF_ENDPOINT``)."""
    from huggingface_hub import hf_hub_url

    return hf_hub_url(repo_id, filename, repo_type="dataset", revision=revision)


def fingerprint(item: Any) -> str:
    """A content key for JSON items without ids: sha256 of their canonical JSON, 16 hex digits."""
    text = json.dumps(item, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# The registry. Commits are the ones the development copies were taken from; sha256 values are
# those copies' hashes, so a mismatch means upstream changed the file (or the download broke).

BEGIN, BEGIN_HEAD, BEGIN_2021 = ("google/BEGIN-dataset", "6e65f0d5a1ed1b9574643a7640ff1678d4e979b5",
                                 "6f881995bca5405918f3138b04f29fdd2a1b73ae")
FAITHDIAL, FAITHDIAL_HEAD = "McGill-NLP/FaithDial", "25671c6e3aa7d667943b7744a2b91507e7187f83"
FADE, FADE_HEAD = "souvikdgp16/FADE", "db581a1b677de1626da713a1fb2417d8507c16f1"
DIALFACT, DIALFACT_HEAD = "salesforce/DialFact", "d400b250147e45c106b18e52254b1060f7c1575d"
FINEDIALFACT, FINEDIALFACT_HEAD = "XiangyanChen/FineDialFact", "21957e56650ad1d13b1b6face4e2daa30193a765"
FACTCHECK, FACTCHECK_HEAD = "yuxiaw/Factcheck-GPT", "a9e6a04a953ad880806529c504a679dd1ad06528"
VISTA, VISTA_HEAD = "ashleylew/VISTA", "44250f49957b10291a24a68d1d0703968df0063a"
FHSUM, FHSUM_DATA = "cece00/FHSumBench", "af1441c56e6fbdb6fdd22ff8f649af86d93be905"
AIS, AIS_HEAD = "google-research-datasets/AIS", "df55dc416715e7cec8e8d2e091d1806d379f1a8d"
WOW_TGZ = "http://parl.ai/downloads/wizard_of_wikipedia/wizard_of_wikipedia.tgz"
WOW_TGZ_SHA256 = "2a549627a83fea745efa2076a41d1c0078ad002ab2b54eae6a4e3d3d66ae24b7"  # ParlAI's build.py


def _files(repo: str, commit: str, folder: str, files: Iterable[tuple[str, str | None]],
           under: str = "") -> tuple[Remote, ...]:
    """Remotes for repository ``files`` ((path, sha256) pairs) placed at ``folder/under/path``."""
    return tuple(Remote(f"{folder}/{under}{path}", gh(repo, commit, path), sha) for path, sha in files)


@cache
def registry() -> dict[str, Source]:
    """Every benchmark fetch knows, by folder name."""
    sources = [
        Source(
            "begin", "BEGIN (Dziri et al., 2022), 2022 release dev TSVs and the 2021 release dev TSV",
            f"https://github.com/{BEGIN}",
            "CC BY 4.0 (wow/, cmu-dog/); CDLA-Sharing-1.0 (topicalchat/); see each folder's LICENSE and NOTICE",
            "yes, with the LICENSE and NOTICE files",
            _files(BEGIN, BEGIN_HEAD, "begin", [
                ("LICENSE", "cd97aa30978e6090d3af8fccd93c880da19889f52de065c256538479ae1a057f"),
                ("README.md", "1b01c90e6ac4ad2ac573b25cd7716f8e8dc6a7f4970c3ecc59275e30f00b539a"),
                ("wow/LICENSE", "5cae4a69c3c71bfec6251130e2a413bcaea051467f9805c2580dcf771a76361f"),
                ("wow/NOTICE", "3206f4c41ec756667ee8cd0300fd6114fc5bfb370799b46cdf9d3050fcc9a938"),
                ("wow/begin_dev_wow.tsv", "2ebfc95a1ff267e12dcce3250da4d158e1811c62e9e1a0d56f110efc9ace0178"),
                ("cmu-dog/LICENSE", "5cae4a69c3c71bfec6251130e2a413bcaea051467f9805c2580dcf771a76361f"),
                ("cmu-dog/NOTICE", "b8dcafc36b2f61facc33512c323e44b44da5c461e501ed580b3bc90ef23a9079"),
                ("cmu-dog/begin_dev_cmu.tsv", "9482294df23cf08a976773ca73203b84f7178534ecab1a206eaade365e97071c"),
                ("topicalchat/LICENSE", "94b1f359428afa5c7d1f3230e0cb4a5d51be6c9be12c2249e2b33e8fc489eba3"),
                ("topicalchat/NOTICE", "543150a8b878961db87ae6c4a4055c4b7199253eaafbbadb67558716a25aebd9"),
                ("topicalchat/begin_dev_tc.tsv", "d799a8cb3635de41b7f284dcfc872544ddeadcbae0c2ffd684270cce671f7711"),
            ]) + _files(BEGIN, BEGIN_2021, "begin", [
                ("README", "75c96810168e6b1ec1e5044834c4c236b1c2bed3a5510acf6c0f0b255a9e496a"),
                ("dev_05_24_21.tsv", "d4eb032eb23793238e1de5f5d534c1f9e675657e8f4f513a71a4a375f5cb7767"),
            ], under="first_release_2021/"),
            note=f"first_release_2021/ holds the 2021 release (commit {BEGIN_2021[:7]}), removed from the "
                 "repository's tip later."),
        Source(
            "faithdial", "FaithDial (Dziri et al., 2022): data-audit CSVs (GitHub) and the corpus (Hugging Face Hub)",
            f"https://github.com/{FAITHDIAL} and https://huggingface.co/datasets/{FAITHDIAL}",
            "MIT", "yes, with LICENSE",
            _files(FAITHDIAL, FAITHDIAL_HEAD, "faithdial", [
                ("LICENSE", "237b7285cdd6191afd93bcc877ba14cb566276e85ee8025af0555ee54b0145ab"),
                ("README.md", "5fd805ff4e4503159d87d07a6edf3081c12d0abca86eed93390ca34f72e8a12a"),
                ("CITATION.cff", "8ed5c4ce9dc9ac1ad114047e75303b7089165c5106af6972f82a35061ba18853"),
                ("data-audit/README.md", "bb8bb8582a46bc1b2ee6318d882bba42e6040d8330f2293df55615c63d56168d"),
                ("data-audit/gold/wow.csv", "0237ccc1472e9426e3e6631bb3cb8dbbbc7c7083190f633a7db81672992127aa"),
                ("data-audit/gold/cmu.csv", "91aff154c342c1a9c4c74c24c6ef067efca17719e64aa0969419fdbb8d57c9cb"),
                ("data-audit/gold/topical.csv", "4bd585d91e2c2e591220d3167fe6e1806c335d8870414833f32a0fd564f9fdec"),
                ("data-audit/CTRL/ctrl_processed_wow.csv",
                 "a547b236b5ab7bd64a93fe6aeb6e2886bd2239e370538563abdd3667c92b5700"),
                ("data-audit/CTRL/ctrl_processed_cmu.csv",
                 "fdf6b4fd326cc9c0b7222f4a2c3a6a7b8943ec4feda195adc727b86e11a86664"),
                ("data-audit/CTRL/ctrl_processed_topicalchat.csv",
                 "b6c6ed1c3bfeb2578dab05ab694482047119b16ff0e3350b88f6a2f86605b201"),
                ("data-audit/DoHA/doha_processed_wow.csv",
                 "45fd23f61e77735169cf693dd7f4eabc0c07c0a855433584f88cd0f85e801929"),
                ("data-audit/DoHA/doha_processed_cmu.csv",
                 "20f4e75021bd18f03fb3acc073acf90cde47250b6177ae2cdb1bef17604f2e77"),
                ("data-audit/DoHA/doha_processed_topical.csv",
                 "ac2f9a6edb1514b18ce034f1b3ea0f4e68f765cbde4d87f0b6c7ebdd6b5c44b6"),
                ("data-audit/GPT2/gpt2_processed_wow.csv",
                 "a74dcc1b8427fb91ce1b173b2ce98a6ed06560299dd9db544e8976d3b6237987"),
                ("data-audit/GPT2/gpt2_processed_cmu.csv",
                 "a74c0a9ebfa1603a293b7ffae27b6498fd8f112079c5830b0ac7d48a59c3e5b6"),
                ("data-audit/GPT2/gpt2_processed_topical.csv",
                 "7d13fa3258783f76f63963e9aab0a2dc5668003d74b246a8fbda6da6f7be7255"),
            ]) + tuple(Remote(f"faithdial/hub/data/{split}.json", hub_url(FAITHDIAL, f"data/{split}.json"),
                              hub=True) for split in ("train", "valid", "test")),
            note="hub/ is the Hub dataset's data/ folder: `data prepare --benchmark faithdial --source "
                 "DIR/faithdial/hub --split test` reads it without the Hub."),
        Source(
            "fade", "FADE (Das et al., 2022): the human-verified set", f"https://github.com/{FADE}", "MIT",
            "yes, with LICENSE",
            _files(FADE, FADE_HEAD, "fade", [
                ("LICENSE", "ea2cf01c03494ea9c58c7ce0b25a318e881f619462854ba00510de960bb9ad89"),
                ("README.md", "c43030da006815f5ae31f207e89d02f5e4d3089d09dbf18e040f5e0c7ac3338b"),
                ("data/human_verified_500.csv", "7a4d7d14ee1efe84b24c08732ab73f6598d3b5fc632a0c1a3464ce6cb09ea5e7"),
            ]),
            manual=(Manual("fade/data/mixed/", "FADE's train / dev / test splits (data/mixed/*.csv, added in "
                                               "commit e14277a 'added datasets v1') could not be obtained when "
                                               "this entry was written: see the repository's history or ask the "
                                               "authors"),)),
        Source(
            "dialfact", "DialFact (Gupta et al., 2022): the small test file of the release",
            f"https://github.com/{DIALFACT}", "BSD-3-Clause", "yes, with LICENSE.txt",
            _files(DIALFACT, DIALFACT_HEAD, "dialfact", [
                ("LICENSE.txt", "0f3764c856b8d4e6e1aa275bce9f34925a7b0612172c6b57713b5c0f1dab0a6e"),
                ("README.md", "084335d0ec9f40787c07a87e8ba64bc728df220ce288d7127028dc91c148cdd4"),
                ("scripts/README.md", "70392dd82c89dd9d70fcfb1e6daaf0043f381eab3d6a7d2d774597da94ce5a7c"),
                ("scripts/testsmall.jsonl", "cc7c258131e08005096f4a1bd9574a478687c64cb7d6d36b7eb52d9b825e1d3d"),
            ]),
            manual=(Manual("dialfact/data/", "the full valid / test splits (data/valid_split.jsonl, "
                                             f"data/test_split.jsonl in https://github.com/{DIALFACT}) are not "
                                             "fetched: their contents could not be checked when this entry "
                                             "was written"),)),
        Source(
            "finedialfact", "FineDialFact (LREC 2026): HybriDialogue human-annotated atomic facts",
            f"https://github.com/{FINEDIALFACT}", "none stated (no licence file): research use",
            "no: no licence grants redistribution; fetch it instead (small test fixtures only)",
            _files(FINEDIALFACT, FINEDIALFACT_HEAD, "finedialfact", [
                ("README.md", "73a341122c9dd82984df814bf7ea09e9db8d410ea876c5930b0d599a8567566e"),
            ]) + (
                Remote("finedialfact/few_shot_examples.json",
                       gh(FINEDIALFACT, FINEDIALFACT_HEAD, "few_shot/few_shot_examples.json"),
                       "98bdc362f1994a84e85caafc351e2d15ac056cd09d572991a05db9506d04e145"),
                Remote("finedialfact/HybriDial/annotated_test_data.json",
                       gh(FINEDIALFACT, FINEDIALFACT_HEAD, "data/HybriDial/annotated_test_data.json")),
            ),
            subsets=(Subset("finedialfact/hybridial_dev.json", "finedialfact/HybriDial/annotated_test_data.json",
                            fetch_subsets.FINEDIALFACT_DEV, "id",
                            "db81dcbede7040a473611cd4c92ae52cefe363745521dd7021b32fa075d1cf1b",
                            "the project's dev split: 300 of the 500 annotated facts"),),
            note="The GPT-annotated data is on Google Drive (link in the README): not fetched."),
        Source(
            "factcheck_gpt", "Factcheck-GPT (Wang et al., 2024): benchmark and subtask files",
            f"https://github.com/{FACTCHECK}", "Apache-2.0", "yes, with LICENSE",
            _files(FACTCHECK, FACTCHECK_HEAD, "factcheck_gpt", [
                ("LICENSE", "c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4"),
                ("factcheck-GPT-benchmark.jsonl", "8bbf41a58ee1b7431fecd2a23f231f764e378e04edeb4d2a7a83949a7f40cf4b"),
                ("subtasks/subtask2_claim_checkworthiness.jsonl",
                 "8b2591e69f4b96f5b8c6dc9fd551c6d064ca41c2f2b1cc9b61f8473ac93faff0"),
                ("subtasks/subtask3_claim_evidence_stance.jsonl",
                 "3bfa17d7b37bca82bcc0aacf69a8bbd85cffe117d337c95cf7c3b00e34b98d1a"),
                ("subtasks/subtask4_claim_factuality.jsonl",
                 "b87f971ce324c87e0427f100fe24b50594b9d44e3a764490b1bef188917dbae1"),
            ])),
        Source(
            "vista_human", "VISTA human re-annotated conversations (Lewis et al.)", f"https://github.com/{VISTA}",
            "none stated (README: 'License: [Add license here]'): research use",
            "no: no licence grants redistribution; fetch it instead (small test fixtures only)",
            (Remote("vista_human/human_eval_VISTA_input.json",
                    gh(VISTA, VISTA_HEAD, "data/reannotated_data/human_eval_VISTA_input.json")),),
            subsets=(Subset("vista_human/dev.json", "vista_human/human_eval_VISTA_input.json",
                            fetch_subsets.VISTA_HUMAN_DEV, None,
                            "416e2837e2a6edd9e0fef10a05c0893afe28c7c04402b6936011629c737e3ae8",
                            "the project's dev split: 35 of the 140 conversations"),)),
        Source(
            "fhsumbench", "FHSumBench (mixed-context hallucination in summarisation, Findings of ACL 2025)",
            f"https://github.com/{FHSUM}", "none (no licence file)",
            "never: no licence; measurement only, not even excerpts",
            (Remote("fhsumbench/FHSumBench_data.json", gh(FHSUM, FHSUM_DATA, "FHSumBench_data.json")),),
            subsets=(Subset("fhsumbench/dev.json", "fhsumbench/FHSumBench_data.json",
                            fetch_subsets.FHSUMBENCH_DEV, "id",
                            "dcd2ce3c7533ef4c9b5b6320f9c83d17ae1d6e451a0209d6c4d03c851de95e7e",
                            "the project's dev split: 401 of 1,336 rows"),),
            note=f"The file was removed from the repository's tip (commit 48d74f8 'hide_data'); it is taken "
                 f"from commit {FHSUM_DATA[:7]}.",
            warning="fhsumbench has no licence: use it for measurement only and never commit any of it "
                    "(not to the project, not to a fork)"),
        Source(
            "ais", "AIS (Rashkin et al., 2023): WoW and QReCC annotations, with the WoW source",
            f"https://github.com/{AIS}",
            "not stated in the files fetched here (see the repository); WoW: CC BY 4.0 (ParlAI); "
            "QReCC: CC BY-SA 3.0",
            "no: the annotations' licence is not established here; fetch them instead",
            _files(AIS, AIS_HEAD, "ais", [("README.md", None), ("ann_wow.csv", None), ("ann_qrecc.csv", None)])
            + (Remote("ais/wow/test_random_split.json", WOW_TGZ, member="test_random_split.json",
                      archive_sha256=WOW_TGZ_SHA256),),
            manual=(Manual("ais/qrecc/qrecc_test.json",
                           "QReCC test turns of the SCAI QReCC 2022 data: https://zenodo.org/record/5760304 "
                           "(see https://github.com/scai-conf/SCAI-QReCC-21#data); no stable file URL is "
                           "established here"),
                    Manual("ais/qrecc/passages/",
                           "the QReCC passage collection as JSONL {\"id\", \"contents\"} files (tens of GB): "
                           "https://zenodo.org/record/5760304 and https://github.com/apple/ml-qrecc/tree/main/"
                           "collection")),
            note="`data prepare --benchmark ais --source DIR/ais/ann_wow.csv --wow "
                 "DIR/ais/wow/test_random_split.json` needs only the automatic files."),
    ]
    return {s.name: s for s in sources}


def lookup(name: str, sources: dict[str, Source] | None = None) -> Source:
    """The source called ``name`` (``vista-human`` and ``vista_human`` both work)."""
    sources = registry() if sources is None else sources
    for candidate in (name, name.replace("-", "_"), name.replace("_", "-")):
        if candidate in sources:
            return sources[candidate]
    raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(sorted(sources))}")


def load_registry_file(path: str | os.PathLike) -> dict[str, Source]:
    """Sources from a JSON file: ``{"NAME": {"title", "home", "licence", "commit", "remotes": [...],
    "subsets": [...], "manual": [...], "note", "warning"}}`` with the fields of the dataclasses."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise RegistryError(f"{p}: cannot read the registry ({e})") from e
    if not isinstance(raw, dict):
        raise RegistryError(f"{p}: expected a JSON object of benchmark name -> definition")
    out = {}
    for name, d in raw.items():
        try:
            out[name] = Source(
                name, d.get("title", name), d["home"], d.get("licence", "unknown"), d.get("commit", "unknown"),
                tuple(Remote(**r) for r in d.get("remotes", ())),
                tuple(Subset(**{**s, "keep": tuple(s["keep"])}) for s in d.get("subsets", ())),
                tuple(Manual(**m) for m in d.get("manual", ())), d.get("note", ""), d.get("warning", ""))
        except (KeyError, TypeError) as e:
            raise RegistryError(f"{p}: benchmark {name!r}: bad definition ({type(e).__name__}: {e})") from e
        for f in out[name].layout():
            if Path(f).parts[0] != name or ".." in Path(f).parts:
                raise RegistryError(f"{p}: benchmark {name!r}: {f!r} must lie under {name}/")
    return out


class RegistryError(ValueError):
    """A registry file that cannot be used."""


def describe(source: Source) -> str:
    """The ``--list`` entry of one benchmark: location, licence, whether committable, layout."""
    lines = [f"{source.name}: {source.title}",
             f"  from:     {source.home}",
             f"  licence:  {source.licence}",
             f"  commit:   {source.commit}"]
    if source.warning:
        lines.append(f"  warning:  {source.warning}")
    lines.append("  layout:")
    for r in source.remotes:
        origin = f"{r.url} [{r.member}]" if r.member else r.url
        lines.append(f"    {r.dest}  <-  {origin}")
    for s in source.subsets:
        lines.append(f"    {s.dest}  <-  cut from {s.source} ({s.note or f'{len(s.keep)} items'})")
    for m in source.manual:
        lines.append(f"    {m.dest}  (manual: {m.instructions})")
    if source.note:
        lines.append(f"  note:     {source.note}")
    return "\n".join(lines)
