"""`python -m builder`: the envbuild command without the console script (tests, CI)."""

from builder.cli.commands import main

if __name__ == "__main__":
    main()
