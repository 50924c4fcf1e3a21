"""A sweep's progress bar on standard error."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """A progress bar on stderr: redrawn in place on a terminal, one line
    per tenth of the points otherwise."""

    def __init__(self, label: str, total: int, done: int, *, enabled: bool, stream: TextIO | None = None,
                 unit: str = "points") -> None:
        self.label, self.total, self.done, self.unit = label, total, done, unit
        self.enabled = enabled and total > 0
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self.last_draw = 0.0
        self.decile = done * 10 // max(total, 1)

    def say(self, text: str) -> None:
        if self.enabled:
            print(f"{self.label}: {text}", file=self.stream, flush=True)

    def advance(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            if now - self.last_draw >= 0.1 or self.done == self.total:
                self.draw(now)
        else:
            decile = self.done * 10 // self.total
            if decile > self.decile:
                self.decile = decile
                self.say(f"{self.done}/{self.total} {self.unit} ({100 * self.done // self.total}%), "
                         f"{now - self.start:.0f} s")

    def draw(self, now: float) -> None:
        width = 30
        filled = width * self.done // self.total
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} "
                          f"({100 * self.done // self.total}%) {now - self.start:.0f} s")
        self.stream.flush()
        self.last_draw = now

    def close(self) -> None:
        if self.enabled and self.tty and self.last_draw:
            self.stream.write("\n")
            self.stream.flush()
            self.last_draw = 0.0
