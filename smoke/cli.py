"""`python -m smoke`: run the checks, print a compact table, write JSON and JUnit reports.

Exit status: 0 when nothing failed, 1 when a check failed, 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from smoke.compat import CudaExpectation
from smoke.registry import Check, Context, Settings, run_check, select_checks
from smoke.report import FAILED, PASSED, CheckResult, SmokeReport

EXPECT_TORCH_ENV = "ENVBUILD_EXPECT_TORCH"
EXPECT_CUDA_ENV = "ENVBUILD_EXPECT_CUDA"
EXPECT_ARCHS_ENV = "ENVBUILD_EXPECT_ARCHS"
REQUIRE_COMPILE_ENV = "ENVBUILD_REQUIRE_COMPILE"
# NAME=VERSION pairs or NAME (any version), space separated: what the spec pins with torch (torchvision,
# torchaudio, expect:)
EXPECT_PACKAGES_ENV = "ENVBUILD_EXPECT_PACKAGES"
IMPORT_CHECK = "env.import_torch"
IMPORT_CHECK_LISTING = ("torch imports (the CLI's own result; its time is the import time)",
                        "upstream smoke_test.py: `import torch`, which every other check needs")
STATUS_LABELS = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}
# Set by envbuild when it shows the run live: each check's start and end as one line on stderr, in the
# form builder/events.py reads (`envbuild-event {JSON}`); the table on stdout stays as it is.
PROGRESS_ENV = "ENVBUILD_PROGRESS"
EVENT_PREFIX = "envbuild-event "


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m smoke",
        description="Check that torch, CUDA, DataParallel, AMP, checkpoints and DataLoader work in this environment.",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the JSON report here")
    parser.add_argument("--junit", type=Path, metavar="FILE", help="write a JUnit XML report here")
    parser.add_argument("--require-gpus", type=int, default=0, metavar="N",
                        help="fail unless N CUDA devices are visible; GPU skips become failures")
    parser.add_argument("--expect-torch", metavar="VER", default=os.environ.get(EXPECT_TORCH_ENV) or None,
                        help=f"expected torch version prefix, e.g. 2.13 (default: ${EXPECT_TORCH_ENV})")
    parser.add_argument("--expect-cuda", metavar="X.Y|cpu", default=os.environ.get(EXPECT_CUDA_ENV) or None,
                        help=f"expected torch.version.cuda, or 'cpu' (default: ${EXPECT_CUDA_ENV})")
    parser.add_argument("--expect-archs", metavar="sm_XY,...", default=os.environ.get(EXPECT_ARCHS_ENV) or None,
                        help=f"the GPU architectures torch should be built with (default: ${EXPECT_ARCHS_ENV})")
    parser.add_argument("--require-compile", action="store_true",
                        default=os.environ.get(REQUIRE_COMPILE_ENV, "").strip().lower() in ("1", "true", "yes"),
                        help="torch.compile must work: no compiler fails compile.inductor instead of skipping it "
                             f"(default: ${REQUIRE_COMPILE_ENV}=1)")
    parser.add_argument("--expect-packages", metavar="NAME=VER ...", default=os.environ.get(EXPECT_PACKAGES_ENV, ""),
                        help="packages that must be installed, import and have this version prefix (NAME alone: "
                             f"any version), e.g. 'torchvision=0.29.1 torchaudio' (default: ${EXPECT_PACKAGES_ENV})")
    parser.add_argument("--only", metavar="NAME,...", default="",
                        help="run only these checks (full names or groups such as amp,dp)")
    parser.add_argument("--timeout-per-check", type=float, default=120.0, metavar="S",
                        help="fail a check that runs longer than S seconds (default 120)")
    parser.add_argument("--no-collect-env", action="store_true",
                        help="do not attach torch.utils.collect_env output (saves 6-8 s)")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    return parser


def parse_settings(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Settings:
    if args.require_gpus < 0:
        parser.error("--require-gpus must be 0 or more")
    if args.timeout_per_check <= 0:
        parser.error("--timeout-per-check must be more than 0 seconds")
    expectation = _cuda_expectation(parser, args.expect_cuda)
    archs = _expected_archs(parser, args.expect_archs)
    expected = _expected_packages(parser, args.expect_packages)
    return Settings(
        expect_packages=expected,
        expect_torch=args.expect_torch,
        expect_cuda=expectation,
        expect_archs=archs,
        require_gpus=args.require_gpus,
        timeout_per_check=args.timeout_per_check,
        require_compile=args.require_compile,
    )


def _cuda_expectation(parser: argparse.ArgumentParser, text: str | None) -> CudaExpectation | None:
    if not text:
        return None
    try:
        return CudaExpectation.parse(text)
    except ValueError as exc:
        parser.error(str(exc))


def _expected_archs(parser: argparse.ArgumentParser, text: str | None) -> tuple[str, ...] | None:
    if not text:
        return None
    archs = tuple(a for a in re.split(r"[\s,;]+", text) if a)
    bad = [a for a in archs if not re.fullmatch(r"(sm|compute)_\d{2,3}[af]?", a)]
    if bad:
        parser.error(f"--expect-archs {bad[0]!r}: write entries like sm_86 or compute_90")
    return archs


def _expected_packages(parser: argparse.ArgumentParser, text: str) -> tuple[tuple[str, str | None], ...]:
    expected: list[tuple[str, str | None]] = []
    for entry in text.split():
        found = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9_.\-]*)(?:=([0-9][A-Za-z0-9_.+!\-]*))?", entry)
        if not found:
            parser.error(f"--expect-packages {entry!r}: write NAME=VERSION or NAME, e.g. torchvision=0.29.1")
        expected.append((re.sub(r"[-_.]+", "-", found.group(1)).lower(), found.group(2)))
    return tuple(expected)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite; the exit status."""
    return run_suite(argv)[0]


def run_suite(argv: Sequence[str] | None = None) -> tuple[int, list[str]]:
    """Run the suite: (exit status, names of checks abandoned after their timeout)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    settings = parse_settings(parser, args)
    only = [name for name in args.only.split(",") if name.strip()]
    ctx = Context(settings)

    _tell(IMPORT_CHECK, "start", "importing torch")
    import_result, checks = _import_checks()
    _tell_result(import_result)
    if checks is None:  # torch itself is broken: report that alone, as a failure, with its reason
        _print_header()
        _print_row(import_result)
        return _finish(SmokeReport([import_result], {"python": sys.version.split()[0]}), args), []
    try:
        # env.import_torch is the CLI's own result, not a registered check: no selection needed.
        registered_only = [name for name in only if name != IMPORT_CHECK]
        selected = select_checks(checks, registered_only) if registered_only or not only else []
    except ValueError as exc:
        parser.error(str(exc))
    if args.list:
        _print_listing(checks)
        return 0, []

    from smoke.checks.cuda_probe import probe_cuda
    from smoke.environment import collect_env_text, describe_environment

    ctx.gpu_count = probe_cuda().device_count
    results: list[CheckResult] = []
    _print_header()
    if not only or IMPORT_CHECK in only or "env" in only:
        results.append(import_result)
        _print_row(import_result)
    for number, item in enumerate(selected, 1):
        _tell(item.name, "start", f"running ({number} of {len(selected)})")
        result = run_check(item, ctx)
        _tell_result(result)
        results.append(result)
        _print_row(result)

    environment = describe_environment()
    environment["settings"] = {
        "expect_torch": settings.expect_torch,
        "expect_cuda": settings.expect_cuda.describe() if settings.expect_cuda else None,
        "expect_archs": list(settings.expect_archs) if settings.expect_archs else None,
        "require_gpus": settings.require_gpus,
        "require_compile": settings.require_compile,
        "only": only,
    }
    collect_env = None
    if not args.no_collect_env:
        # Last, and in a child with a timeout: it is slow (6-8 s) and only informational.
        _tell("collect_env", "start", "torch.utils.collect_env, for the report")
        collect_env, note = collect_env_text()
        _tell("collect_env", "done", note or "collected")
        if note:
            environment["collect_env_note"] = note
    return _finish(SmokeReport(results, environment, collect_env), args), ctx.hung_checks


def run_cli() -> None:
    rc, hung = run_suite()
    sys.stdout.flush()
    sys.stderr.flush()
    if hung:
        # A check's thread is stuck (inside CUDA, say); a normal exit could wait for it forever.
        os._exit(rc)
    sys.exit(rc)


def _import_checks() -> tuple[CheckResult, list[Check] | None]:
    start = time.perf_counter()
    try:
        import torch

        from smoke.checks import load_checks

        checks = load_checks()
    except Exception as exc:  # ImportError, OSError for missing shared libraries, and worse  # noqa: BLE001
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
        return CheckResult(IMPORT_CHECK, FAILED, f"import torch failed: {message}",
                           time.perf_counter() - start), None
    seconds = time.perf_counter() - start
    reason = f"torch {torch.__version__} imported in {seconds:.1f} s"
    return CheckResult(IMPORT_CHECK, PASSED, reason, seconds, {"torch": str(torch.__version__)}), checks


def _tell(subject: str, state: str, text: str) -> None:
    """One progress event on stderr, when envbuild asked for them (PROGRESS_ENV)."""
    if os.environ.get(PROGRESS_ENV) == "1":
        event = {"subject": subject, "state": state, "text": " ".join(text.split())[:300]}
        print(EVENT_PREFIX + json.dumps(event), file=sys.stderr, flush=True)


def _tell_result(result: CheckResult) -> None:
    said = f"{result.status} in {result.seconds:.1f} s" + (f": {result.reason}" if result.reason else "")
    _tell(result.name, "failed" if result.status == FAILED else "done", said)


def _finish(report: SmokeReport, args: argparse.Namespace) -> int:
    summary = report.summary
    print(f"smoke: {summary.passed} passed, {summary.failed} failed, {summary.skipped} skipped")
    if args.json:
        report.write_json(args.json)
    if args.junit:
        report.write_junit(args.junit)
    return 0 if report.ok else 1


def _print_listing(checks: Sequence[Check]) -> None:
    """Every check, what it verifies, and the seed pitfall or upstream release check it stands for."""
    rows = [(IMPORT_CHECK, *IMPORT_CHECK_LISTING)]
    for item in checks:
        notes = ([f"needs {item.gpus} GPU{'s' if item.gpus > 1 else ''}"] if item.gpus else []) + \
            [f"was {alias}" for alias in item.aliases]
        rows.append((item.name, item.description + (f" [{'; '.join(notes)}]" if notes else ""), item.stands_for))
    for name, description, stands_for in rows:
        print(f"{name:34} {description}")
        print(f"{'':34}   for: {stands_for or '-'}")


def _reason_width() -> int:
    return max(40, shutil.get_terminal_size((160, 24)).columns - 56)


def _print_header() -> None:
    print(f"{'STATUS':6} {'CHECK':34} {'SECONDS':>8}  REASON")


def _print_row(result: CheckResult) -> None:
    reason = " ".join(result.reason.split())
    width = _reason_width()
    if len(reason) > width:
        reason = reason[: width - 3] + "..."
    print(f"{STATUS_LABELS[result.status]:6} {result.name:34} {result.seconds:8.2f}  {reason}", flush=True)
