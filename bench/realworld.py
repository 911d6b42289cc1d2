"""`make bench-realworld`: `envbuild explain` on real error logs no rule was written from, and on bad input.

The logs (tests/corpus/realworld-logs, 130 excerpts of public GitHub issues) were collected with their
expected answer (the family explain must name first, the facts it must read, words its fix must not
contain) written before envbuild ran on them; a seeded third was set aside as held-out before any rule
was written (manifest.yaml says how). Rules are tuned on the dev cases only; the held-out number is
the honest one. Its first run was 39/43; the manifest names the four misses, whose general causes
were fixed afterwards (so those four are no longer blind). A case passes when the expected family is
the first finding, every expected fact is read (a version matches by its leading parts: expected 3.8
fits 3.8.10), and the fix names none of the excluded words.

Bad input, each through the real CLI in a subprocess (peak memory: the child's own VmHWM): a 20 MB
training log with the error at its end (goal: <= 2 s), a 1 GiB log file, 64 MiB of random bytes, an
endless stdin, and UTF-16 and GBK-encoded logs; each must answer in bounded memory.

The device logs (tests/corpus/device-logs) are errors raised on purpose on a real GPU (a lent H200, torch
2.11+cu130), their expected answers written before explain ran on them, all held out; judged the same way.
Their first run was 13/17 (the first batch; the second batch's was 4/6).

Printed: one line per failing held-out or device case, the bad-input lines, then the summary
`realworld: dev=N/M heldout=N/M device=N/M families=N` (families: message families in the catalogue).
`--split dev` prints only dev results (use it while tuning rules), `-v` the reason of every failure.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from builder.explain.families import load_rules
from builder.explain.report import explain_text
from smoke.compat import version_matches_prefix

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "corpus" / "realworld-logs"
DEVICE_CORPUS = REPO / "tests" / "corpus" / "device-logs"
TWENTY_MB_GOAL_S = 2.0
VERSION_FACTS = {"driver", "driver_cuda", "toolkit", "torch", "torch_cuda", "python", "nccl"}


@dataclass(frozen=True)
class Outcome:
    file: str
    split: str
    passed: bool
    why: str


def load_cases(corpus: Path = CORPUS) -> list[dict[str, Any]]:
    """The manifest's cases; a case without a split (every device log) is held out."""
    cases = yaml.safe_load((corpus / "manifest.yaml").read_text(encoding="utf-8"))["cases"]
    return [{"split": "heldout", **case} for case in cases]


def judge(case: dict[str, Any], corpus: Path = CORPUS) -> Outcome:
    report = explain_text((corpus / case["file"]).read_bytes(), case["file"])
    expect = case["expect"]
    fired = [finding.rule for finding in report.findings]
    problems = []
    if not fired or fired[0] != expect["family"]:
        problems.append(f"family {fired[:3] or 'none'} (expected {expect['family']})")
    for name, wanted in (expect.get("facts") or {}).items():
        got = report.facts.get(name)
        if not _fact_fits(name, str(wanted), got):
            problems.append(f"fact {name}={got!r} (expected {wanted!r})")
    fix = report.findings[0].fix or "" if report.findings else ""
    for word in expect.get("fix_excludes") or ():
        if word in fix:
            problems.append(f"fix names {word!r}: {fix}")
    return Outcome(case["file"], case["split"], not problems, "; ".join(problems))


def _fact_fits(name: str, wanted: str, got: str | None) -> bool:
    if got is None:
        return False
    if name in VERSION_FACTS:
        return version_matches_prefix(got, wanted)
    if name == "gpu":
        return " ".join(wanted.casefold().split()) in " ".join(got.casefold().split())
    return got.casefold() == wanted.casefold()


# --- bad input -------------------------------------------------------------------------------------

# The child reports its own peak RSS (VmHWM of its address space): rusage's maxrss would count the
# bench's memory at fork, since Linux keeps it across exec.
_CHILD = ("import os, sys\n"
          "from builder.cli.commands import run_cli\n"
          "code = run_cli(sys.argv[1:])\n"
          "peak = [line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:')]\n"
          "print('peak-kib', *peak, file=sys.stderr)\n"
          "sys.stdout.flush(); sys.stderr.flush(); os._exit(code)\n")


def _run_cli(args: list[str], stdin: Any = None) -> tuple[float, int, str, float]:
    """Seconds, exit code, first output line, and peak RSS in MiB of one `envbuild explain` run."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD, "explain", "--no-host", *args], stdin=stdin,
                          capture_output=True, cwd=REPO, check=False, timeout=600)
    elapsed = time.perf_counter() - started
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines() or ["(no output)"]
    peaks = [line.split()[1] for line in done.stderr.decode().splitlines() if line.startswith("peak-kib ")]
    return elapsed, done.returncode, lines[0][:140], int(peaks[-1]) / 1024 if peaks else float("nan")


def bad_input(folder: Path) -> list[str]:
    said = []
    noise = "".join(f"2024-05-01 12:00:{i % 60:02d} INFO epoch 3 step {i}/50000 loss 0.{i % 997:03d} lr 3e-4 "
                    f"grad_norm 1.02 saved state_dict to ckpt.pt\n" for i in range(2000))
    error = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
             "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    twenty = folder / "train-20mb.log"
    with twenty.open("w", encoding="utf-8") as out:
        while out.tell() < 20 << 20:
            out.write(noise)
        out.write(error)
    timings = []
    for _ in range(3):
        elapsed, code, line, peak = _run_cli([str(twenty)])
        timings.append(elapsed)
    elapsed = min(timings)
    said.append(f"input 20 MB log: {elapsed:.2f} s (goal <= {TWENTY_MB_GOAL_S} s, includes interpreter start), "
                f"exit {code}, peak {peak:.0f} MiB: {line}")

    gib = folder / "big-1gib.log"
    block = (noise * 8).encode()
    with gib.open("wb") as out:
        while out.tell() < 1 << 30:
            out.write(block)
        out.write(error.encode())
    elapsed, code, line, peak = _run_cli([str(gib)])
    said.append(f"input 1 GiB log file: {elapsed:.2f} s, exit {code}, peak {peak:.0f} MiB: {line}")
    gib.unlink()

    garbage = folder / "random.bin"
    garbage.write_bytes(random.Random(22).randbytes(64 << 20))
    elapsed, code, line, peak = _run_cli([str(garbage)])
    said.append(f"input 64 MiB random bytes: {elapsed:.2f} s, exit {code}, peak {peak:.0f} MiB: {line}")

    endless = subprocess.Popen(["yes", "epoch 1 step 2 loss 0.5 all good"], stdout=subprocess.PIPE)
    try:
        elapsed, code, line, peak = _run_cli(["-"], stdin=endless.stdout)
    finally:
        endless.kill()
        endless.wait()
    said.append(f"input endless stdin: {elapsed:.2f} s, exit {code}, peak {peak:.0f} MiB: {line}")

    utf16 = folder / "powershell-utf16.log"
    utf16.write_bytes(("\ufeff" + noise[:4000] + error).encode("utf-16-le"))
    elapsed, code, line, peak = _run_cli([str(utf16)])
    said.append(f"input UTF-16 log (PowerShell redirect): exit {code}: {line}")

    gbk = folder / "gbk.log"
    gbk.write_bytes(("训练开始，第1轮\n" + error + "程序已退出\n").encode("gbk"))
    elapsed, code, line, peak = _run_cli([str(gbk)])
    said.append(f"input GBK-encoded log: exit {code}: {line}")
    return said


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("dev", "all"), default="all",
                        help="dev: only the cases rules may be tuned on (no held-out numbers)")
    parser.add_argument("-v", "--verbose", action="store_true", help="say why every failing case failed")
    parser.add_argument("--no-input", action="store_true", help="skip the bad-input runs")
    args = parser.parse_args(argv)
    cases = [case for case in load_cases() if args.split == "all" or case["split"] == "dev"]
    outcomes = [judge(case) for case in cases]
    for outcome in outcomes:
        if not outcome.passed and (outcome.split == "heldout" or args.verbose):
            print(f"{outcome.split} FAIL {outcome.file}: {outcome.why}")
    device = [] if args.split == "dev" else [judge(case, DEVICE_CORPUS) for case in load_cases(DEVICE_CORPUS)]
    for outcome in device:
        if not outcome.passed:
            print(f"device FAIL {outcome.file}: {outcome.why}")
    if not args.no_input:
        with tempfile.TemporaryDirectory(prefix="bench-realworld-") as folder:
            for line in bad_input(Path(folder)):
                print(line)
    counts = {split: (sum(o.passed for o in outcomes if o.split == split), sum(o.split == split for o in outcomes))
              for split in ("dev", "heldout")}
    summary = f"realworld: dev={counts['dev'][0]}/{counts['dev'][1]}"
    if args.split == "all":
        summary += f" heldout={counts['heldout'][0]}/{counts['heldout'][1]}"
        summary += f" device={sum(o.passed for o in device)}/{len(device)}"
    print(f"{summary} families={len(load_rules())}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
