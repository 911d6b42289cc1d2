"""DistributedDataParallel's pure logic: what each rank is told, what it must report, and what a
failure to start means. No torch here (the ranks' own work is smoke/ddp_rank.py).

The ranks start the way `torchrun --standalone --nproc-per-node 2` starts them: env:// rendezvous
(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) on a free loopback port.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from smoke.resources import SHM_FIX as CONTAINER_SHM_FIX

WORLD_SIZE = 2
DEADLINE_S = 60.0  # the whole check: both ranks started, done, reaped
# The ranks' own bound on rendezvous and collectives: inside the deadline, so a rank that cannot
# reach its peer says why before the parent has to kill it.
RANK_TIMEOUT_S = 40.0
MASTER_ADDR = "127.0.0.1"
BATCH = 16  # the whole batch; each rank trains on BATCH // WORLD_SIZE rows
FEATURES = 8
OUTPUTS = 4
# float32 sums of the same products in a different order (a shard's mean, then the average of two).
GRAD_RTOL = 1e-4
GRAD_ATOL = 1e-6


def rank_environment(rank: int, port: int, backend: str, world_size: int = WORLD_SIZE) -> dict[str, str]:
    """What torchrun sets for one local rank, plus the backend this check asks for."""
    return {
        "MASTER_ADDR": MASTER_ADDR,
        "MASTER_PORT": str(port),
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size),
        "GROUP_RANK": "0",
        "SMOKE_DDP_BACKEND": backend,
        "SMOKE_DDP_TIMEOUT_S": str(RANK_TIMEOUT_S),
    }


def all_reduce_input(rank: int) -> list[float]:
    """Rank r contributes [r + 1, 10 (r + 1)]: a sum that only comes out right if every rank took part."""
    return [float(rank + 1), 10.0 * (rank + 1)]


def expected_all_reduce(world_size: int = WORLD_SIZE) -> list[float]:
    total = sum(range(1, world_size + 1))
    return [float(total), 10.0 * total]


def judge_ranks(reports: Sequence[Mapping[str, Any]], world_size: int = WORLD_SIZE) -> list[str]:
    """Problems in what the ranks reported: the all-reduce sum, DDP's gradients against one process on
    the whole batch, and the parameters after the step (every rank must hold the same ones)."""
    problems: list[str] = []
    if len(reports) != world_size:
        return [f"{len(reports)} of {world_size} ranks reported"]
    expected = expected_all_reduce(world_size)
    for report in reports:
        rank = report.get("rank")
        if report.get("all_reduce") != expected:
            problems.append(f"rank {rank}: all_reduce(SUM) gave {report.get('all_reduce')}, not {expected}")
        if not report.get("grads_match"):
            problems.append(f"rank {rank}: DDP gradients differ from one process on the whole batch "
                            f"(max abs difference {report.get('grad_max_diff')})")
        if not report.get("params_match"):
            problems.append(f"rank {rank}: parameters after the DDP step differ from the single-process step "
                            f"(max abs difference {report.get('param_max_diff')})")
    checksums = {report.get("param_checksum") for report in reports}
    if len(checksums) > 1:
        problems.append(f"the ranks hold different parameters after the step (checksums {sorted(map(str, checksums))})")
    return problems


# --- why a backend would not start ----------------------------------------------------------------

SHM_FIX = CONTAINER_SHM_FIX + "; NCCL_SHM_DISABLE=1 avoids it at a speed cost"


@dataclass(frozen=True)
class Cause:
    key: str
    markers: tuple[str, ...]  # substrings of the errors torch.distributed, gloo and NCCL really raise
    cause: str
    fix: str


# Most specific first: one rank's root cause (a port in use) makes its peer time out as well, and
# the root cause is the one to name. The markers are the texts the libraries produce: c10d's
# socket.cpp (TCPStore), gloo's tcp transport, NCCL's shmutils.cc and torch's NCCLUtils.
CAUSES = (
    Cause("shm", ("Error while creating shared memory segment", "Error while attaching to shared memory segment",
                  "failed to extend /dev/shm", "failed to create shared memory file",
                  "Couldn't allocate shared memory segment", "insufficient shared memory"),
          "shared memory (/dev/shm) is too small or not writable for the backend's transport", SHM_FIX),
    Cause("port_in_use", ("EADDRINUSE", "address already in use"),
          "the rendezvous port {port} is already taken on this host (another job or a leftover rank listens there)",
          "use a free MASTER_PORT (torchrun --master-port N, or --standalone / --rdzv-endpoint localhost:0 "
          "to let it pick) or stop the process holding the port"),
    Cause("no_interface", ("Unable to find address for", "no socket interface found"),
          "the backend found no network interface to bind (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME names "
          "one that is not there, or the hostname resolves to no local address)",
          "on one node set GLOO_SOCKET_IFNAME=lo and NCCL_SOCKET_IFNAME=lo, or unset them, or make the "
          "hostname resolve to a local address (/etc/hosts)"),
    Cause("no_nccl", ("Distributed package doesn't have NCCL built in", "ProcessGroupNCCL is only supported with GPUs"),
          "this torch has no NCCL", "install a CUDA build of torch (its NCCL comes as the nvidia-nccl-cu* wheel or "
          "conda's nccl package)"),
    Cause("duplicate_gpu", ("Duplicate GPU detected",),
          "two ranks landed on one GPU", "give each rank its own GPU: torch.cuda.set_device(LOCAL_RANK), and "
          "as many visible GPUs as ranks"),
    Cause("loopback_unusable", ("Network is unreachable", "failed to connect to any network address"),
          "TCP to {addr} does not work in this environment (no usable loopback interface)",
          "bring the loopback interface up (`ip link set lo up`); a container always has one unless its "
          "network namespace was stripped"),
    Cause("refused", ("The client socket has timed out after", "Connection refused", "connection refused"),
          "no rendezvous answered at {addr}:{port}: rank 0's store never came up (see rank 0's error) or TCP to "
          "the loopback address is refused or dropped (a firewall or sandbox rule)",
          "allow TCP on the loopback interface (e.g. `iptables -I INPUT -i lo -j ACCEPT`); torchrun's env:// "
          "rendezvous needs it even on one node"),
    Cause("peer_gone", ("Connection closed by peer", "Connection reset by peer", "connection reset by peer",
                        "Failed to recv, got 0 bytes"),
          "a rank lost its peer: the other rank exited first", "see the other rank's error"),
    Cause("nccl_system", ("unhandled system error", "ncclSystemError"),
          "NCCL failed in a system call: most often /dev/shm too small or no usable network interface",
          SHM_FIX + "; NCCL_DEBUG=INFO shows which call failed"),
    Cause("nccl_cuda", ("unhandled cuda error", "ncclUnhandledCudaError"),
          "NCCL failed in a CUDA call (a GPU that cannot be shared between the ranks' processes, or a driver "
          "problem)", "check that every rank's GPU works on its own (gpu.matmul_per_device); NCCL_DEBUG=INFO "
          "names the call"),
)


@dataclass(frozen=True)
class Diagnosis:
    key: str
    cause: str
    fix: str
    evidence: str  # the error text the cause was read from

    def describe(self) -> str:
        return f"{self.cause}; fix: {self.fix}"


def diagnose(errors: Sequence[str], *, port: int, outputs: Sequence[str] = ()) -> Diagnosis | None:
    """The most specific cause in the ranks' own errors (exception texts), else in their output
    (NCCL's WARN lines, C++ logs); None when nothing known matches."""
    for texts in (errors, outputs):
        for cause in CAUSES:
            for text in texts:
                for marker in cause.markers:
                    if marker in text:
                        return Diagnosis(cause.key, cause.cause.format(port=port, addr=MASTER_ADDR), cause.fix,
                                         _around(text, marker))
    return None


def _around(text: str, marker: str, width: int = 300) -> str:
    flat = " ".join(text.split())
    at = flat.find(marker)
    start = max(0, at - width // 3)
    return flat[start:start + width]


def choose_backend(gpu_count: int, *, nccl: bool, gloo: bool) -> tuple[str | None, str]:
    """(backend, why): NCCL when each rank can have a GPU of its own, else gloo on the CPU."""
    if gpu_count >= WORLD_SIZE and nccl:
        return "nccl", f"NCCL, one GPU per rank (cuda:0..cuda:{WORLD_SIZE - 1})"
    if not gloo:
        return None, "this torch has no gloo backend"
    if gpu_count >= WORLD_SIZE:
        return "gloo", f"warning: {gpu_count} GPUs visible but this torch has no NCCL; gloo on the CPU instead"
    return "gloo", f"gloo on the CPU (NCCL needs a GPU per rank: {WORLD_SIZE}; {gpu_count} visible)"
