"""What NVML says about this host's GPUs (nvidia-ml-py); empty when there is no driver."""

from __future__ import annotations


def gpus_by_free_memory() -> list[dict]:
    """GPUs ranked by free memory, most first (the seeds' way to pick the idle cards)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            gpus.append({
                "index": index,
                "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
                "name": name.decode() if isinstance(name, bytes) else name,
                "free": int(memory.free), "total": int(memory.total),
            })
        return sorted(gpus, key=lambda g: g["free"], reverse=True)
    finally:
        pynvml.nvmlShutdown()
