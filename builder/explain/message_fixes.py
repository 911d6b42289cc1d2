"""Refiners that read more out of the message itself: the sizes of an out-of-memory, the requirement pip
did not find, which side of a state_dict has the `module.` prefix, the signal a child died of."""

from __future__ import annotations

import re

from builder.errors import UsageError
from builder.explain.context import ExplainContext
from builder.explain.matching import Hit
from builder.explain.refining import Refined, refines
from builder.specs.cuda import CudaVersion
from builder.specs.target import default_pip_index

# NCCL's own words for the usual causes live in the data (explain.nccl.error's causes).

_SIZE = re.compile(r"([\d.]+) ?([GMK])i?B")


def _bytes(size: str | None) -> float | None:
    found = _SIZE.fullmatch(size or "")
    if not found:
        return 0.0 if size == "0 bytes" else None
    return float(found.group(1)) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[found.group(2)]


@refines("explain.cuda.out-of-memory")
def _out_of_memory(hit: Hit, context: ExplainContext) -> Refined:
    wanted, total, free = (hit.fields.get(key) for key in ("wanted", "total", "free"))
    parts = [f"asked for {wanted}" if wanted else None, f"total {total}" if total else None,
             f"free {free}" if free else None]
    said = "; ".join(part for part in parts if part)
    message = "the GPU ran out of memory" + (f" ({said})" if said else "")
    wanted_bytes, total_bytes, free_bytes = _bytes(wanted), _bytes(total), _bytes(free)
    if wanted_bytes is not None and total_bytes and wanted_bytes > total_bytes:
        return Refined(f"{message}: one allocation is larger than the whole GPU",
                       "the batch, resolution or sequence length is far too big for this GPU: reduce it (gradient "
                       "accumulation keeps the effective batch) or move to a GPU with more memory; no allocator "
                       "setting helps here")
    if wanted_bytes and free_bytes and free_bytes > wanted_bytes:
        message += ": more is free than was asked for, but not in one piece (fragmentation), or another process " \
                   "took it meanwhile"
    holders = sorted((p for p in context.processes if p.memory_mib), key=lambda p: -(p.memory_mib or 0))
    if holders:
        listed = ", ".join(f"pid {p.pid} {p.name or '?'} {p.memory_mib} MiB" for p in holders[:3])
        message += f"; on this host now: {listed}"
    return Refined(message, hit.text(hit.family.fix))


@refines("explain.conda.cuda-virtual-package")
def _cuda_virtual_package(hit: Hit, context: ExplainContext) -> Refined:
    needed, host = hit.fields.get("needed"), hit.fields.get("host")
    said = [f"the packages need __cuda {needed}" if needed else None,
            f"the solving machine says __cuda {host}" if host else None]
    detail = "; ".join(part for part in said if part)
    message = ("the solver's __cuda virtual package (the CUDA of this machine's driver, or CONDA_OVERRIDE_CUDA) "
               "does not fit the CUDA packages asked for" + (f" ({detail})" if detail else ""))
    return Refined(message, hit.text(hit.family.fix))


@refines("explain.system.glibc-too-old")
def _glibc_too_old(hit: Hit, context: ExplainContext) -> Refined:
    needed = hit.fields.get("needed", "?")
    library = hit.fields.get("library")
    message = f"a binary needs glibc >= {needed}" + (f" ({library})" if library else "") + \
        ", newer than the glibc of this system"
    return Refined(message, hit.text(hit.family.fix))


def _requirement_cuda(requirement: str) -> CudaVersion | None:
    """The CUDA a requirement's local version names (`torch==2.1.0+cu118` -> 11.8), or None."""
    local = requirement.partition("+")[2].split(maxsplit=1)
    if not local:
        return None
    try:
        return CudaVersion.from_wheel_local(local[0])
    except UsageError:
        return None


@refines("explain.pip.cuda-wheel-index")
def _pip_index(hit: Hit, context: ExplainContext) -> Refined:
    requirement = hit.fields.get("req", "torch")
    cuda = _requirement_cuda(requirement)
    version = re.search(r"==([\d.]+)", requirement)
    offered = re.search(r"from versions:? ([^)\n]*)", context.text)
    if version and offered and version.group(1) not in re.split(r"[,\s]+", offered.group(1)):
        python = context.facts.get("python")
        python_said = f" ({python})" if python else ""
        return Refined(f"pip found no {requirement}: the index offers no torch {version.group(1)} for this Python"
                       f"{python_said} and platform at all (only: {offered.group(1).strip()[:80]})",
                       "torch wheels exist only for the Python versions of their release: use a Python that torch "
                       f"{version.group(1)} supports, or a newer torch; envbuild checks the spec's Python against its "
                       "compatibility data (`envbuild targets SPEC`)")
    if cuda is not None:
        tag = cuda.tag
        index = default_pip_index().format(tag=tag)
        return Refined(f"pip found no {requirement}: +{tag} builds are not on the Python package index",
                       f"install it from the PyTorch wheel index: `pip install {requirement.split('+')[0]} --index-url "
                       f"{index}`; envbuild's pip route picks that index for each target")
    return Refined(hit.text(hit.family.message), "check the Python version and the index; envbuild's pip route picks "
                                                 "the index for each target")


@refines("explain.checkpoint.module-prefix")
def _module_prefix(hit: Hit, context: ExplainContext) -> Refined:
    text = context.text
    checkpoint_prefixed = re.search(r'(?i)unexpected keys?(?:\(s\))? in state_dict: ?[\'"]module\.', text) or \
        re.search(r'unexpected key "module\.', text)
    if checkpoint_prefixed:
        return Refined("the checkpoint was saved from nn.DataParallel / DistributedDataParallel (its keys start with "
                       "`module.`), the model loading it is not wrapped",
                       "strip the prefix: `torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state_dict, "
                       "\"module.\")` before `model.load_state_dict(state_dict)`; when saving a wrapped model save "
                       "`model.module.state_dict()`")
    return Refined("the model is wrapped in nn.DataParallel / DistributedDataParallel (it expects `module.` keys), "
                   "the checkpoint was saved from a plain model",
                   "load into the inner model: `model.module.load_state_dict(state_dict)` (or load before wrapping); "
                   "`torch.nn.modules.utils.consume_prefix_in_state_dict_if_present` strips a prefix the other way")


@refines("explain.xformers.built-for-other-torch")
def _xformers(hit: Hit, context: ExplainContext) -> Refined:
    built, have = hit.fields.get("built", "?"), hit.fields.get("have", "?")
    if have.endswith("+cpu"):
        return Refined(f"xFormers was built for torch {built}, and this environment has a CPU-only torch ({have})",
                       "install a CUDA build of torch (the +cuXYZ wheel from the PyTorch index, or a spec target with "
                       "`cuda: X.Y`), then the xformers built for it")
    return Refined(hit.text(hit.family.message), hit.text(hit.family.fix))


@refines("explain.distributed.child-failed")
def _child_failed(hit: Hit, context: ExplainContext) -> Refined:
    exitcode = hit.fields.get("exitcode", "")
    meanings = {
        "-9": ("the child was killed with SIGKILL, which is what the Linux out-of-memory killer sends: host RAM "
               "(not GPU memory) ran out, often while loading a checkpoint on every rank at once",
               "check `dmesg | grep -i -e killed -e oom` on the host; load with less host memory (fewer ranks "
               "loading at once, low_cpu_mem_usage=True, mmap=True in torch.load, fewer DataLoader workers) or "
               "raise the memory limit of the machine or container"),
        "-7": ("the child died of SIGBUS, usually shared memory (/dev/shm) running out",
               "give the container more shared memory (`--shm-size 8g` or `--ipc=host`), or fewer DataLoader workers"),
        "-11": ("the child crashed with SIGSEGV, inside native code (an extension built for another torch, a "
                "driver or library mismatch)", "rerun one rank alone with `python -X faulthandler` to see where"),
        "-6": ("the child aborted (SIGABRT), often NCCL's watchdog ending a process after a timeout or error",
               "read the rank's own log above for the NCCL or CUDA error that came first"),
    }
    if exitcode in meanings:
        why, fix = meanings[exitcode]
        return Refined(f"{hit.text(hit.family.message)}: {why}", fix)
    return Refined(hit.text(hit.family.message), hit.text(hit.family.fix))
