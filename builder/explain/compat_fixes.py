"""Refiners whose fix is a build, driver or toolkit chosen with the compatibility data and the log's
machine (never a build the stated driver or GPU cannot run), and the next step for a log without a
known family."""

from __future__ import annotations

from builder.explain.builds import (
    NVCC_FIRST,
    best_build_words,
    kernel_build,
    released_builds,
    runnable_builds,
    runnable_targets,
)
from builder.explain.context import ExplainContext
from builder.explain.facts import FACT_WORDS, capability_of, cuda_from_text
from builder.explain.machine import Machine, driver_runs, gpus_covered, trusted_driver_cuda
from builder.explain.matching import Hit
from builder.explain.refining import Refined, refines
from builder.findings import Severity
from builder.specs.compat import parse_version
from builder.specs.cuda import CudaVersion
from builder.specs.gpus import sm_name
from smoke.gpu_compat import arch_coverage, driver_cuda_from_nvml


def next_step_from_facts(context: ExplainContext) -> str:
    """For a log without a known family: a verdict the facts allow, else where to look."""
    facts = context.facts
    torch_cuda = facts.cuda("torch_cuda")
    machine = context.machine
    if torch_cuda and machine.knows_driver and driver_runs(machine, torch_cuda, context.compat) is None:
        better = best_build_words(context)
        return (f"torch {facts.get('torch') or ''} is built for CUDA {torch_cuda}, which {machine.driver_words()} "
                f"cannot run: use {better or 'a build for the driver'}, or update the NVIDIA driver to >= "
                f"{context.compat.min_driver(torch_cuda) or 'a newer one'}").replace("torch  is", "torch is")
    archs = facts.get("archs")
    capability = facts.capability
    if archs and capability and not arch_coverage(archs.split(), capability).covered:
        better = best_build_words(context, capability) or "a build with its kernels"
        return f"the GPU ({sm_name(capability)}) is not in torch's arch list ({archs}): use {better}"
    if facts:
        return ("find the first error line of the log (the first Traceback or `error`, not the last) and run "
                "`envbuild explain` on it; `envbuild doctor SPEC` where it ran checks driver, GPUs and build")
    return ("paste the full error output (the first Traceback, not only its last line); `envbuild explain "
            "--catalogue` lists the messages explain knows")


def _major_minor(version: str) -> tuple[int, int]:
    """`9.0` -> (9, 0): a compute capability as the log writes it."""
    parts = parse_version(version).release
    return parts[0], parts[1] if len(parts) > 1 else 0


def _with_facts(message: str, context: ExplainContext, *names: str) -> str:
    said = [f"{FACT_WORDS[name]} {context.facts.get(name)}" for name in names if context.facts.get(name)]
    return message + (f" (the log: {', '.join(said)})" if said else "")


def _host_gpu_words(context: ExplainContext) -> str:
    known = [gpu for gpu in context.gpus if gpu.capability]
    if not known:
        return ""
    return "; this host: " + ", ".join(f"GPU {gpu.index} {gpu.name} ({gpu.sm})" for gpu in known)


def _update_driver_words(context: ExplainContext, cuda: CudaVersion | None = None) -> str:
    """'update the NVIDIA driver to >= X (runs CUDA Y builds)' for the newest CUDA of the data, or `cuda`."""
    cuda = cuda or max(c for _, _, c, _ in released_builds(context.compat))
    minimum = context.compat.min_driver(cuda)
    return f"update the NVIDIA driver to >= {minimum} (runs CUDA {cuda.major}.x builds)" if minimum \
        else "update the NVIDIA driver"


@refines("explain.cuda.arch-not-in-build")
def _arch_not_in_build(hit: Hit, context: ExplainContext) -> Refined:
    sm = hit.fields.get("sm", "")
    capability = capability_of(sm)
    message = hit.text(hit.family.message)
    if context.machine.driver_from == "from the log":
        message += f"; {context.machine.driver_words()}"
    if capability is None:
        return Refined(message, hit.text(hit.family.fix))
    targets = runnable_targets(context, capability)
    if targets:
        target = targets[0][0]
        return Refined(message, f"use target {target.key} (its build has {sm} kernels): "
                                f"`envbuild image SPEC --cuda {target.cuda}`")
    chosen = kernel_build(context, capability, sm)
    if chosen:
        build, fix = chosen
        fix += (f"; in a spec: a target `cuda: \"{build.cuda}\"` with that torch, then `envbuild doctor SPEC` on "
                "this host to confirm")
        if build.how == "minor":
            toolkit = context.compat.toolkit(build.cuda)
            if toolkit:
                fix += f"; or update the driver: >= {toolkit.full_compat_driver} runs it without minor-version limits"
        return Refined(message, fix)
    if context.machine.knows_driver and any(arch_coverage(archs, capability).covered
                                            for *_, archs in released_builds(context.compat)):
        return Refined(message, f"every released build with {sm} kernels needs a newer driver than "
                                f"{context.machine.driver_words()}: {_update_driver_words(context)}")
    return Refined(message, f"no released torch build in envbuild's data has {sm} kernels: "
                            "build torch from source with TORCH_CUDA_ARCH_LIST")


@refines("explain.cuda.arch-too-old")
def _arch_too_old(hit: Hit, context: ExplainContext) -> Refined:
    cap = hit.fields.get("cap", "")
    capability = capability_of(f"sm_{cap.replace('.', '')}") if cap else None
    message = hit.text(hit.family.message)
    maximum = hit.fields.get("max")
    if capability and maximum and capability > _major_minor(maximum):
        return Refined(f"{hit.fields.get('gpu', 'the GPU')} is compute capability {cap}, newer than the newest this "
                       f"torch build compiled kernels for ({maximum}): it runs through PTX compiled at first use",
                       "nothing to fix (the first steps are slower while kernels compile); a build with "
                       f"sm_{cap.replace('.', '')} kernels starts faster", Severity.WARNING)
    if capability is None:
        return Refined(message, hit.text(hit.family.fix))
    builds = runnable_builds(context, capability)
    if builds:
        return Refined(message, f"use {builds[0].words()}, the newest released build with kernels for "
                                f"compute capability {cap}; later builds dropped it")
    last = [(line, latest, cuda) for line, latest, cuda, archs in released_builds(context.compat)
            if arch_coverage(archs, capability).covered]
    if last:
        line, latest, cuda = max(last, key=lambda b: (parse_version(b[0]), (-b[2].major, -b[2].minor)))
        return Refined(message, f"the last release in envbuild's data with kernels for {cap} is torch {latest} with "
                                f"CUDA {cuda}; newer torch needs a newer GPU")
    return Refined(message, f"no torch build in envbuild's data supports compute capability {cap} (the oldest "
                            "supported there is 3.7): the GPU is too old for current PyTorch; build an old torch "
                            "from source or use the CPU")


@refines("explain.cuda.no-kernel-image")
def _no_kernel_image(hit: Hit, context: ExplainContext) -> Refined:
    message = hit.text(hit.family.message) + _host_gpu_words(context)
    if hit.cause is not None:
        # The kernel is an extension's (the log's traceback says whose): torch's targets cannot fix it.
        return Refined(f"{message}: {hit.text(hit.cause.why)}", hit.text(hit.cause.fix or hit.family.fix))
    message += _log_kernel_facts(context)
    named: list[tuple[str, str, tuple[int, int] | None]] = [
        (gpu.name, gpu.sm or "", gpu.capability) for gpu in context.gpus if gpu.capability]
    if not named:
        named = [(name, sm, capability) for name, sm, capability in context.machine.capabilities]
    for name, sm, capability in named[:1]:
        if capability is None:
            break
        targets = runnable_targets(context, capability)
        if targets:
            return Refined(message, f"use target {targets[0][0].key} (its build has {sm} kernels for {name})")
        chosen = kernel_build(context, capability, sm, name)
        if chosen:
            return Refined(message, chosen[1])
    return Refined(message, hit.text(hit.family.fix))


def _log_kernel_facts(context: ExplainContext) -> str:
    """What the log says the kernels were missing for: its GPU and, when the compatibility data knows the
    arch list of the log's torch build, that the list lacks the GPU."""
    facts = context.facts.facts
    gpu, sm = facts.get("gpu"), facts.get("sm")
    said = []
    if gpu is not None:
        said.append(f"the log's GPU is {gpu.value} (line {gpu.line})" + (f", {sm.value}" if sm else ""))
    elif sm is not None:
        said.append(f"the log's GPU is {sm.value} (line {sm.line})")
    archs = _log_torch_archs(context)
    capability = context.facts.capability
    if archs and capability and sm and not arch_coverage(archs, capability).covered:
        torch = facts["torch"]
        said.append(f"torch {torch.value} (line {torch.line}) has kernels for {' '.join(archs)}, not {sm.value}")
    return "".join(f"; {words}" for words in said)


def _log_torch_archs(context: ExplainContext) -> list[str]:
    """The arch list of the log's torch build (its release and CUDA) in the compatibility data; empty if unknown."""
    torch, cuda = context.facts.get("torch"), context.facts.cuda("torch_cuda")
    release = context.compat.release(torch) if torch else None
    if release is None or cuda is None:
        return []
    return release.archs.get(cuda, [])


@refines("explain.cuda.driver-too-old")
def _driver_too_old(hit: Hit, context: ExplainContext) -> Refined:
    found = hit.fields.get("found")
    if not found or not found.lstrip("-").isdigit():
        return Refined(hit.text(hit.family.message), hit.text(hit.family.fix))
    driver_cuda = CudaVersion(*driver_cuda_from_nvml(int(found)))
    cuda_text = str(driver_cuda)
    message = hit.text(hit.family.message.replace("{driver_cuda}", cuda_text))
    message = _with_facts(message, context, "torch", "driver")
    runnable = _runnable_on(driver_cuda, context)
    majors = sorted(int(major) for major in context.compat.minor_version_compat if int(major) > driver_cuda.major)
    newer = context.compat.min_driver(CudaVersion(majors[0], 0)) if majors else None
    update = f"update the NVIDIA driver (>= {newer} runs CUDA {majors[0]}.x builds)" if newer \
        else "update the NVIDIA driver"
    if runnable:
        return Refined(message, f"use a target this driver runs: {runnable}; or {update}")
    return Refined(message, f"no torch build in envbuild's data runs on a CUDA {cuda_text} driver: {update}")


def _runnable_on(driver_cuda: CudaVersion, context: ExplainContext) -> str:
    """The spec's targets (else released builds) a driver of this CUDA runs: fully first, then minor-version."""
    machine = Machine(driver_version=None, driver_cuda=driver_cuda, capabilities=context.machine.capabilities)
    if context.targets:
        words = []
        for target in context.targets:
            if target.cuda:
                how = driver_runs(machine, target.cuda, context.compat)
                if how:
                    words.append(target.key + (" (minor-version compatibility)" if how == "minor" else ""))
        return ", ".join(words)
    builds = [(line, latest, cuda, driver_runs(machine, cuda, context.compat))
              for line, latest, cuda, archs in released_builds(context.compat) if gpus_covered(machine, archs)]
    words = []
    for how, note in (("runs", ""), ("minor", " (minor-version compatibility: no PTX JIT)")):
        fitting = [(line, latest, cuda) for line, latest, cuda, said in builds if said == how]
        if fitting:
            line, latest, cuda = max(fitting, key=lambda b: (parse_version(b[0]), b[2]))
            words.append(f"torch {latest} with CUDA {cuda}{note}")
    return ", or ".join(words)


@refines("explain.cuda.driver-insufficient")
def _driver_insufficient(hit: Hit, context: ExplainContext) -> Refined:
    message = _with_facts(hit.text(hit.family.message), context, "torch", "toolkit")
    machine = context.machine
    if context.driver is not None and context.driver.cuda is None and context.driver.driver_version is None \
            and machine.driver_from != "from the log":
        return Refined(message + "; on this host no driver answered at all", hit.text(hit.family.fix))
    if machine.driver_cuda is not None or machine.driver_version is not None:
        whose = "the log's driver" if machine.driver_from == "from the log" else "this host's driver"
        said = f"{message}; {whose} supports CUDA {machine.driver_cuda}" \
            if machine.driver_cuda else f"{message}; {machine.driver_words()}"
        better = best_build_words(context)
        return Refined(said, f"use {better or 'a build this driver runs'}; or update the NVIDIA driver")
    return Refined(message, hit.text(hit.family.fix))


@refines("explain.cuda.forward-compat-unsupported")
def _forward_compat(hit: Hit, context: ExplainContext) -> Refined:
    message = hit.text(hit.family.message)
    machine = context.machine
    fix = hit.text(hit.family.fix)
    if machine.driver_version:
        message += f"; {machine.driver_words()}"
        if machine.driver_cuda and trusted_driver_cuda(machine, context.compat) is None:
            message += (f": nvidia-smi reports the compatibility package's CUDA {machine.driver_cuda}, "
                        "not the driver's own")
        better = best_build_words(context)
        if better:
            fix += f"; a build this driver runs without the compatibility package: {better}"
    return Refined(message, fix)


@refines("explain.cuda.ptx-toolchain")
def _ptx_toolchain(hit: Hit, context: ExplainContext) -> Refined:
    message = hit.text(hit.family.message)
    toolkit, machine = context.facts.cuda("toolkit"), context.machine
    said = []
    if toolkit:
        said.append(f"the log's nvcc is CUDA {toolkit}")
    if machine.knows_driver:
        said.append(machine.driver_words())
    if said:
        message += f" ({'; '.join(said)})"
    fix = hit.text(hit.family.fix)
    if toolkit and machine.knows_driver and driver_runs(machine, toolkit, context.compat) is None:
        fix = (f"{_update_driver_words(context, toolkit)} so it understands CUDA {toolkit} PTX, or build with a "
               f"CUDA toolkit the driver supports (<= {machine.driver_cuda})"
               if machine.driver_cuda else f"{_update_driver_words(context, toolkit)}; {fix}")
    return Refined(message, fix)


@refines("explain.nvcc.unsupported-arch")
def _nvcc_arch(hit: Hit, context: ExplainContext) -> Refined:
    arch = hit.fields.get("arch", "")
    first = NVCC_FIRST.get(arch)
    toolkit = context.facts.get("toolkit")
    message = hit.text(hit.family.message)
    if first:
        message += f"; compute_{arch} needs nvcc from CUDA {first} on" + (f", the log's nvcc is {toolkit}" if toolkit
                                                                            else "")
    fix = hit.text(hit.family.fix)
    if first:
        older = _older_arch(arch, toolkit)
        fix = (f"build with a CUDA toolkit >= {first} (point CUDA_HOME at it; for torch extensions the same major "
               f"as torch's CUDA), or leave compute_{arch} out: TORCH_CUDA_ARCH_LIST=\"{older}+PTX\" "
               "builds PTX that is compiled for this GPU when it first loads")
    return Refined(message, fix)


# Architectures of Jetson and other Tegra boards: never the one to build for a discrete GPU.
TEGRA_ARCHS = {"53", "62", "72", "87", "101", "110"}


def _older_arch(arch: str, toolkit: str | None) -> str:
    known = [a for a, first in NVCC_FIRST.items() if a not in TEGRA_ARCHS
             and (toolkit is None or parse_version(first) <= parse_version(toolkit))]
    below = [a for a in known if int(a) < int(arch or "0")]
    best = max(below, key=int) if below else "75"
    return f"{best[:-1]}.{best[-1]}"


@refines("explain.extension.cuda-mismatch")
def _extension_cuda_mismatch(hit: Hit, context: ExplainContext) -> Refined:
    message = hit.text(hit.family.message)
    found, torch_cuda = hit.fields.get("found"), hit.fields.get("torch_cuda")
    fix = hit.text(hit.family.fix)
    found_cuda = cuda_from_text(found) if found else None
    if found_cuda and torch_cuda and context.machine.knows_driver:
        how = driver_runs(context.machine, found_cuda, context.compat)
        if how is None:
            fix = (f"install a CUDA {torch_cuda} toolkit and point CUDA_HOME at it (`conda install -c nvidia "
                   f"cuda-nvcc={torch_cuda}` or NVIDIA's installer); a torch built for CUDA {found} would not run on "
                   f"{context.machine.driver_words()}")
    return Refined(message, fix)
