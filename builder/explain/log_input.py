"""What explain reads of a log, in bounded memory: a huge file as its head and tail, an endless stdin cut,
the encoding found (byte-order marks, UTF-16's NUL pattern, else UTF-8), binary data named instead of
decoded."""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import IO, Any

HEAD_BYTES = 8 << 20  # facts (versions, nvidia-smi) sit at the start of a log
TAIL_BYTES = 24 << 20  # the error sits at its end
MAX_READ_BYTES = 256 << 20  # an endless stdin stops here
CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class LogInput:
    """What was read of a log: the text explain looks at, and how it was cut and decoded."""

    text: str
    size: int  # bytes of the input seen (the whole file, or what was read of a stream)
    encoding: str = "utf-8"
    skipped: int = 0  # bytes between head and tail that were not looked at
    stopped: bool = False  # a stream was cut at MAX_READ_BYTES
    binary: str | None = None  # why this is not a text log, when it is not

    def note(self) -> str | None:
        """One phrase on what was not read, for the output line; None when all was read."""
        if self.stopped:
            return (f"stopped reading after {size_text(self.size)}; looked at the first {size_text(HEAD_BYTES)} "
                    f"and the last {size_text(TAIL_BYTES)} read")
        if self.skipped:
            return (f"looked at the first {size_text(HEAD_BYTES)} and the last {size_text(TAIL_BYTES)} of "
                    f"{size_text(self.size)}")
        return None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"bytes": self.size, "encoding": self.encoding}
        if self.skipped:
            data["skipped_bytes"] = self.skipped
        if self.stopped:
            data["stopped"] = True
        if self.binary:
            data["binary"] = self.binary
        return data


def size_text(size: int) -> str:
    if size >= 1 << 30:
        return f"{size / (1 << 30):.1f} GiB"
    return f"{size / (1 << 20):.0f} MiB" if size >= 1 << 20 else f"{max(size, 1) / 1024:.0f} KiB"


def read_log(stream: IO[bytes]) -> LogInput:
    """Read a log from a binary stream in bounded memory: all of it up to HEAD+TAIL bytes, else its head
    and tail (a seekable file jumps to the tail; a pipe is read through, up to MAX_READ_BYTES)."""
    head = stream.read(HEAD_BYTES)
    size, skipped, stopped = len(head), 0, False
    tail = bytearray()
    if _binary_reason(head):
        return decode_log(head, size=_seekable_size(stream) or len(head))
    if len(head) == HEAD_BYTES:
        total = _seekable_size(stream)
        if total is not None and total > HEAD_BYTES + TAIL_BYTES:
            stream.seek(total - TAIL_BYTES)
            tail = bytearray(stream.read(TAIL_BYTES))
            size, skipped = total, total - HEAD_BYTES - TAIL_BYTES
        else:
            while chunk := stream.read(CHUNK_BYTES):
                tail += chunk
                size += len(chunk)
                if len(tail) > TAIL_BYTES + CHUNK_BYTES:
                    skipped += len(tail) - TAIL_BYTES
                    del tail[:len(tail) - TAIL_BYTES]
                if size >= MAX_READ_BYTES:
                    stopped = True
                    break
    return decode_log(bytes(head), bytes(tail), size=size, skipped=skipped, stopped=stopped)


def _seekable_size(stream: IO[bytes]) -> int | None:
    try:
        if not stream.seekable():
            return None
        at = stream.tell()
        end = stream.seek(0, 2)
        stream.seek(at)
        return end
    except (OSError, ValueError):
        return None


_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


def decode_log(head: bytes, tail: bytes = b"", *, size: int | None = None, skipped: int = 0,
               stopped: bool = False) -> LogInput:
    """Bytes to text: a byte-order mark or UTF-16's NUL pattern decides the codec (Windows' PowerShell
    writes UTF-16), else UTF-8 with the undecodable bytes replaced (a GBK or Latin-1 log keeps its ASCII
    messages); compressed or binary data is named instead of decoded."""
    size = len(head) + len(tail) if size is None else size
    binary = _binary_reason(head)
    if binary:
        return LogInput("", size, binary=binary)
    encoding, bom = _encoding_of(head)
    text = head[bom:].decode(encoding, errors="replace")
    if tail:
        # A cut may fall inside a character (UTF-16 pairs, UTF-8 sequences): drop what does not decode whole.
        width = 4 if "32" in encoding else 2 if "16" in encoding else 1
        cut = len(tail) % width if width > 1 else 0
        text += "\n" + tail[cut:].decode(encoding, errors="replace").split("\n", 1)[-1]
    if "\r" in text:  # Windows line ends, and carriage returns of progress bars, end lines too
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return LogInput(text, size, encoding, skipped, stopped)


def _encoding_of(head: bytes) -> tuple[str, int]:
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding, len(bom)
    sample = head[:4096]
    if len(sample) >= 16:
        even, odd = sample[0::2], sample[1::2]
        if odd.count(0) > 0.4 * len(odd) and even.count(0) < 0.1 * len(even):
            return "utf-16-le", 0
        if even.count(0) > 0.4 * len(even) and odd.count(0) < 0.1 * len(odd):
            return "utf-16-be", 0
    return "utf-8", 0


_MAGIC = ((b"\x1f\x8b", "gzip-compressed data (unpack it: `zcat FILE | envbuild explain -`)"),
          (b"PK\x03\x04", "a zip archive"), (b"\x7fELF", "an ELF binary"), (b"\x28\xb5\x2f\xfd", "zstd data"),
          (b"BZh", "bzip2 data"), (b"\xfd7zXZ", "xz data"))


def _binary_reason(head: bytes) -> str | None:
    """Why the start of an input is no text log (compressed, an executable, noise), or None; judged on a
    small sample, before megabytes of it are read or decoded."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    encoding, bom = _encoding_of(head)
    sample = head[bom:bom + 4096].decode(encoding, errors="replace")
    if sample and _unprintable_share(sample) > 0.3:
        return "mostly unprintable bytes"
    return None


def _unprintable_share(sample: str) -> float:
    bad = sum(1 for char in sample if char == "\ufffd" or (ord(char) < 32 and char not in "\t\n\r\x1b\x0c"))
    return bad / len(sample)
