"""Rules written from blind batch 4's dev cases (issue 31): the package whose library lacks a torch symbol,
cuDNN's header missing at build time, an API an old torch lacks, conda's CPU build of an extension, and
TransformerEngine without its PyTorch extension. Each on lines written from the upstream message, checked on
the facts its cause names and the fix it gives."""

from __future__ import annotations

import pytest

from builder.explain.facts import extract_facts
from builder.explain.log_text import LogText
from builder.explain.report import explain_text
from tests.unit.explain.first_answer import answer

pytestmark = pytest.mark.unit


def test_an_undefined_torch_symbol_names_the_package_that_holds_the_library():
    rule, cause, fix = answer("OSError: /venv/lib/python3.10/site-packages/torchaudio/lib/libtorchaudio.so: "
                              "undefined symbol: _ZNK5torch8autograd4Node4nameB5cxx11Ev")
    assert rule == "explain.loader.undefined-symbol"
    assert "torchaudio" in cause and "torch's" in cause
    assert "reinstall torchaudio" in fix


def test_the_package_comes_from_the_traceback_when_the_library_sits_alone():
    log = ("----> 1 import torchaudio\n~/repo/audio/torchaudio/__init__.py in <module>()\n"
           "ImportError: /usr/lib/python3/dist-packages/_torch_sox.so: undefined symbol: "
           "_ZN2at19UndefinedTensorImpl10_singletonE\nPyTorch version: 1.0.0")
    _, cause, fix = answer(log)
    assert "torchaudio's compiled extension" in cause and "torch 1.0.0 (line 4)" in cause
    assert "reinstall torchaudio's build that matches torch 1.0.0" in fix


def test_without_a_torch_version_the_package_is_still_named():
    _, cause, fix = answer("----> 1 import torchaudio\n~/repo/audio/torchaudio/__init__.py in <module>()\n"
                           "ImportError: /usr/lib/python3/dist-packages/_torch_sox.so: undefined symbol: "
                           "_ZN2at19UndefinedTensorImpl10_singletonE")
    assert "of the package torchaudio" in cause
    assert "reinstall torchaudio at the release made for this torch" in fix


def test_a_foreign_symbol_gets_no_package_advice():
    _, _, fix = answer("libfoo.so: undefined symbol: cudaGetDriverEntryPoint")
    assert "reinstall foo" not in fix


def test_a_missing_cudnn_header_points_the_build_at_cudnn():
    rule, cause, fix = answer("x.h:3:10: fatal error: cudnn.h: No such file or directory")
    assert rule == "explain.build.cudnn-header-missing"
    assert "cudnn.h" in cause
    assert "CUDNN_PATH" in fix and "CUDNN_HOME" in fix and "driver" not in fix


def test_a_missing_cudnn_header_on_an_nvidia_cuda_image_names_the_cudnn_tag():
    rule, _, fix = answer("#5 [1/4] FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
                          "x.h:3:10: fatal error: cudnn.h: No such file or directory")
    assert rule == "explain.build.cudnn-header-missing"
    assert "-cudnn-devel" in fix


def test_an_api_an_old_torch_lacks_names_the_release_that_added_it():
    rule, cause, fix = answer(" - PyTorch version: 1.8.1\nAttributeError: module 'torch' has no attribute "
                              "'frombuffer'")
    assert rule == "explain.torch.missing-api"
    assert "1.8.1" in cause and "1.10" in cause
    assert "1.10 or newer" in fix and "torchvision" in fix


def test_an_api_no_table_knows_says_so():
    _, cause, fix = answer("AttributeError: module 'torch.cuda' has no attribute 'made_up'")
    assert "'made_up'" in cause and "torch.cuda" in cause
    assert "no table here says" in fix


def test_a_torch_api_is_not_another_modules():
    assert not explain_text("AttributeError: module 'numpy' has no attribute 'float'").findings or \
        explain_text("AttributeError: module 'numpy' has no attribute 'float'").findings[0].rule != \
        "explain.torch.missing-api"


def test_conda_planning_an_extensions_cpu_build_asks_for_pytorch_cuda_in_one_request():
    rule, cause, fix = answer("conda install pyg -c pyg\n  pyg/linux-64::pyg-2.5.0-py311_torch_2.2.0_cpu\n"
                              "pytorch-cuda: 12.1")
    assert rule == "explain.conda.extension-cpu-build-planned"
    assert "CPU build of pyg 2.5.0" in cause and "py311_torch_2.2.0_cpu" in cause
    assert "pytorch=2.2.0 pytorch-cuda=12.1 pyg" in fix


def test_transformer_engine_without_its_torch_extension_gets_the_extra():
    log = ("pip install transformer-engine==1.9.0\n"
           '  File "/usr/lib/python3/dist-packages/transformer_engine/pytorch/__init__.py", line 22, in '
           "_load_library\n    so_path = next(so_dir.glob(f\"*.{extension}\"))\nStopIteration")
    rule, cause, fix = answer(log)
    assert rule == "explain.transformer-engine.no-torch-extension"
    assert "transformer-engine 1.9.0" in cause
    assert "transformer-engine[pytorch]" in fix and "NVTE_FRAMEWORK=pytorch" in fix


def test_transformer_engine_load_library_without_stopiteration_is_not_this_family():
    report = explain_text('  File "/x/transformer_engine/pytorch/__init__.py", line 22, in _load_library\n'
                          "OSError: libcudnn.so.9: cannot open shared object file: No such file or directory")
    assert report.findings[0].rule != "explain.transformer-engine.no-torch-extension"


def test_a_cuda_tag_as_people_type_it_is_no_cuda_fact():
    facts = extract_facts(LogText("PyTorch version: 1.8.1+cu10.1"))
    assert facts.get("torch") == "1.8.1+cu10.1"
    assert facts.get("torch_cuda") is None
    assert extract_facts(LogText("torch 2.1.0+cu118")).get("torch_cuda") == "11.8"


def test_transformer_engine_packages_of_different_releases_are_named():
    rule, cause, fix = answer("AssertionError: TransformerEngine package version mismatch. Found "
                              "transformer_engine_torch v2.1.0, transformer-engine v2.2.0, and "
                              "transformer-engine-cu12 v2.2.0.")
    assert rule == "explain.transformer-engine.version-mismatch"
    assert "transformer_engine_torch 2.1.0" in cause and "transformer-engine 2.2.0" in cause
    assert "transformer-engine-torch==2.2.0" in fix
