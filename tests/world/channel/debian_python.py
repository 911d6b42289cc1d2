"""Debian's CPython repacked as a conda `python` package (the one real interpreter of the world).

Debian's interpreter finds its prefix from its own location, so `bin/python3.11` with the stdlib
at `lib/python3.11/` works from any prefix. Three Debian patches would still break a conda prefix,
and the repack undoes them:
- `site.py` looks in `dist-packages`; conda packages and pip write `site-packages`. Bridge:
  `lib/python3.11/dist-packages` is a link to `site-packages`.
- `sysconfig` sends installs to `PREFIX/local/...` (scheme `posix_local`); the repack makes
  `posix_prefix` the default, as upstream CPython and conda-forge's python have it, so
  `pip install` lands in `site-packages` and `bin/`.
- `EXTERNALLY-MANAGED` makes pip refuse to install: dropped (a conda prefix is not the system).
The extension modules link to the system's libssl, libsqlite3, libffi, libexpat and zlib, so a
prefix made from this package runs only where those libraries are (Debian 12 or alike).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from builder.errors import EnvbuildError

from .wheels import PREFIX_PLACEHOLDER

# The exact Debian text replaced; if Debian changes it the build stops instead of shipping a
# python that installs into the wrong folder.
_DEBIAN_SCHEME_CHOICE = """    if sys.base_prefix != sys.prefix or hasattr(sys, "real_prefix"):
        # virtual environments
        prefix_scheme = 'posix_prefix'
    else:
        # default to /usr for package builds, /usr/local otherwise
        deb_build = os.environ.get('DEB_PYTHON_INSTALL_LAYOUT', 'posix_local')
        if deb_build in ('deb', 'deb_system'):
            prefix_scheme = 'deb_system'
        else:
            prefix_scheme = 'posix_local'
"""
_CONDA_SCHEME_CHOICE = """    # envbuild world: a conda prefix installs like upstream CPython, into lib/pythonX.Y/site-packages.
    prefix_scheme = 'posix_prefix'
"""
_SITE_PACKAGES_README = (
    "This folder holds the packages installed into this prefix (conda packages and pip).\n"
    "dist-packages beside it is a link here, where Debian's site.py looks.\n"
)


def deb_version(deb: Path) -> str:
    """The package version of a .deb, e.g. 3.11.2-6+deb12u9."""
    return _dpkg_deb("-f", str(deb), "Version").strip()


def upstream_version(debian_version: str) -> str:
    """3.11.2-6+deb12u9 -> 3.11.2 (no epoch, no Debian revision)."""
    return debian_version.split(":", 1)[-1].rsplit("-", 1)[0]


def repack_tree(debs: list[Path], tree: Path, short_version: str) -> None:
    """Unpack `debs` and lay them out as a conda python prefix under `tree`."""
    with tempfile.TemporaryDirectory(prefix="deb-") as tmp:
        root = Path(tmp)
        for deb in debs:
            _dpkg_deb("-x", str(deb), str(root))
        _lay_out(root / "usr", tree, short_version)


def _lay_out(usr: Path, tree: Path, short: str) -> None:
    stdlib_src = usr / "lib" / f"python{short}"
    if not (usr / "bin" / f"python{short}").is_file() or not (stdlib_src / "os.py").is_file():
        raise EnvbuildError(f"the Debian packages lack python{short} or its stdlib: download the full set")
    bin_dir = tree / "bin"
    bin_dir.mkdir(parents=True)
    shutil.copy2(usr / "bin" / f"python{short}", bin_dir / f"python{short}")
    os.symlink(f"python{short}", bin_dir / "python3")
    os.symlink(f"python{short}", bin_dir / "python")
    _copy_scripts(usr / "bin", bin_dir, short)

    stdlib = tree / "lib" / f"python{short}"
    shutil.copytree(stdlib_src, stdlib, symlinks=True)
    _drop_absolute_links(stdlib)
    (stdlib / "EXTERNALLY-MANAGED").unlink(missing_ok=True)
    _patch_scheme(stdlib / "sysconfig.py")
    (stdlib / "site-packages").mkdir(exist_ok=True)
    (stdlib / "site-packages" / "README.txt").write_text(_SITE_PACKAGES_README)
    os.symlink("site-packages", stdlib / "dist-packages")
    _copy_headers(usr, tree, short)


def _copy_headers(usr: Path, tree: Path, short: str) -> None:
    """include/pythonX.Y as conda-forge's python has it (sysconfig's `include` path of the prefix):
    Debian splits pyconfig.h into a per-architecture folder and leaves a stub that includes it by a
    multiarch path the prefix has not; the real one replaces the stub."""
    headers = usr / "include" / f"python{short}"
    if not (headers / "Python.h").is_file():
        raise EnvbuildError(f"the Debian packages lack python{short}'s headers: add libpython{short}-dev")
    include = tree / "include" / f"python{short}"
    shutil.copytree(headers, include, symlinks=False)
    arch_configs = sorted((usr / "include").glob(f"*-linux-gnu/python{short}/pyconfig.h"))
    if arch_configs:
        shutil.copyfile(arch_configs[0], include / "pyconfig.h")


def _copy_scripts(src_bin: Path, dst_bin: Path, short: str) -> None:
    """pydoc3.11 and friends, with their `/usr/bin/python3.11` shebang pointing into the prefix."""
    for script in sorted(src_bin.iterdir()):
        if script.name == f"python{short}":
            continue
        if script.is_symlink():
            # pdb3.11 -> ../lib/python3.11/pdb.py stays valid in the prefix layout
            os.symlink(os.readlink(script), dst_bin / script.name)
            continue
        text = script.read_bytes()
        first, sep, rest = text.partition(b"\n")
        if first.startswith(b"#!") and b"python" in first:
            first = f"#!{PREFIX_PLACEHOLDER}/bin/python{short}".encode()
        (dst_bin / script.name).write_bytes(first + sep + rest)
        os.chmod(dst_bin / script.name, 0o755)


def _drop_absolute_links(folder: Path) -> None:
    # e.g. sitecustomize.py -> /etc/python3.11/sitecustomize.py: it would read the host's config.
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in filenames + dirnames:
            path = Path(dirpath) / name
            if path.is_symlink() and os.readlink(path).startswith("/"):
                path.unlink()


def _patch_scheme(sysconfig_py: Path) -> None:
    text = sysconfig_py.read_text()
    if _DEBIAN_SCHEME_CHOICE not in text:
        raise EnvbuildError(
            f"{sysconfig_py.name} from Debian no longer has the install scheme choice the repack replaces: "
            "update tests/world/channel/debian_python.py for this Debian release"
        )
    sysconfig_py.write_text(text.replace(_DEBIAN_SCHEME_CHOICE, _CONDA_SCHEME_CHOICE))


def _dpkg_deb(*args: str) -> str:
    if shutil.which("dpkg-deb") is None:
        raise EnvbuildError("dpkg-deb not found: the world's python is repacked from Debian packages (apt-get install dpkg)")
    done = subprocess.run(["dpkg-deb", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise EnvbuildError(f"dpkg-deb {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout
