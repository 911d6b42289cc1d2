#!/usr/bin/env bash
# The GPU paths that no machine of ours can run: run from the repository root on a machine with an NVIDIA GPU
# and a CUDA build of torch (a lent device, a GPU runner). Everything it saw lands in $OUT/results.tgz:
# nvidia-smi's outputs in every form doctor reads, the smoke suite's reports (full run, and one that asks for
# more GPUs than there are), doctor's view of the host, the real error messages of tests/gpu/real_errors.py,
# and the smoke unit tests run against real CUDA.
# builder's pure-Python needs that such a machine lacks travel as wheels in .whl/ (pydantic, docker).
set -u
: "${OUT:?set OUT to the folder the results go to}"
mkdir -p "$OUT"
work=$(mktemp -d)
mkdir -p "$work/nvidia-smi" "$work/errors"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/envbuild-site .whl/*.whl \
        && export PYTHONPATH="/tmp/envbuild-site:$PWD"
fi
step() {  # step NAME SECONDS COMMAND...: run bounded, keep output and exit code, time it
    local name=$1 limit=$2; shift 2
    local start=$SECONDS
    timeout "$limit" "$@" >"$work/$name.txt" 2>&1
    echo "$name: exit $? in $((SECONDS - start)) s" | tee -a "$work/steps.txt"
}

smi="$work/nvidia-smi"
nvidia-smi >"$smi/table.txt" 2>&1
nvidia-smi -q >"$smi/q.txt" 2>&1
nvidia-smi -q -x >"$smi/q.xml" 2>&1
nvidia-smi -L >"$smi/L.txt" 2>&1
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,memory.used,compute_cap,mig.mode.current \
    --format=csv >"$smi/query-csv.txt" 2>&1
nvidia-smi --query-gpu=index,name,compute_cap --format=csv,noheader,nounits >"$smi/query-noheader.txt" 2>&1
nvidia-smi mig -lgi >"$smi/mig-lgi.txt" 2>&1; echo "exit $?" >>"$smi/mig-lgi.txt"
nvidia-smi -i 7 -q >"$smi/bad-index.txt" 2>&1; echo "exit $?" >>"$smi/bad-index.txt"
nvidia-smi topo -m >"$smi/topo.txt" 2>&1
python3 -c 'import torch, sys; print(sys.version); print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(),
torch.cuda.nccl.version(), torch.cuda.get_arch_list(), torch.cuda.get_device_capability(0))' >"$work/torch.txt" 2>&1

# The real errors run beside the smoke suite (own ports, own processes), the unit tests after both.
python3 tests/gpu/real_errors.py "$work/errors" --jobs 6 >"$work/real-errors.txt" 2>&1 &
errors_pid=$!
step smoke-list 60 python3 -m smoke --list
step smoke-full 300 python3 -m smoke --json "$work/smoke.json" --junit "$work/smoke.xml" --require-gpus 1 \
    --expect-cuda "$(python3 -c 'import torch; print(torch.version.cuda)')" --require-compile
step smoke-two-gpus 120 python3 -m smoke --require-gpus 2 --only dp,visibility,ddp --no-collect-env \
    --json "$work/smoke-two-gpus.json"
step doctor 60 python3 -m builder doctor --json
step doctor-spec 60 python3 -m builder doctor envs/pytorch.yaml --json
step doctor-save 60 python3 -m builder doctor --save "$work/host.json"
wait "$errors_pid"; echo "real-errors: exit $?" >>"$work/steps.txt"
step pytest-smoke 240 python3 -m pytest -q -p no:cacheprovider -x tests/unit/smoke -m "unit or torch"
tar czf "$OUT/results.tgz" -C "$work" .
cp "$work/steps.txt" "$OUT/"
cat "$work/steps.txt" "$work/smoke-full.txt"
