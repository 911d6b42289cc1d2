"""pip's grammar for requirements files and buildkit's for Dockerfiles, on the forms issue 22 met in the wild."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.errors import UsageError
from builder.init.base_images import image_torch
from builder.init.choose import draft_from_environment
from builder.init.dockerfile import read_dockerfile_text
from builder.init.dockerfile_vars import BuildVariables
from builder.init.facts import file_facts
from builder.init.read_requirements import read_requirements, read_requirements_text
from builder.init.requirements_file import parse_requirements_text
from builder.lint.rules import lint_reading

pytestmark = pytest.mark.unit

SEVERAL_ON_ONE_LINE = ("torch==2.0.1+cu118 torchvision==0.15.2+cu118 "
                       "--extra-index-url https://download.pytorch.org/whl/cu118\n")


def test_several_requirements_and_an_index_on_one_line_are_read_and_linted_as_pip_rejects_them() -> None:
    reading = read_requirements_text(SEVERAL_ON_ONE_LINE, "requirements.txt")
    assert file_facts(reading).as_dict() == {"torch": "2.0.1", "torch_from": "pip", "cuda": "11.8",
                                             "platform": "linux-64"}
    assert reading.pip_torchvision is not None
    findings = {f.rule: f for f in lint_reading(reading)}
    rejected = findings["lint.pip.line-pip-rejects"]
    assert rejected.severity.value == "error" and "2 requirements on one line" in rejected.message
    assert "lint.pip.ignored-line-option" not in findings  # the rejection's fix already moves the option


@pytest.mark.parametrize("text, requirements, options, ignored, rejected", [
    ("numpy>=1.2 ; python_version >= '3.8' \\\n    --hash=sha256:ab\n", ["numpy>=1.2 ; python_version >= '3.8'"],
     [], [], None),
    ("-e git+https://github.com/x/y.git#egg=y\n", [], ["-e git+https://github.com/x/y.git#egg=y"], [], None),
    ("--extra-index-url https://download.pytorch.org/whl/cu121 # cuda\n", [],
     ["--extra-index-url https://download.pytorch.org/whl/cu121"], [], None),
    ("torch==2.1.2 -i https://download.pytorch.org/whl/cu118\n", ["torch==2.1.2"], [],
     ["--index-url https://download.pytorch.org/whl/cu118"], None),
    ("--no-such-option\n", [], [], [], "no such option: --no-such-option"),
    ("torch=2.1\n", ["torch=2.1"], [], [], "Invalid requirement"),
])
def test_pip_grammar_splits_requirements_options_and_refusals(text: str, requirements: list[str],
                                                               options: list[str], ignored: list[str],
                                                               rejected: str | None) -> None:
    [line] = parse_requirements_text(text)
    assert (list(line.requirements), list(line.options), list(line.ignored)) == (requirements, options, ignored)
    assert (rejected is None and line.rejected is None) or (rejected and rejected in (line.rejected or ""))


def test_an_included_requirements_file_is_read_in_place(tmp_path: Path) -> None:
    (tmp_path / "base.txt").write_text("--extra-index-url https://download.pytorch.org/whl/cu121\n"
                                       "torch==2.4.1\n", encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("-r base.txt\neinops==0.8.0\n-r missing.txt\n", encoding="utf-8")
    reading = read_requirements(tmp_path / "requirements.txt")
    assert file_facts(reading).torch == "2.4.1" and file_facts(reading).cuda == "12.1"
    assert any(n.entry == "-r missing.txt" and n.outcome == "unmapped" for n in reading.notes)


def test_a_requirements_file_that_includes_itself_stops(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("-r requirements.txt\ntorch==2.4.1\n", encoding="utf-8")
    reading = read_requirements(tmp_path / "requirements.txt")
    assert reading.pip_names.count("torch") == 1
    assert any(n.entry == "-r requirements.txt" and n.outcome == "unmapped" for n in reading.notes)


def test_an_arg_pinned_torch_in_a_dockerfile_is_read() -> None:
    text = ("ARG PYTORCH='2.6.0'\nARG CUDA=cu124\nFROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04\n"
            "ARG PYTORCH\nARG CUDA\nENV INDEX=https://download.pytorch.org/whl/${CUDA}\n"
            "RUN pip install torch==${PYTORCH} --index-url $INDEX\n")
    reading = read_dockerfile_text(text, "Dockerfile")
    assert file_facts(reading).as_dict() == {"torch": "2.6.0", "torch_from": "pip", "cuda": "12.4",
                                             "platform": "linux-64"}
    draft = draft_from_environment(reading, "probe")
    assert (draft.data["torch"], draft.data["targets"]) == ("2.6.0", [{"cuda": "12.4"}])


def test_a_stage_sees_a_global_arg_only_when_it_declares_it_again() -> None:
    text = "ARG TORCH=2.5.1\nFROM python:3.11\nRUN pip install torch==${TORCH}\n"
    reading = read_dockerfile_text(text, "Dockerfile")
    assert reading.pip_torch is None  # buildkit leaves ${TORCH} unset in the stage: not read as a version


@pytest.mark.parametrize("text, expanded", [
    ("${A:-x}", "1"), ("${UNSET:-x}", "x"), ("${EMPTY:-x}", "x"), ("${EMPTY-x}", ""), ("${A:+y}", "y"),
    ("${UNSET+y}", ""), ("$A/$B", "1/two words"), ("$UNSET", "$UNSET"),
])
def test_buildkit_substitution_forms(text: str, expanded: str) -> None:
    variables = BuildVariables()
    variables.start_stage()
    variables.declare_args(("A=1", "EMPTY="))
    variables.set_env(("B", '"two words"'))
    assert variables.expand(text) == expanded


@pytest.mark.parametrize("image, torch, cuda", [
    ("pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime", "2.3.1", "12.1"),
    ("nvcr.io/nvidia/pytorch:25.12-py3", "2.10.0", "13.1"),  # its 2.10.0a0 build, read as its release
])
def test_a_base_image_that_states_its_torch_is_read_as_its_source(image: str, torch: str, cuda: str) -> None:
    facts = file_facts(read_dockerfile_text(f"FROM {image}\nRUN pip install einops\n", "Dockerfile"))
    assert (facts.torch, facts.torch_from, facts.cuda) == (torch, "base-image", cuda)


def test_an_ngc_release_missing_from_the_table_is_refused_by_name() -> None:
    image = "nvcr.io/nvidia/pytorch:23.06-py3"
    reading = read_dockerfile_text(f"FROM {image}\nRUN pip install einops\n", "Dockerfile")
    assert (file_facts(reading).torch, file_facts(reading).torch_from) == ("", "base-image")
    with pytest.raises(UsageError, match=f"torch comes from the base image {image} .*not in envbuild's NGC table"):
        draft_from_environment(reading, "probe")


@pytest.mark.parametrize("image", ["huggingface/transformers-pytorch-gpu", "pytorch/pytorch:latest",
                                   "rocm/pytorch:latest"])
def test_a_base_image_whose_tag_states_no_torch_gives_an_assumed_unpinned_torch(image: str) -> None:
    reading = read_dockerfile_text(f"FROM {image}\nRUN pip install einops\n", "Dockerfile")
    assert (file_facts(reading).torch, file_facts(reading).torch_from) == ("", "base-image")
    draft = draft_from_environment(reading, "probe")
    assert any(n.entry == f"FROM {image}" and n.outcome == "assumed" and "moves with the image" in n.reason
               for n in draft.notes)


@pytest.mark.parametrize("image, torch, cuda, python, rocm", [
    ("rocm/pytorch:rocm7.2_ubuntu24.04_py3.12_pytorch_release_2.7.1", "2.7.1", None, "3.12", "7.2"),
    ("cnstark/pytorch:2.0.1-py3.9.17-cuda11.8.0-ubuntu20.04", "2.0.1", "11.8", "3.9", None),
    ("runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04", "2.4.0", "12.4", "3.11", None),
])
def test_a_third_party_torch_image_is_read_from_its_tag_tokens(image: str, torch: str, cuda: str | None,
                                                               python: str, rocm: str | None) -> None:
    found = image_torch(image)
    assert found is not None
    assert (found.torch, found.cuda, found.python, found.rocm) == (torch, cuda, python, rocm)


def test_the_python_of_the_stage_that_runs_is_read_from_what_it_installs() -> None:
    text = ("FROM nvidia/cuda:11.8.0-devel-ubuntu22.04 AS build\nRUN apt-get install -y python3.9\n"
            "FROM nvidia/cuda:11.8.0-runtime-ubuntu22.04\nRUN apt-get update && apt-get install -y python3.10 "
            "python3-pip\nRUN pip install torch==2.1.2 --index-url https://download.pytorch.org/whl/cu118\n")
    assert draft_from_environment(read_dockerfile_text(text, "Dockerfile"), "probe").data["python"] == "3.10"
    linked = "FROM ubuntu:22.04\nRUN ln -sf /usr/bin/python3.8 /usr/bin/python3 && TORCH=1 pip3 install torch==2.1.2\n"
    reading = read_dockerfile_text(linked, "Dockerfile")
    assert (reading.python.version if reading.python else None, file_facts(reading).torch) == ("3.8", "2.1.2")


def test_a_later_stage_runs_on_the_image_of_the_stage_it_names() -> None:
    text = "FROM nvcr.io/nvidia/pytorch:25.03-py3 AS base\nFROM base AS dev\nRUN pip install einops\n"
    facts = file_facts(read_dockerfile_text(text, "Dockerfile"))
    assert (facts.torch, facts.torch_from, facts.cuda) == ("2.7.0", "base-image", "12.8")


def test_a_requirements_file_the_build_context_holds_is_read_where_the_dockerfile_installs_it(
        tmp_path: Path) -> None:
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "gpu.txt").write_text("torch==2.4.1\neinops\n", encoding="utf-8")
    (tmp_path / "outside.txt").write_text("torch==2.1.0\n", encoding="utf-8")
    text = ("FROM python:3.11-slim\nWORKDIR /app\nCOPY . .\n"
            "RUN pip install -r requirements/gpu.txt --index-url https://download.pytorch.org/whl/cu121\n")
    reading = read_dockerfile_text(text, str(tmp_path / "Dockerfile"), context=tmp_path)
    assert (file_facts(reading).torch, file_facts(reading).cuda, reading.pip) == ("2.4.1", "12.1", ["einops"])
    assert reading.python is not None and reading.python.version == "3.11"
    escaping = read_dockerfile_text("FROM python:3.11\nRUN pip install -r ../outside.txt\n",
                                    str(tmp_path / "sub" / "Dockerfile"), context=tmp_path / "sub")
    assert file_facts(escaping).torch is None  # a file outside the build context is not read


def test_an_installer_is_found_whatever_runs_it() -> None:
    for run in ("${PY} -m pip install torch==2.4.1", "micromamba run -n env pip install torch==2.4.1",
                "uv pip install --system torch==2.4.1", "TCNN=1 sudo -H pip3 install torch==2.4.1",
                "bash -c \"cd /x && pip install torch==2.4.1\""):
        assert file_facts(read_dockerfile_text(f"FROM ubuntu:22.04\nRUN {run}\n", "Dockerfile")).torch == "2.4.1", run


def test_a_wheel_file_is_read_by_its_name() -> None:
    url = ("https://example.org/whl/torch-2.1.0a0+41361538.nv23.06-cp38-cp38-linux_aarch64.whl "
           "https://example.org/whl/onnxruntime_gpu-1.18.0-cp38-cp38-linux_aarch64.whl")
    reading = read_dockerfile_text(f"FROM ubuntu:20.04\nRUN pip install {url}\n", "Dockerfile")
    assert file_facts(reading).torch == "2.1.0"
    assert reading.python is not None and reading.python.version == "3.8"
    assert any(n.outcome == "unmapped" and "onnxruntime-gpu 1.18.0" in n.reason for n in reading.notes)


def test_from_platform_flag_keeps_the_platform() -> None:
    text = "FROM --platform=linux/arm64 pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime\n"
    assert file_facts(read_dockerfile_text(text, "Dockerfile")).platform == "linux-aarch64"


def test_exec_form_and_heredoc_runs_are_read() -> None:
    exec_form = 'FROM python:3.11\nRUN ["pip", "install", "torch==2.4.1+cu121"]\n'
    heredoc = "FROM python:3.11\nRUN <<EOF\npip install torch==2.4.1+cu121\nEOF\n"
    for text in (exec_form, heredoc):
        assert file_facts(read_dockerfile_text(text, "Dockerfile")).as_dict()["torch"] == "2.4.1"


@pytest.mark.parametrize("name, text, platform", [
    ("environment_arch-aarch64.yaml", "dependencies: [pytorch=2.5.1, cuda-version=12.4]\n", "linux-aarch64"),
    ("environment.yml", "dependencies: [pytorch=2.5.1, cuda-version=12.4, gcc_linux-aarch64]\n", "linux-aarch64"),
    ("environment.yml", "dependencies:\n- pytorch=2.5.1\n- cuda-version=12.4  # [linux and aarch64]\n",
     "linux-aarch64"),
    ("environment.yml", "dependencies:\n- pytorch=2.5.1  # [linux]\n- cuda-version=12.4  # [not aarch64]\n",
     "linux-64"),
    ("environment.yml", "platforms: [linux-64]\ndependencies: [pytorch=2.5.1, gcc_linux-aarch64]\n", "linux-64"),
    ("conda-list.txt", "# platform: osx-arm64\npytorch=2.5.1=cpu_generic_py311h0\nnumpy=2.1.0=py311h0\n",
     "osx-arm64"),
])
def test_the_platform_a_file_names_is_kept(tmp_path: Path, name: str, text: str, platform: str) -> None:
    from builder.init.read import read_source

    (tmp_path / name).write_text(text, encoding="utf-8")
    assert file_facts(read_source(tmp_path / name)).platform == platform


def _locked(name: str, version: str, build: str) -> dict[str, str]:
    return {"name": name, "version": version, "manager": "conda", "platform": "linux-64",
            "url": f"https://conda.anaconda.org/conda-forge/linux-64/{name}-{version}-{build}.conda"}


def test_a_consistent_conda_forge_lock_reads_as_the_cuda_of_its_cuda_version() -> None:
    from builder.init.read import read_conda_lock_data

    lock = {"version": 1, "metadata": {"platforms": ["linux-64"], "channels": [{"url": "conda-forge"}]},
            "package": [_locked("pytorch", "2.5.1", "cuda120_py311h5f4b2a8_303"),
                        _locked("cuda-version", "12.6", "h7480c83_3"), _locked("python", "3.11.10", "h0")]}
    reading = read_conda_lock_data(lock, "conda-lock.yml")
    assert file_facts(reading).cuda == "12.6"
    draft = draft_from_environment(reading, "probe")
    assert draft.data["route"] == "conda-forge"
    below = {**lock, "package": [*lock["package"][:1], _locked("cuda-version", "11.8", "h0"), lock["package"][2]]}
    with pytest.raises(UsageError, match="conflicting CUDA hints"):
        draft_from_environment(read_conda_lock_data(below, "conda-lock.yml"), "probe")


@pytest.mark.parametrize("text, cuda", [
    ("cupy-cuda11x>=12.2.0", "11"), ("cupy-cuda111", "11.1"), ("jax[cuda12_pip]==0.4.23", "12"),
    ("jaxlib==0.4.23+cuda12.cudnn89", "12"), ("onnxruntime-gpu==1.16.1", "11.8"), ("onnxruntime-gpu==1.20.0", "12"),
    ("xformers==0.0.22.post4+cu118", "11.8"), ("torch-scatter==2.1.2+pt21cu118", "11.8"),
    ("tensorrt_cu12_libs==10.6.0", "12"), ("bitsandbytes==0.43.1", None), ("onnxruntime-gpu>=1.16", None),
])
def test_the_cuda_a_package_is_built_for(text: str, cuda: str | None) -> None:
    from builder.init.cuda_bound import cuda_bound

    bound = cuda_bound(text)
    assert (bound.cuda if bound else None) == cuda


@pytest.mark.parametrize("text, flagged", [
    ("torch==2.4.1+cu121\ncupy-cuda11x==13.0.0\nonnxruntime-gpu==1.16.1\n", True),
    ("torch==2.4.1+cu121\ncupy-cuda12x==13.0.0\njax[cuda12]\n", False),
    ("torch==2.2.0+cpu\ncupy-cuda11x==13.0.0\n", False),  # a CPU torch brings no CUDA to clash with
    ("torch>=2.1.0\ncupy-cuda11x>=12.2.0\n", True),  # the target init would pick is CUDA 12 or newer
])
def test_lint_names_packages_built_for_another_cuda_major_in_one_finding(text: str, flagged: bool) -> None:
    findings = [f for f in lint_reading(read_requirements_text(text, "requirements.txt"))
                if f.rule == "lint.cuda.package-cuda-mismatch"]
    assert len(findings) == int(flagged)
    if flagged:
        assert "cupy-cuda11x" in findings[0].message and "cupy-cuda11x" in findings[0].fix


def test_a_package_built_from_a_git_clone_is_named_by_its_repository() -> None:
    text = ("FROM pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime\n"
            "RUN git clone https://github.com/NVIDIA/apex && cd apex && pip install -v --no-build-isolation ./\n"
            "RUN git clone -b main https://github.com/org/Thing.git src && cd ./src && BUILD=1 pip install .\n")
    notes = [(n.entry, n.outcome) for n in read_dockerfile_text(text, "Dockerfile").notes]
    assert ("pip install ./ (in the clone of https://github.com/NVIDIA/apex)", "unmapped") in notes
    assert ("pip install . (in the clone of https://github.com/org/Thing.git)", "unmapped") in notes


def test_a_conda_torch_pinned_with_double_equals_is_that_version() -> None:
    text = "FROM ubuntu:22.04\nRUN conda install -y pytorch==2.1.2 pytorch-cuda=12.1 -c pytorch -c nvidia\n"
    assert file_facts(read_dockerfile_text(text, "Dockerfile")).torch == "2.1.2"


def test_an_open_torch_next_to_a_pinned_torchvision_is_the_torch_it_pairs_with() -> None:
    draft = draft_from_environment(read_requirements_text("torch\ntorchvision==0.20.0\n", "requirements.txt"),
                                   "probe")
    assert (draft.data["torch"], draft.data["torchvision"]) == ("2.5.1", "0.20.0")


def test_an_extension_built_for_another_torch_is_unpinned_and_its_cuda_read() -> None:
    text = "torch==2.1.2\ncolossalai==0.2.0+torch1.12cu11.3\n"
    reading = read_requirements_text(text, "requirements.txt")
    assert file_facts(reading).cuda == "11.3"
    draft = draft_from_environment(reading, "probe", upgrade=True)
    assert "colossalai" in draft.data["pip"]
    assert any(n.entry == "colossalai==0.2.0+torch1.12cu11.3" and n.outcome == "upgraded" for n in draft.notes)


def test_an_environment_file_the_dockerfile_installs_from_its_context_is_read(tmp_path: Path) -> None:
    (tmp_path / "environment.yml").write_text(
        "channels: [conda-forge]\ndependencies: [python=3.11, pytorch=2.5.1, cuda-version=12.4, einops]\n",
        encoding="utf-8")
    text = ("FROM mambaorg/micromamba:1.5\nCOPY environment.yml /tmp/env.yml\n"
            "RUN micromamba env create -y -n app -f /tmp/env.yml\n")
    reading = read_dockerfile_text(text, str(tmp_path / "Dockerfile"), context=tmp_path)
    facts = file_facts(reading)
    assert (facts.torch, facts.torch_from, facts.cuda, reading.conda) == ("2.5.1", "conda", "12.4", ["einops"])
    missing = read_dockerfile_text("FROM ubuntu:22.04\nRUN conda env create -f env.yml\n", "Dockerfile")
    assert any(n.outcome == "unmapped" and "env.yml" in n.reason for n in missing.notes)


def test_torchs_own_build_decides_over_nvidia_wheels_of_another_cuda() -> None:
    text = "torch==2.1.0+cu118\nnvidia-cublas-cu11==11.11.3.6\nnvidia-cublas-cu12==12.1.3.1\nnvidia-nccl-cu12\n"
    draft = draft_from_environment(read_requirements_text(text, "requirements.txt"), "probe")
    assert draft.data["targets"] == [{"cuda": "11.8"}]
    stray = {n.entry for n in draft.notes if n.outcome == "dropped" and "torch's own build" in n.reason}
    assert stray == {"nvidia-cublas-cu12==12.1.3.1", "nvidia-nccl-cu12"}


def test_a_companion_of_another_torch_release_is_re_paired_with_upgrade() -> None:
    text = "torch==2.1.2\ntorchvision==0.15.2\ntorchaudio==2.0.2\n"
    with pytest.raises(UsageError, match="older than what envbuild builds|--upgrade"):
        draft_from_environment(read_requirements_text(text, "requirements.txt"), "probe")
    draft = draft_from_environment(read_requirements_text(text, "requirements.txt"), "probe", upgrade=True)
    assert (draft.data["torch"], draft.data["torchvision"]) == ("2.1.2", "0.16.2")
    assert "torchaudio" in draft.data["pip"]
    assert any(n.entry == "torchaudio==2.0.2" and n.outcome == "upgraded" for n in draft.notes)


def test_a_second_torch_pin_is_flagged() -> None:
    reading = read_requirements_text("torch==2.4.1\neinops\ntorch==2.5.1\n", "requirements.txt")
    assert file_facts(reading).torch == "2.4.1"
    assert any(n.entry == "torch==2.5.1" and n.outcome == "dropped" for n in reading.notes)


def test_a_conda_forge_torchvision_built_for_the_locks_pytorch_is_re_paired_and_named() -> None:
    from builder.init.read import read_conda_lock_data

    lock = {"version": 1, "metadata": {"platforms": ["linux-64"], "channels": [{"url": "conda-forge"}]},
            "package": [_locked("pytorch", "2.10.0", "cpu_mkl_py312_h0_104"),
                        _locked("torchvision", "0.26.0", "cpu_py312_h0_0"), _locked("python", "3.12.8", "h0")]}
    reading = read_conda_lock_data(lock, "conda-lock.yml")
    with pytest.raises(UsageError, match="--upgrade"):
        draft_from_environment(reading, "probe")
    draft = draft_from_environment(read_conda_lock_data(lock, "conda-lock.yml"), "probe", upgrade=True)
    assert (draft.data["torch"], draft.data["torchvision"]) == ("2.10.0", "0.25.0")
    assert any(n.outcome == "upgraded" and n.reason.startswith("torchvision 0.26.0 -> 0.25.0") and
               "channel built" in n.reason for n in draft.notes)


def test_a_wheel_the_image_builds_with_pip_wheel_is_named_by_where_it_is_built() -> None:
    text = ("FROM nvcr.io/nvidia/pytorch:25.03-py3 AS build\nWORKDIR /src\n"
            "RUN git clone https://github.com/org/fast-kernels.git && cd fast-kernels && pip wheel -w /wheels .\n"
            "RUN cd /opt/extra-ops && pip wheel --no-deps -w /wheels .\n"
            "FROM build\nRUN unzip /wheels/*.whl -d /usr/local/lib/python3.12/dist-packages\n")
    reading = read_dockerfile_text(text, "Dockerfile")
    named = {n.entry for n in reading.notes if n.outcome == "unmapped" and n.entry.startswith("pip wheel")}
    assert named == {"pip wheel . (in https://github.com/org/fast-kernels.git)", "pip wheel . (in /opt/extra-ops)"}
    assert reading.pip == []


@pytest.mark.parametrize("text, expanded", [
    ('${A:+"img:${A}-x${B}"}', "img:1-x2"), ("${UNSET:-'u:${A}'}", "u:1"), ("${A:+${UNSET:-z}}", "z"),
    ("${A", "${A"), ("${A#x}", "${A#x}"),
])
def test_a_substitution_word_holds_quotes_and_further_references(text: str, expanded: str) -> None:
    variables = BuildVariables()
    variables.declare_args(("A=1", "B=2"))
    assert variables.expand(text) == expanded


def test_a_from_line_sees_the_global_args_after_a_stage_and_a_stage_it_names_keeps_its_python() -> None:
    text = ('ARG CUDA=11.3.1\nARG BASE=${CUDA:+"nvidia/cuda:${CUDA}-devel-ubuntu22.04"}\nARG NEXT=build\n'
            "FROM ${BASE} AS build\nARG PY=3.10\nRUN apt-get install -y python${PY}\n"
            "RUN pip install torch==1.13.1+${CUDA_TAG}\nFROM ${NEXT}\nRUN pip install einops\n")
    reading = read_dockerfile_text(text, "Dockerfile")
    assert reading.base_images == ["nvidia/cuda:11.3.1-devel-ubuntu22.04"]
    assert file_facts(reading).as_dict() == {"torch": "1.13.1", "torch_from": "pip", "cuda": "11.3",
                                             "platform": "linux-64"}
    assert draft_from_environment(reading, "probe", upgrade=True).data["python"] == "3.10"
    tagged = [n for n in reading.notes if n.entry == "torch==1.13.1+${CUDA_TAG}"]
    assert tagged and tagged[0].outcome == "assumed" and "${CUDA_TAG}" in tagged[0].reason


def test_a_version_from_an_undeclared_arg_is_kept_unpinned_and_named() -> None:
    text = "ARG V='>=8.10'\nFROM python:3.11\nRUN pip install torch==2.5.1 ipython${V} $WHEEL\n"
    reading = read_dockerfile_text(text, "Dockerfile")
    assert "ipython" in reading.pip
    assert [(n.entry, n.outcome) for n in reading.notes if n.entry.startswith(("ipython", "$"))] == [
        ("ipython${V}", "unpinned"), ("$WHEEL", "unmapped")]


def test_an_environment_files_pip_r_line_reads_the_file_beside_it(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch==2.0.1\neinops\n", encoding="utf-8")
    env = tmp_path / "environment.yml"
    env.write_text("dependencies:\n  - python=3.9\n  - pip:\n    - -r requirements.txt\n    - -r missing.txt\n",
                   encoding="utf-8")
    from builder.init.read import read_source
    reading = read_source(env)
    assert (file_facts(reading).torch, "einops" in reading.pip) == ("2.0.1", True)
    assert [(n.entry, n.outcome) for n in reading.notes if "txt" in n.entry] == [
        ("-r requirements.txt", "derived"), ("-r missing.txt", "unmapped")]
    env.write_text("dependencies:\n  - pip:\n    - -r ../outside.txt\n", encoding="utf-8")
    with pytest.raises(UsageError, match="--allow-outside"):
        read_source(env)


def test_a_wildcard_torch_pin_is_a_range_and_a_torchvision_range_it_leaves_is_re_paired_by_name() -> None:
    reading = read_requirements_text("torch==2.8.0.*\ntorchvision==0.22.*\n", "requirements.txt")
    assert file_facts(reading).torch == "==2.8.0.*"
    draft = draft_from_environment(reading, "probe", upgrade=True)
    assert draft.data["torchvision"].startswith("0.23.")
    assert any(n.entry == "torchvision==0.22.*" and n.outcome == "upgraded" for n in draft.notes)


@pytest.mark.parametrize("copy, run", [
    ("COPY requirements.txt /workspace", "pip --no-cache-dir install -r /workspace/requirements.txt"),  # detr
    ("COPY requirements.txt /tmp/reqs.txt", "pip install -r /tmp/reqs.txt"),  # the destination a file
    ("WORKDIR /app\nCOPY requirements.txt .", "pip install -r requirements.txt"),  # WORKDIR-relative
    ("COPY requirements.txt /app/deps/", "cd /app && pip --timeout 60 install -r deps/requirements.txt"),
    ("COPY requirement*.txt /src/", "python3 -m pip install -r /src/requirements.txt"),  # a wildcard source
])
def test_a_requirements_file_is_followed_from_where_a_copy_put_it_back_to_the_build_context(
        tmp_path: Path, copy: str, run: str) -> None:
    (tmp_path / "requirements.txt").write_text("torch==2.4.1\nscipy\n", encoding="utf-8")
    reading = read_dockerfile_text(f"FROM python:3.11\n{copy}\nRUN {run}\n", str(tmp_path / "Dockerfile"),
                                   context=tmp_path)
    assert (file_facts(reading).torch, reading.pip) == ("2.4.1", ["scipy"]), (copy, run)


def test_a_requirements_or_constraints_file_the_build_context_does_not_give_is_named(tmp_path: Path) -> None:
    (tmp_path / "constraints.txt").write_text("torch==2.4.1\n", encoding="utf-8")
    text = ("FROM python:3.11\nCOPY constraints.txt /c.txt\n"
            "RUN pip install -r /elsewhere/requirements.txt -c /c.txt einops\n")
    reading = read_dockerfile_text(text, str(tmp_path / "Dockerfile"), context=tmp_path)
    reasons = {n.entry: n.reason for n in reading.notes if n.outcome == "unmapped"}
    assert "run `envbuild init` on that file" in reasons["-r /elsewhere/requirements.txt"]
    assert "constraints.txt of the build context" in reasons["-c /c.txt"]
    assert reading.pip == ["einops"]


@pytest.mark.parametrize("run, torch, torch_from", [
    ("pip install 'torch>=1.5.0' scipy", "1.5", "base-image"),  # pip keeps the image's torch: it meets the range
    ("pip install -U 'torch>=1.5.0' scipy", ">=1.5.0", "pip"),  # --upgrade takes the newest instead
    ("pip install --force-reinstall 'torch>=1.5.0' scipy", ">=1.5.0", "pip"),
    ("pip install 'torch>=2.0' scipy", ">=2.0", "pip"),  # the image's torch does not meet it
])
def test_a_torch_range_the_base_images_torch_meets_keeps_the_images_torch(
        run: str, torch: str, torch_from: str) -> None:
    reading = read_dockerfile_text(f"FROM pytorch/pytorch:1.5-cuda10.1-cudnn7-runtime\nRUN {run}\n", "Dockerfile")
    facts = file_facts(reading)
    assert (facts.torch, facts.torch_from, reading.pip) == (torch, torch_from, ["scipy"])
