"""Entry point for `python -m smoke`.

Kept minimal on purpose: DataLoader workers started with "spawn" re-import this module as
`__mp_main__`, and they must not run the suite again or pay for importing the checks.
"""

from __future__ import annotations

if __name__ == "__main__":
    from smoke.cli import run_cli

    run_cli()
