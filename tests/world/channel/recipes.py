"""Every package of the offline world, planned from world.yaml: metadata plus how to make its payload.

Nothing is written here; `build.py` writes what changed. Payload-free stand-ins carry one marker
file under `share/envbuild-world/stand-ins/` so that an installed environment shows what it is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.world.channel.packages import CondaPackage, PackageFile

from . import debian_python
from .wheels import WheelInfo, conda_depends, conda_name, entry_point_scripts, noarch_python_spec, unpack_wheel

NOARCH_PYTHON_BUILD = "pyhd8ed1ab_0"  # conda-forge's build string for most noarch python packages
_NEVER = "==99999999"  # conda-forge's way to make two packages mutually exclusive


@dataclass(frozen=True)
class Planned:
    """One package to write into `channel`: its metadata and, for real packages, its payload."""

    channel: str
    meta: CondaPackage
    fmt: str = ".tar.bz2"
    source: str = ""  # digest of the inputs that are not in `meta` (wheel, .deb files)
    fill_tree: Callable[[Path], None] | None = None  # writes the payload into an empty folder

    @property
    def real(self) -> bool:
        return self.fill_tree is not None


@dataclass(frozen=True)
class Inputs:
    """What the plan reads: the table, the wheels (by canonical name) and the Debian python."""

    table: dict[str, Any]
    wheels: dict[str, list[WheelInfo]]
    debs: tuple[Path, ...] = ()
    deb_versions: tuple[str, ...] = ()
    metadata_only: bool = False  # plan records only (synthetic channels): no payload is made


def plan_world(inputs: Inputs) -> list[Planned]:
    return [*plan_conda_forge(inputs), *plan_pytorch_channel(inputs), *plan_nvidia_channel(inputs)]


# ---- conda-forge ------------------------------------------------------------------------------


def plan_conda_forge(inputs: Inputs) -> Iterator[Planned]:
    cf = inputs.table["conda_forge"]
    yield from _python_abis(cf)
    yield from _pythons(inputs)
    yield from _noarch_wheels(inputs)
    yield from _noarch_python_standins(cf)
    yield from _compiled_wheels(inputs)
    yield from _cuda(cf)
    yield from _pytorch(inputs)


def python_shorts(cf: dict[str, Any]) -> list[str]:
    return sorted({".".join(p["version"].split(".")[:2]) for p in cf["pythons"]} | {"3.11"}, key=_version_key)


def _python_abis(cf: dict[str, Any]) -> Iterator[Planned]:
    number = cf["python_abi_build_number"]
    for short in python_shorts(cf):
        yield Planned("conda-forge", CondaPackage(
            "python_abi", short, f"{number}_cp{_nodot(short)}", number, noarch="generic",
            constrains=(f"python {short}.* *_cpython",), license="BSD-3-Clause"))


def _pythons(inputs: Inputs) -> Iterator[Planned]:
    cf = inputs.table["conda_forge"]
    for entry in cf["pythons"]:
        short = ".".join(entry["version"].split(".")[:2])
        for subdir in entry["subdirs"]:
            yield _standin("conda-forge", "python", entry["version"], f"{_h('python', entry['version'], subdir)}_0_cpython",
                           subdir, depends=(_abi(short),), license="Python-2.0")
    deb = inputs.table["debian_python"]
    short = deb["short_version"]
    if inputs.metadata_only:
        yield _standin("conda-forge", "python", deb["metadata_only_version"],
                       f"{_h('python', deb['metadata_only_version'], 'linux-64')}_0_cpython", "linux-64",
                       depends=(_abi(short),), license="Python-2.0")
    elif inputs.debs:
        version = debian_python.upstream_version(inputs.deb_versions[0])
        debs = list(inputs.debs)
        meta = CondaPackage("python", version, f"{_h(*inputs.deb_versions)}_0_cpython", 0, subdir="linux-64",
                            depends=(_abi(short),), license="Python-2.0")
        yield Planned("conda-forge", meta, ".conda", source=" ".join(inputs.deb_versions),
                      fill_tree=lambda tree: debian_python.repack_tree(debs, tree, short))


def _noarch_wheels(inputs: Inputs) -> Iterator[Planned]:
    cf = inputs.table["conda_forge"]
    mapping = inputs.table["pypi_to_conda"]
    for index_name in cf["noarch_python_wheels"]:
        for wheel in inputs.wheels[index_name]:
            meta = CondaPackage(
                conda_name(wheel.name, mapping), _public(wheel.version), NOARCH_PYTHON_BUILD, 0, noarch="python",
                depends=(noarch_python_spec(wheel), *conda_depends(wheel, mapping, "3.11")),
                entry_points=wheel.console_scripts)
            yield _from_wheel(meta, wheel, None)


def _noarch_python_standins(cf: dict[str, Any]) -> Iterator[Planned]:
    for entry in cf.get("noarch_python_standins", []):
        yield _standin("conda-forge", entry["name"], entry["version"], NOARCH_PYTHON_BUILD, "noarch",
                       depends=tuple(entry["depends"]), noarch="python")


def _compiled_wheels(inputs: Inputs) -> Iterator[Planned]:
    cf = inputs.table["conda_forge"]
    mapping = inputs.table["pypi_to_conda"]
    for index_name in cf["compiled_wheels"]:
        for wheel in inputs.wheels[index_name]:
            name, version = conda_name(wheel.name, mapping), _public(wheel.version)
            extra = conda_depends(wheel, mapping, "3.11")
            for subdir in cf["compiled_standin_subdirs"]:
                for short in cf["compiled_standin_pythons"]:
                    build = f"py{_nodot(short)}h{_h(name, version, subdir, short)[1:]}_0"
                    depends = (*_python_pins(short), *extra)
                    if subdir == "linux-64" and short == "3.11":
                        meta = CondaPackage(name, version, build, 0, subdir=subdir, depends=depends,
                                            files=entry_point_scripts(wheel, short))
                        yield _from_wheel(meta, wheel, short)
                    else:
                        yield _standin("conda-forge", name, version, build, subdir, depends=depends)


def _cuda(cf: dict[str, Any]) -> Iterator[Planned]:
    for cuda in cf["cuda"]:
        x_y = cuda["version"]
        yield Planned("conda-forge", CondaPackage(
            "cuda-version", x_y, f"{_h('cuda-version', x_y)}_3", 3, noarch="generic",
            constrains=(f"__cuda >={x_y}", f"cudatoolkit {x_y}|{x_y}.*"), license="LicenseRef-NVIDIA-End-User-License-Agreement"))
        for subdir in cf["cudart_subdirs"]:
            yield _standin("conda-forge", "cuda-cudart", cuda["cudart"], f"{_h('cuda-cudart', cuda['cudart'], subdir)}_0",
                           subdir, depends=(f"cuda-version >={x_y},<{cuda['next']}.0a0",))


def _pytorch(inputs: Inputs) -> Iterator[Planned]:
    cf = inputs.table["conda_forge"]
    torch_wheel = inputs.wheels["torch"][0]
    torch_depends = conda_depends(torch_wheel, inputs.table["pypi_to_conda"], "3.11")
    real = cf["real_pytorch"]
    numbers = cf["build_numbers"]
    for release in cf["pytorch"]:
        version = release["version"]
        for flavour, spec in release["flavours"].items():
            kind = "cpu" if flavour == "cpu" else "cuda"
            number = numbers[kind]
            cuda_depends = _cuda_depends(spec) if kind == "cuda" else ()
            never = (f"pytorch-gpu {_NEVER}",) if kind == "cpu" else (f"pytorch-cpu {_NEVER}",)
            for subdir in spec["subdirs"]:
                for short in release["pythons"]:
                    build = f"{flavour}_py{_nodot(short)}_{_h('pytorch', version, flavour, subdir, short)}_{number}"
                    depends = (*_python_pins(short), *torch_depends, *cuda_depends)
                    is_real = (version, flavour, short, subdir) == (real["version"], real["flavour"], real["python"], real["subdir"])
                    if is_real:
                        meta = CondaPackage("pytorch", version, build, number, subdir=subdir, depends=depends,
                                            constrains=never, files=entry_point_scripts(torch_wheel, short), license="BSD-3-Clause")
                        yield _from_wheel(meta, torch_wheel, short)
                    else:
                        yield _standin("conda-forge", "pytorch", version, build, subdir, number, depends, never)
                    tv_build = f"{flavour}_py{_nodot(short)}_{_h('torchvision', release['torchvision'], flavour, subdir, short)}_{number}"
                    yield _standin("conda-forge", "torchvision", release["torchvision"], tv_build, subdir, number,
                                   (*_python_pins(short), "numpy", f"pytorch * {kind}*", _minor_range("pytorch", version),
                                    *cuda_depends))
        yield from _selectors(release, numbers)


def _selectors(release: dict[str, Any], numbers: dict[str, int]) -> Iterator[Planned]:
    """pytorch-gpu / pytorch-cpu: metadata-only packages that pick the flavour, as on conda-forge."""
    version = release["version"]
    by_kind: dict[str, set[str]] = {"cpu": set(), "cuda": set()}
    for flavour, spec in release["flavours"].items():
        by_kind["cpu" if flavour == "cpu" else "cuda"].update(spec["subdirs"])
    for kind, subdirs in by_kind.items():
        name = "pytorch-cpu" if kind == "cpu" else "pytorch-gpu"
        for subdir in sorted(subdirs):
            yield Planned("conda-forge", CondaPackage(
                name, version, f"{kind}_{_h(name, version, subdir)}_{numbers[kind]}", numbers[kind], subdir=subdir,
                depends=(f"pytorch {version} {kind}*",), license="BSD-3-Clause"))


def _cuda_depends(spec: dict[str, Any]) -> tuple[str, ...]:
    cuda, below = spec["cuda"], spec["below"]
    return ("__cuda", f"cuda-version >={cuda},<{below}", f"cuda-cudart >={cuda},<{below}.0a0")


# ---- legacy pytorch channel and nvidia --------------------------------------------------------


def plan_pytorch_channel(inputs: Inputs) -> Iterator[Planned]:
    pt = inputs.table["pytorch_channel"]
    version, short, cudnn = pt["pytorch_version"], pt["python"], pt["cudnn"]
    tv = pt["torchvision_version"]
    depends = (f"python >={short},<{_next_minor(short)}.0a0", *pt["pytorch_depends"])
    ch = "pytorch"
    # pytorch-mutex: exactly one flavour per environment; the cpu one carries a track feature so a
    # solver only takes it when asked (`cpuonly`).
    yield Planned(ch, CondaPackage("pytorch-mutex", "1.0", "cuda", 100, noarch="generic"))
    yield Planned(ch, CondaPackage("pytorch-mutex", "1.0", "cpu", 100, noarch="generic", track_features="pytorch-mutex"))
    yield Planned(ch, CondaPackage("cpuonly", "2.0", "0", 0, noarch="generic", depends=("pytorch-mutex 1.0 cpu",)))
    for x_y in pt["cuda"]:
        nxt = _next_minor(x_y)
        yield Planned(ch, CondaPackage(
            "pytorch-cuda", x_y, f"{_h('pytorch-cuda', x_y)}_6", 6, noarch="generic",
            depends=(f"cuda-runtime >={x_y},<{nxt}", f"cuda-cudart >={x_y},<{nxt}", "pytorch-mutex 1.0 cuda")))
        yield _standin(ch, "pytorch", version, f"py{short}_cuda{x_y}_cudnn{cudnn}_0", "linux-64", 0,
                       (*depends, f"pytorch-cuda >={x_y},<{nxt}", "pytorch-mutex 1.0 cuda"))
        yield _standin(ch, "torchvision", tv, f"py{_nodot(short)}_cu{_nodot(x_y)}", "linux-64", 0,
                       (f"python >={short},<{_next_minor(short)}.0a0", "numpy", f"pytorch {version}",
                        f"pytorch-cuda {x_y}.*", "pytorch-mutex 1.0 cuda"))
    yield _standin(ch, "pytorch", version, f"py{short}_cpu_0", "linux-64", 0, (*depends, "pytorch-mutex 1.0 cpu"))
    yield _standin(ch, "torchvision", tv, f"py{_nodot(short)}_cpu", "linux-64", 0,
                   (f"python >={short},<{_next_minor(short)}.0a0", "numpy", f"pytorch {version}", "pytorch-mutex 1.0 cpu"))
    yield _standin(ch, "pytorch", version, f"py{short}_0", "osx-arm64", 0, depends)
    yield _standin(ch, "torchvision", tv, f"py{_nodot(short)}_cpu", "osx-arm64", 0,
                   (f"python >={short},<{_next_minor(short)}.0a0", "numpy", f"pytorch {version}"))


def plan_nvidia_channel(inputs: Inputs) -> Iterator[Planned]:
    for cuda in inputs.table["nvidia_channel"]["cuda"]:
        x_y, nxt = cuda["version"], _next_minor(cuda["version"])
        yield _standin("nvidia", "cuda-cudart", cuda["cudart"], "0", "linux-64")
        yield _standin("nvidia", "cuda-runtime", f"{x_y}.0", "0", "linux-64", depends=(f"cuda-cudart >={x_y},<{nxt}",))


# ---- helpers ----------------------------------------------------------------------------------


def _from_wheel(meta: CondaPackage, wheel: WheelInfo, python_short: str | None) -> Planned:
    return Planned("conda-forge", meta, ".conda", source=wheel.sha256,
                   fill_tree=lambda tree: unpack_wheel(wheel, tree, python_short))


def _standin(channel: str, name: str, version: str, build: str, subdir: str, build_number: int = 0,
             depends: tuple[str, ...] = (), constrains: tuple[str, ...] = (), license: str = "",
             noarch: str | None = None) -> Planned:
    dist = f"{name}-{version}-{build}"
    note = (f"{dist} is a payload-free stand-in of envbuild's offline test world: the metadata of the real "
            f"package, none of its files. See tests/world/CHANNEL.md.\n").encode()
    marker = PackageFile(f"share/envbuild-world/stand-ins/{subdir}/{dist}.txt", note)
    return Planned(channel, CondaPackage(name, version, build, build_number, subdir=subdir,
                                         noarch=noarch or ("generic" if subdir == "noarch" else None), depends=depends,
                                         constrains=constrains, files=(marker,), license=license))


def _python_pins(short: str) -> tuple[str, str]:
    return (f"python >={short},<{_next_minor(short)}.0a0", _abi(short))


def _abi(short: str) -> str:
    return f"python_abi {short}.* *_cp{_nodot(short)}"


def _minor_range(name: str, version: str) -> str:
    major_minor = ".".join(version.split(".")[:2])
    return f"{name} >={version},<{_next_minor(major_minor)}.0a0"


def _next_minor(x_y: str) -> str:
    major, minor = x_y.split(".")[:2]
    return f"{major}.{int(minor) + 1}"


def _nodot(short: str) -> str:
    return short.replace(".", "")


def _public(version: str) -> str:
    # conda versions of wheels drop the local part: torch 2.13.0+cpu is pytorch 2.13.0 (cpu build).
    return version.split("+", 1)[0]


def _h(*parts: str) -> str:
    """conda-build's `h<7 hex>` build hash, derived from what distinguishes the build."""
    return "h" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:7]


def _version_key(short: str) -> tuple[int, ...]:
    return tuple(int(p) for p in short.split("."))
