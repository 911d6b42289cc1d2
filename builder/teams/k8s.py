"""`envbuild ci k8s`: Kubernetes Jobs that smoke-test each CUDA target's pushed image on a cluster's GPUs.

For a team that outgrows CI runners: one Job per CUDA target and GPU class (`--gpu-product`, the
`nvidia.com/gpu.product` node label of NVIDIA's GPU feature discovery), each asking for
`nvidia.com/gpu` in its limits, with /dev/shm as a memory emptyDir (DataLoader workers need more than
the container default), no retries (backoffLimit 0: a flaky GPU must show, not pass on a second try),
a deadline, CPU and memory requests and limits (`builder/data/ci.yaml`, measured), and the image's own
non-root user. `kubectl apply -f FILE`, then `kubectl logs job/NAME`.

The smoke report outlives the pod in the one place every cluster keeps without setup: the container's
log. The suite writes its JSON report inside the container, and the command prints it between two
marker lines after the suite ends (pass or fail), so `kubectl logs job/NAME` plus the `sed` line in the
file's header gives the report back for as long as the Job is kept (ttlSecondsAfterFinished). The
alternatives fail on a plain cluster: an emptyDir dies with the pod, a PersistentVolumeClaim needs a
storage class and something to read it back, and the termination message holds only 4 KB.

The manifests are built as data and dumped as YAML, so no value can add a key; the defaults live in
`builder/data/ci.yaml` (`k8s:`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from builder.errors import UsageError
from builder.generated_files import write_new_file
from builder.image.smoke_run import REPORT_DIR, suite_args
from builder.specs.cuda import cuda_or_cpu
from builder.specs.model import EnvSpec
from builder.specs.reference import check_dns_label
from builder.specs.target import Target
from builder.templates import comment_text

# An image reference: name[:tag][@sha256:digest]; the registry part may carry a port.
IMAGE_REFERENCE = re.compile(
    r"[a-z0-9]+([._\-/:][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})?(@sha256:[0-9a-f]{64})?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([A-Za-z0-9_.\-]{0,61}[A-Za-z0-9])?)")
NAME_LIMIT = 63  # a Job's name becomes a pod label value
SMOKE_REPORT = REPORT_DIR  # where suite_args tells the suite to write report.json
REPORT_BEGIN = "----- envbuild smoke report (JSON) -----"
REPORT_END = "----- end of envbuild smoke report -----"
# The suite's exit status is the container's; the report is printed whatever it was.
SMOKE_COMMAND = (f'mkdir -p {SMOKE_REPORT}; python -m smoke "$@"; status=$?; echo "{REPORT_BEGIN}"; '
                 f'cat {SMOKE_REPORT}/report.json; echo; echo "{REPORT_END}"; exit $status')
# What a user runs to get the report back (the header of the written file says it).
REPORT_FROM_LOGS = f"kubectl logs job/NAME | sed -n '/^{REPORT_BEGIN}$/,/^{REPORT_END}$/{{//!p;}}' > report.json"


@dataclass(frozen=True)
class K8sOptions:
    """What the Jobs run: per target an image (`--image TARGET=REF`, best pinned by digest), else the
    target's tag under `--registry`; the GPU classes to test on; the GPUs each Job asks for."""

    images: tuple[tuple[str, str], ...] = ()
    registry: str | None = None
    gpu_products: tuple[str, ...] = ()
    require_gpus: int = 1
    namespace: str | None = None


@dataclass(frozen=True)
class SmokeJob:
    name: str
    target: str
    image: str
    gpu_product: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "target": self.target, "image": self.image, "gpu_product": self.gpu_product}


@dataclass(frozen=True)
class Manifests:
    path: Path
    text: str
    jobs: tuple[SmokeJob, ...]
    notes: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"provider": "k8s", "path": str(self.path), "jobs": [job.as_dict() for job in self.jobs],
                "notes": list(self.notes)}


def parse_images(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """`cuda12.6=registry/team/pytorch@sha256:...` (repeatable) -> ((target, reference), ...)."""
    pairs = []
    for value in values:
        target, sep, reference = value.partition("=")
        if not sep or not target or not IMAGE_REFERENCE.fullmatch(reference):
            raise UsageError(f"--image {value!r}: write TARGET=IMAGE, e.g. cuda12.6=registry.example.org/team/"
                             "pytorch@sha256:<digest>")
        pairs.append((target, reference))
    return tuple(pairs)


def job_name(env_name: str, target: str, product: str | None) -> str:
    """A DNS-1123 label naming the env, the target and the GPU class; shortened with a hash when long."""
    words = ["envbuild-smoke", env_name, target, *([product] if product else [])]
    name = re.sub(r"[^a-z0-9]+", "-", "-".join(words).lower()).strip("-")
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:NAME_LIMIT - 9].rstrip('-')}-{digest}"


def _images(targets: list[Target], options: K8sOptions) -> tuple[dict[str, str], list[str]]:
    keys = {t.key for t in targets}
    given = dict(options.images)
    unknown = sorted(set(given) - keys)
    if unknown:
        raise UsageError(f"--image {unknown[0]}: no such CUDA target in the spec; "
                         f"use one of: {', '.join(sorted(keys))}")
    if options.registry is not None and not IMAGE_REFERENCE.fullmatch(options.registry):
        raise UsageError(f"--registry {options.registry!r}: write a registry and path, e.g. registry.example.org/team")
    images: dict[str, str] = {}
    notes: list[str] = []
    for target in targets:
        if target.key in given:
            images[target.key] = given[target.key]
        elif options.registry:
            images[target.key] = f"{options.registry.rstrip('/')}/{target.tag}"
        else:
            raise UsageError(f"no image for target {target.key}: give --registry (where the build jobs push) or "
                             f"--image {target.key}=REF")
        if "@sha256:" not in images[target.key]:
            notes.append(f"{target.key}: {images[target.key]} is a tag, which can move; pin the pushed digest "
                         f"with --image {target.key}=REF@sha256:...")
    return images, notes


def job_manifest(spec: EnvSpec, target: Target, image: str, product: str | None, options: K8sOptions,
                 settings: dict[str, Any]) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "envbuild-smoke", "app.kubernetes.io/part-of": "envbuild",
              "envbuild.io/env": _label_value(spec.name), "envbuild.io/target": _label_value(target.key),
              **({"envbuild.io/gpu-product": product} if product else {})}
    metadata: dict[str, Any] = {"name": job_name(spec.name, target.key, product), "labels": labels}
    if options.namespace:
        metadata["namespace"] = options.namespace
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "securityContext": {
            # The image's own user (the spec's `user:`), so the suite runs as it would on a workstation.
            "runAsNonRoot": True, "runAsUser": spec.user.uid, "runAsGroup": spec.user.uid,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{
            "name": "smoke",
            "image": image,
            "imagePullPolicy": "IfNotPresent" if "@sha256:" in image else "Always",
            "command": ["sh", "-c", SMOKE_COMMAND, "smoke",
                        *suite_args(options.require_gpus, target.torch, cuda_or_cpu(target.cuda), None)],
            "resources": _resources(settings["resources"], options.require_gpus),
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        }],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": settings["shm_size"]}}],
    }
    if product:
        pod_spec["nodeSelector"] = {settings["gpu_product_label"]: product}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": settings["active_deadline_seconds"],
            "ttlSecondsAfterFinished": settings["ttl_seconds_after_finished"],
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
        },
    }


def _resources(resources: dict[str, dict[str, str]], gpus: int) -> dict[str, dict[str, Any]]:
    """CPU and memory as measured for the suite (ci.yaml); GPUs only as a limit, which Kubernetes also
    takes as the request for an extended resource."""
    return {"requests": dict(resources["requests"]),
            "limits": {**resources["limits"], "nvidia.com/gpu": gpus}}


def _label_value(text: str) -> str:
    value = re.sub(r"[^A-Za-z0-9_.\-]+", "-", text)[:NAME_LIMIT].strip("-_.")
    return value if LABEL_VALUE.fullmatch(value) else "x"


def manifests_text(spec: EnvSpec, spec_file: str, targets: list[Target], options: K8sOptions,
                   settings: dict[str, Any]) -> tuple[str, tuple[SmokeJob, ...], tuple[str, ...]]:
    check_dns_label("--namespace", options.namespace)
    cuda_targets = [t for t in targets if t.cuda]
    if not cuda_targets:
        raise UsageError(f"{spec.name}: no CUDA target, so nothing to smoke-test on GPUs")
    for given in options.gpu_products:
        if not LABEL_VALUE.fullmatch(given):
            raise UsageError(f"--gpu-product {given!r}: a node label value is letters, digits and . _ - "
                             "(at most 63), e.g. NVIDIA-A100-SXM4-80GB")
    images, notes = _images(cuda_targets, options)
    documents: list[dict[str, Any]] = []
    jobs: list[SmokeJob] = []
    products: tuple[str | None, ...] = options.gpu_products or (None,)
    for target in cuda_targets:
        for product in products:
            manifest = job_manifest(spec, target, images[target.key], product, options, settings)
            documents.append(manifest)
            jobs.append(SmokeJob(manifest["metadata"]["name"], target.key, images[target.key], product))
    if not options.gpu_products:
        notes.append("no --gpu-product: each Job runs on any GPU node; give the GPU classes to test each one")
    names = [job.name for job in jobs]
    if len(set(names)) != len(names):
        raise UsageError("two Jobs would have the same name: give GPU products that differ in letters or digits")
    header = (f"# Generated by envbuild (`envbuild ci k8s {comment_text(spec_file)}`): one smoke-test Job per CUDA "
              "target and GPU class.\n# Run: kubectl apply -f THIS_FILE; kubectl wait --for=condition=complete "
              "--timeout=30m job -l app.kubernetes.io/name=envbuild-smoke; kubectl logs job/NAME\n"
              f"# The JSON report, from the log (kept as long as the Job): {REPORT_FROM_LOGS}\n"
              "# Delete finished Jobs before applying again (a Job's pod template cannot change).\n")
    body = yaml.safe_dump_all(documents, sort_keys=False, explicit_start=True, default_flow_style=False)
    return header + body, tuple(jobs), tuple(notes)


def write_manifests(spec: EnvSpec, spec_file: str, targets: list[Target], path: Path, options: K8sOptions,
                    settings: dict[str, Any], force: bool = False) -> Manifests:
    text, jobs, notes = manifests_text(spec, spec_file, targets, options, settings)
    write_new_file(path, text, force=force)
    return Manifests(path, text, jobs, notes)
