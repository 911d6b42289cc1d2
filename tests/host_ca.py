"""CA certificates for tests come from this host's trusted bundle at test time: none is committed."""

from __future__ import annotations

import re
import ssl
from functools import lru_cache
from pathlib import Path

CERTIFICATE_BLOCK = re.compile(r"-----BEGIN CERTIFICATE-----\n.*?\n-----END CERTIFICATE-----\n?", re.S)


@lru_cache(maxsize=1)
def host_ca_certificate() -> str:
    """The first certificate of the bundle this Python trusts (a public CA's certificate, read, never stored)."""
    candidates = [ssl.get_default_verify_paths().cafile]
    try:
        import certifi  # requests brings it; a fallback where the system has no bundle

        candidates.append(certifi.where())
    except ImportError:
        pass
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            found = CERTIFICATE_BLOCK.search(Path(candidate).read_text(encoding="utf-8", errors="replace"))
            if found:
                return found.group(0).rstrip("\n") + "\n"
    raise RuntimeError("no CA bundle on this host to take a test certificate from (install ca-certificates)")


def private_key_block() -> str:
    """A block armoured as a private key (a certificate's body under that label): what envbuild must refuse."""
    return host_ca_certificate().replace("CERTIFICATE", "PRIVATE KEY")
