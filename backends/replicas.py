"""The replicas of one served deployment as a client sees them: each request goes to the live replica with the
fewest requests in flight; a failing one is set aside for a backoff and used again once it answers
(:class:`~.openai_compat.OpenAIBackend` and the served students use it)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


class Aborted(Exception):
    """A queued request that was not sent because another one exhausted its retries."""


class Exhausted(Exception):
    """Every replica failed more than ``max_retries`` times in a row."""


@dataclass
class Replica:
    """One server of a deployment and its health as this client sees it."""

    url: str
    fails: int = 0            # consecutive failure episodes (reset by a success)
    down_until: float = 0.0   # monotonic time before which no request is sent to it
    episode: int = 0          # bumped when it is set aside: requests already in flight do not count twice
    in_flight: int = 0
    answered: int = 0
    last_error: str = ""


class Replicas:
    """Picks a live replica per attempt and sets failing ones aside (see the module docstring)."""

    def __init__(self, urls: Sequence[str], max_retries: int, delay: Callable[[int, BaseException], float],
                 role: str) -> None:
        self.replicas = [Replica(u) for u in urls]
        self.max_retries, self.delay, self.role = max_retries, delay, role
        self.events: list[dict[str, Any]] = []   # set aside / back, for the run summary

    async def acquire(self, abort: asyncio.Event) -> tuple[Replica, int]:
        while True:
            if abort.is_set():
                raise Aborted()
            if all(r.fails > self.max_retries for r in self.replicas):
                raise Exhausted()
            now = time.monotonic()
            live = [r for r in self.replicas if r.down_until <= now]
            if live:
                r = min(live, key=lambda r: (r.in_flight, r.answered))
                r.in_flight += 1
                return r, r.episode
            await asyncio.sleep(max(0.01, min(r.down_until for r in self.replicas) - now))

    def succeeded(self, r: Replica) -> None:
        r.in_flight -= 1
        r.answered += 1
        if r.fails:
            self.events.append({"replica": redact_url(r.url), "event": "back", "t": round(time.time(), 3)})
            log.warning("%s server %s answers again", self.role, redact_url(r.url))
        r.fails = 0

    def failed(self, r: Replica, episode: int, exc: BaseException) -> bool:
        """Set ``r`` aside; False when another request already did for this episode (not counted)."""
        r.in_flight -= 1
        if episode != r.episode:
            return False
        self.set_aside(r, exc)
        return True

    def set_aside(self, r: Replica, exc: BaseException) -> None:
        r.episode += 1
        r.fails += 1
        r.last_error = str(exc)
        r.down_until = time.monotonic() + self.delay(r.fails, exc)
        self.events.append({"replica": redact_url(r.url), "event": "set aside", "error": str(exc)[:200],
                            "t": round(time.time(), 3)})

    def describe(self) -> str:
        return ", ".join(f"{redact_url(r.url)}: {r.fails} failures ({r.last_error[:120]})" for r in self.replicas)


def redact_url(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.username or parts.password:
        parts = parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else ""))
    return urlunsplit(parts)
