"""The in-image smoke suite: `python -m smoke` checks that torch really works in this environment.

Only torch and the standard library are imported at module level by the check modules; this package
itself and its report, split, nvidia-smi and compatibility modules import no torch at all, so envbuild
can parse reports and tests can exercise the pure logic without paying torch's import.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
