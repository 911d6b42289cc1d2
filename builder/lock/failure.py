"""What a failed conda-lock run says, cut to the lines that explain it, with a hint where one helps."""

from __future__ import annotations

from builder.specs.target import Target


def explain_failure(log_text: str) -> str:
    """The lines of conda-lock's output that explain a failure, without traceback noise."""
    lines = [line.rstrip() for line in log_text.splitlines() if line.strip()]
    # conda-lock prints the solver's explanation between these two lines.
    start = next((i for i, line in enumerate(lines) if "Could not lock the environment" in line), None)
    if start is not None:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].strip().startswith("Command:")), len(lines))
        return "\n".join(lines[start:end][:25])
    marked = [line for line in lines if "envbuild:" in line or "conflict" in line.lower()
              or "cannot be installed" in line.lower() or "unsatisfiable" in line.lower()
              or "nothing provides" in line.lower()]
    keep = marked or [line for line in lines if not line.startswith(("  File ", "Traceback", "    "))]
    text = "\n".join(line.removeprefix("envbuild: ") for line in keep[-20:])
    return text or "conda-lock failed without output"


def pip_hint(target: Target, explanation: str) -> str:
    """Where a pip-side failure points: the index the pip packages were asked from."""
    pip_side = ("uv found no pip packages", "uv resolving the pip packages")
    if not target.pip_index or not any(marker in explanation for marker in pip_side):
        return ""
    return (f"\nhint: the pip packages of this target come from {target.pip_index}; "
            "give --pip-index URL ({tag} allowed) for a reachable index that has them")
