"""A log as searchable text: where a needle first occurs (remembered, and known absent without a scan
when the log lacks one of a few common words), line numbers on demand, and a few lines around each
occurrence of a needle, so no regex scans the bulk of a big log."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property

# A template's regex runs on a few lines around each occurrence of its needle (its longest literal
# part): a regex that scanned every line of a 20 MB training log would take minutes.
WINDOW_LINES_BEFORE, WINDOW_LINES_AFTER = 3, 12
# Occurrences of one needle looked at: enough for any real log, bounded for a pathological one.
MAX_WINDOWS = 20_000

# Words most needles contain: in a big log each is looked for once, and every needle holding a word the
# log lacks is known absent without a scan of its own (a training log of 20 MB without `nccl` skips
# every NCCL template).
PROBE_WORDS = ("cuda", "nccl", "nvml", "nvidia", "torch", "driver", "version", "symbol", "librar", "conda",
               "mamba", "python", "gpu", "device", "error", "fail", "cannot", "could not", "load")
PROBE_TEXT_CHARS = 1 << 20


class LogText:
    """A log with what every search needs: the text, its lower-case twin, and line numbers on demand."""

    def __init__(self, text: str, origin: tuple[int, ...] = ()) -> None:
        self.text = text
        self._origin = origin  # the pasted log's line of each line of `text` (normalise.py); () when the same
        self._first: dict[tuple[str, bool], int] = {}
        self._absent: list[str] = []  # lower-case words the log does not hold in any case
        if len(text) > PROBE_TEXT_CHARS:
            for word in PROBE_WORDS:
                self.first_at(word, ignore_case=True)

    @cached_property
    def lower(self) -> str:
        return self.text.lower()

    def first_at(self, needle: str, ignore_case: bool = False) -> int:
        """Where `needle` first occurs (-1: nowhere); remembered, as templates and facts share needles."""
        key = (needle, ignore_case)
        if key not in self._first:
            folded = needle.lower()
            if any(word in folded for word in self._absent):
                self._first[key] = -1
            else:
                self._first[key] = (self.lower if ignore_case else self.text).find(needle)
                if ignore_case and self._first[key] == -1:
                    self._absent.append(folded)
        return self._first[key]

    def line_of(self, at: int) -> int:
        """The line of the pasted log that offset `at` of the text sits on."""
        line = self.text.count("\n", 0, at) + 1
        return self._origin[line - 1] if line <= len(self._origin) else line

    def line_text(self, at: int) -> str:
        start = self.text.rfind("\n", 0, at) + 1
        end = self.text.find("\n", at)
        return self.text[start:end if end != -1 else len(self.text)].strip()

    def windows(self, needle: str, ignore_case: bool = False, before: int = WINDOW_LINES_BEFORE,
                after: int = WINDOW_LINES_AFTER, limit: int = MAX_WINDOWS) -> Iterator[tuple[int, int]]:
        """(start, end) of a few lines around each occurrence of `needle`, in order, not overlapping."""
        haystack = self.lower if ignore_case else self.text
        text = self.text
        at = self.first_at(needle, ignore_case)
        count = 0
        while at != -1 and count < limit:
            start = at
            for _ in range(before + 1):
                start = text.rfind("\n", 0, start - 1) + 1 if start > 0 else 0
            end = at
            for _ in range(after):
                next_end = text.find("\n", end + 1)
                if next_end == -1:
                    end = len(text)
                    break
                end = next_end
            yield start, max(end, at + len(needle))
            count += 1
            at = haystack.find(needle, max(end, at + 1))
