"""What a benchmark module declares for the registry (:mod:`.`): its name, loader and how to recognise its files."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from ..loading import LoadResult


@dataclass(frozen=True)
class Benchmark:
    """One loadable benchmark. Every loader returns a :class:`LoadResult` (conversations and a report that
    accounts for every input row) and takes ``split``, ``ambiguous`` and ``on_error``; other keyword options are
    its own (see the module's docstring): keyword-only parameters, or the fields of ``options_type``, a dataclass
    the loader builds from its ``**options``."""

    name: str
    loader: Callable[..., LoadResult]
    description: str
    path_keys: tuple[str, ...] = ()         # text in a file's path (its last three parts) that names the benchmark
    file_patterns: tuple[str, ...] = ()     # fnmatch patterns of its file names
    first_line_keys: tuple[str, ...] = ()   # text in the first line of its files (a header)
    options_type: type | None = None        # the dataclass of the options the loader takes as **options

    def options(self) -> list[str]:
        params = inspect.signature(self.loader).parameters.values()
        own = [f.name for f in dataclasses.fields(self.options_type)] if self.options_type is not None else []
        return [p.name for p in params if p.kind == p.KEYWORD_ONLY] + own
