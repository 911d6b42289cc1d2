"""Fleet verdicts on recorded hosts of eight GPU generations (Kepler to Blackwell, and a mixed box).

The host files under tests/fixtures/hosts/ are in the format `envbuild doctor --save` writes; the
verdicts follow from builder/data/compat.yaml (arch lists, drivers), so a wrong arch list or a wrong
driver rule changes a cell here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from builder.errors import UsageError
from builder.formats.host_file import HostFile, read_host_file
from builder.host.doctor import (
    ARCH_NOT_IN_BUILD,
    MINOR_COMPAT,
    NEEDS_NEWER_DRIVER,
    NO_DRIVER,
    RUNS,
    gather_host_facts,
)
from builder.host.fleet import (
    NATIVE,
    PTX_JIT,
    fleet_matrix,
    fleet_warnings,
    host_paths,
    load_host,
    save_host,
    spec_hosts,
)
from builder.host.hostkind import HostProbe
from builder.lint.rules import lint_spec
from builder.specs.fleet import lowest_capability
from builder.specs.gpus import capability_of, parse_capability
from builder.specs.model import load_spec, parse_spec
from builder.specs.target import resolve_targets
from tests import paths
from tests.nvidia_replay import fake_nvidia_smi, needs_no_nvml, replay_nvidia_smi
from tests.paths import FIXTURES, REPO

pytestmark = pytest.mark.unit

HOSTS = FIXTURES / "hosts"
ALL_HOSTS = host_paths([HOSTS])

M, A, D, R = MINOR_COMPAT, ARCH_NOT_IN_BUILD, NEEDS_NEWER_DRIVER, RUNS
# torch 2.11: pip 12.6 (sm_50..sm_90), pip 12.8 (sm_75..sm_120, no Volta), pip 13.0 (sm_75..sm_120 + PTX),
# conda-forge 12.9 (the feedstock's own list: sm_50..sm_120 + PTX)
EXPECTED = {  # host: (cuda12.6, cuda12.8, cuda13.0, conda-forge cuda12.9)
    "kepler-k80": (A, A, A, A),          # sm_37 left the CUDA 12 builds; driver 470 is too old as well
    "maxwell-m60": (M, A, A, M),         # sm_50 kernels run on 5.2; driver 535 (CUDA 12.2) < 12.6
    "pascal-p100": (M, A, A, M),
    "volta-4xv100": (M, A, A, M),        # 2.11's 12.8 wheels dropped sm_70 (pytorch PR 175253)
    "turing-t4": (R, R, D, M),           # driver 570 (CUDA 12.8): 13.0 needs >= 580.65.06
    "ampere-a100": (R, R, R, R),
    "ampere-rtx3090": (R, M, D, M),
    "ada-l4": (R, R, D, R),              # sm_89 runs the sm_86 kernels
    "hopper-h100": (R, R, R, R),
    "blackwell-b200": (A, R, R, R),      # sm_100 is not in the 12.6 build and it has no PTX
    "blackwell-rtx5090": (A, R, D, R),
    "mixed-v100-a100": (M, A, A, M),     # the V100 decides
}


def write_spec(folder: Path, body: str) -> Path:
    path = folder / "team.yaml"
    path.write_text('name: team-vision\npython: "3.12"\ntorch: "2.11"\nroute: pip\n' + body)
    return path


@pytest.fixture
def mixed_targets(tmp_path: Path):
    spec = write_spec(tmp_path, 'targets:\n  - {cuda: "12.6"}\n  - {cuda: "12.8"}\n  - {cuda: "13.0"}\n'
                                '  - {cuda: "12.9", route: conda-forge}\n')
    return resolve_targets(load_spec(spec))


def test_the_fixture_fleet_spans_eight_generations() -> None:
    majors = {capability[0] for path in ALL_HOSTS for capability in load_host(path).capabilities}
    assert {3, 5, 6, 7, 8, 9, 10, 12} <= majors


@pytest.mark.parametrize("host_name", sorted(EXPECTED))
def test_matrix_verdicts_per_generation(host_name: str, mixed_targets) -> None:
    host = load_host(HOSTS / f"{host_name}.json")
    matrix = fleet_matrix(mixed_targets, [host])
    verdicts = tuple(matrix.cell(target, host_name).verdict for target in ("cuda12.6", "cuda12.8", "cuda13.0", "cuda12.9"))
    assert verdicts == EXPECTED[host_name]
    for cell in matrix.cells:
        if cell.verdict == ARCH_NOT_IN_BUILD:
            assert "kernels" in (cell.fix or ""), cell
        if cell.runs:
            assert cell.how == NATIVE


def test_smallest_cover_of_the_whole_fleet(mixed_targets) -> None:
    matrix = fleet_matrix(mixed_targets, [load_host(path) for path in ALL_HOSTS])
    # conda-forge's 12.9 build keeps Maxwell..Volta kernels and has Blackwell's: one target covers all but the K80
    assert matrix.cover == ("cuda12.9",)
    assert list(matrix.uncovered) == ["kepler-k80"]
    # the K80 host's driver reports CUDA 11.4: only CUDA 11 builds are offered, the newest with sm_37 (sm_35) kernels
    assert matrix.uncovered["kepler-k80"] == ("sm_37: the newest builds with sm_37 kernels are torch 2.7 with CUDA "
                                              "11.8 (pip), torch 2.5 with CUDA 11.8 (conda-forge)")
    assert json.loads(json.dumps(matrix.as_dict()))["cover"] == ["cuda12.9"]


def test_wheel_only_fleet_needs_two_targets(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, 'targets:\n  - {cuda: "12.6"}\n  - {cuda: "12.8"}\n  - {cuda: "13.0"}\n')
    hosts = [load_host(path) for path in ALL_HOSTS if "k80" not in path.name]
    matrix = fleet_matrix(resolve_targets(load_spec(spec)), hosts)
    # 12.6 has Maxwell..Hopper; Blackwell needs 12.8 (13.0 needs driver 580, which the RTX 5090 host lacks)
    assert matrix.cover == ("cuda12.6", "cuda12.8")
    assert matrix.uncovered == {}


def test_volta_team_is_told_at_lint_time(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, 'targets:\n  - {cuda: "13.0"}\nfleet:\n  - {gpu: V100, count: 4}\n'))
    finding, uncovered = lint_spec(spec, only=["lint.fleet.arch-not-covered"])
    assert finding.severity.value == uncovered.severity.value == "warning"
    assert finding.location.field == "fleet"
    assert finding.message.startswith("target cuda13.0 does not run on fleet GPU V100: sm_70 not in torch 2.11's "
                                      "pip CUDA 13.0 build")
    assert finding.fix == ("sm_70: the newest builds with sm_70 kernels are torch 2.14 with CUDA 12.6 (pip), "
                           "torch 2.14 with CUDA 12.9 (conda-forge)")
    assert uncovered.message == "no target of the spec runs on fleet GPU V100" and uncovered.fix == finding.fix


def test_a_spec_without_fleet_gets_no_fleet_findings(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, 'targets:\n  - {cuda: "13.0"}\n'))
    assert lint_spec(spec, only=["lint.fleet.arch-not-covered"]) == []


def test_named_gpus_are_judged_on_architecture_alone(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, 'targets:\n  - {cuda: "12.6"}\n  - {cuda: "13.0"}\n'
                                          'fleet: [K80, sm_120, "13.0", H100]\n'))
    targets = resolve_targets(spec)
    matrix = fleet_matrix(targets, spec_hosts(spec))
    assert [(c.target, c.host, c.verdict, c.how) for c in matrix.cells] == [
        ("cuda12.6", "K80", A, None), ("cuda13.0", "K80", A, None),
        ("cuda12.6", "sm_120", A, None), ("cuda13.0", "sm_120", R, NATIVE),
        # a GPU newer than every sm_ entry runs compute_120 PTX, JIT-compiled on first use
        ("cuda12.6", "13.0", A, None), ("cuda13.0", "13.0", R, PTX_JIT),
        ("cuda12.6", "H100", R, NATIVE), ("cuda13.0", "H100", R, NATIVE),
    ]
    assert all("driver not recorded" in c.why for c in matrix.cells if c.runs)
    warnings = fleet_warnings(targets, spec_hosts(spec))
    assert "target cuda13.0 runs on fleet GPU 13.0 only through PTX JIT" in " ".join(warnings)
    assert any(w.startswith("no target of the spec runs on fleet GPU K80; sm_37:") for w in warnings)


def test_spec_host_files_are_relative_to_the_spec(tmp_path: Path) -> None:
    (tmp_path / "hosts").mkdir()
    (tmp_path / "hosts" / "gpu1.json").write_text((HOSTS / "volta-4xv100.json").read_text())
    spec = load_spec(write_spec(tmp_path, 'targets:\n  - {cuda: "12.6"}\n'
                                          'fleet:\n  - {host: hosts/gpu1.json, name: lab-v100, count: 3}\n'))
    [host] = spec_hosts(spec)
    assert (host.name, host.count, host.capabilities) == ("lab-v100", 3, [(7, 0)])
    assert fleet_matrix(resolve_targets(spec), [host]).cell("cuda12.6", "lab-v100").verdict == MINOR_COMPAT


def test_the_fleets_lowest_capability_is_read_at_the_spec(tmp_path: Path) -> None:
    (tmp_path / "hosts").mkdir()
    (tmp_path / "hosts" / "gpu1.json").write_text((HOSTS / "pascal-p100.json").read_text())
    spec = load_spec(write_spec(tmp_path, 'targets:\n  - {cuda: "12.6"}\nfleet:\n  - H100\n  - {host: hosts/gpu1.json}\n'))
    assert lowest_capability(spec) == min(c for host in spec_hosts(spec) for c in host.capabilities) == (6, 0)
    (tmp_path / "hosts" / "gpu1.json").write_text('{"envbuild_host": 1, "gpus": [{"name": "A100"}]}')
    with pytest.raises(UsageError, match="the host file is damaged"):
        lowest_capability(spec)


def test_a_recorded_driver_cuda_keeps_a_two_digit_minor(tmp_path: Path) -> None:
    record = json.loads((HOSTS / "hopper-h100.json").read_text())
    record["driver"]["cuda"] = "12.10"
    (tmp_path / "host.json").write_text(json.dumps(record))
    facts = load_host(tmp_path / "host.json").facts
    assert facts is not None and facts.driver.cuda == (12, 10)


@pytest.mark.parametrize(("entry", "error"), [
    ("Voodoo 3", "is not in envbuild's GPU list"),
    ({"gpu": "V100", "host": "a.json"}, "give either `gpu`"),
    ({"count": 2}, "give either `gpu`"),
    ("hosts/a.yaml; rm -rf /", "contains characters"),
])
def test_spec_refuses_bad_fleet_entries(entry, error: str) -> None:
    with pytest.raises(UsageError, match="fleet.0") as caught:
        parse_spec({"name": "x", "python": "3.12", "torch": "2.11", "targets": [{"cuda": "12.6"}], "fleet": [entry]})
    assert error in str(caught.value)


@pytest.mark.parametrize(("name", "capability"), [
    ("Tesla K80", (3, 7)), ("Tesla M60", (5, 2)), ("Tesla P100-PCIE-16GB", (6, 0)), ("Tesla V100-SXM2-32GB", (7, 0)),
    ("Tesla T4", (7, 5)), ("NVIDIA A100-SXM4-80GB", (8, 0)), ("NVIDIA A10", (8, 6)), ("NVIDIA GeForce RTX 3090", (8, 6)),
    ("NVIDIA L4", (8, 9)), ("NVIDIA L40S", (8, 9)), ("NVIDIA RTX 6000 Ada Generation", (8, 9)),
    ("Quadro RTX 6000", (7, 5)), ("NVIDIA H100 80GB HBM3", (9, 0)), ("NVIDIA B200", (10, 0)),
    ("NVIDIA GeForce RTX 5090", (12, 0)), ("sm_70", (7, 0)), ("sm_120", (12, 0)), ("8.6", (8, 6)),
    ("NVIDIA GeForce ...", None), ("Radeon RX 7900", None),
])
def test_gpu_model_names(name: str, capability) -> None:
    assert capability_of(name) == capability


def test_capability_parse_refuses_other_text() -> None:
    with pytest.raises(ValueError, match="not a compute capability"):
        parse_capability("eighty")


@needs_no_nvml
def test_a_replayed_nvidia_smi_host_saves_and_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    mixed_targets) -> None:
    # nvidia-smi's table shows no compute capability: the saved host gets it back from the model name
    replay_nvidia_smi(tmp_path / "bin", "classic-535-2gpu.txt", monkeypatch)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    saved = tmp_path / "out" / "a100-box.json"
    save_host(gather_host_facts(), saved, name="a100-box")
    host = load_host(saved)
    assert (host.name, host.capabilities, host.facts.driver.driver_version) == ("a100-box", [(8, 0)], "535.54.03")
    matrix = fleet_matrix(mixed_targets, [host])
    assert [c.verdict for c in matrix.cells] == [M, M, D, M]
    assert [p.name for p in tmp_path.joinpath("out").iterdir()] == ["a100-box.json"]  # no staging file left


def test_a_host_without_gpus_reads_no_gpu(mixed_targets, tmp_path: Path) -> None:
    record = json.loads((HOSTS / "ada-l4.json").read_text())
    record.update(gpus=[], driver={"source": None, "version": None, "cuda": None, "notes": []}, name="laptop")
    (tmp_path / "laptop.json").write_text(json.dumps(record))
    matrix = fleet_matrix(mixed_targets, [load_host(tmp_path / "laptop.json")])
    assert {c.verdict for c in matrix.cells} == {NO_DRIVER}
    assert matrix.cover == () and matrix.uncovered == {}


@pytest.mark.parametrize(("text", "error"), [
    ("not json", "not a host file (not JSON)"),
    ('{"name": "x"}', "not an envbuild host file"),
    ('{"envbuild_host": 1, "gpus": [{"name": "A100"}]}', "the host file is damaged"),
])
def test_bad_host_files_are_one_line(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "host.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=re.escape(error)):
        load_host(path)


def test_a_saved_host_keeps_its_kind_and_reads_back_as_written(tmp_path: Path) -> None:
    # A WSL2 machine's markers travel in the file, so the fleet judges it by the Windows driver's numbers.
    facts = load_host(HOSTS / "ampere-rtx3090.json").facts
    assert facts is not None
    wsl = replace(facts, probe=HostProbe(system="Linux", kernel_release="5.15.167.4-microsoft-standard-WSL2",
                                         wsl="kernel 5.15.167.4-microsoft-standard-WSL2"))
    save_host(wsl, tmp_path / "laptop.json", name="laptop")
    loaded = load_host(tmp_path / "laptop.json")
    assert loaded.facts is not None and loaded.facts.kind.name == "wsl"
    record = read_host_file(tmp_path / "laptop.json")
    assert isinstance(record, HostFile) and record.name == "laptop" and record.probe.wsl == wsl.probe.wsl
    # What doctor writes beyond the model (processes, the kind's words) is kept, not dropped.
    assert "processes" in json.loads((tmp_path / "laptop.json").read_text())


def test_a_saved_host_keeps_whether_its_container_markers_were_looked_for(tmp_path: Path) -> None:
    # A live probe looked for them (a Linux host is told); a file that does not say reads back "not told".
    facts = load_host(HOSTS / "ampere-rtx3090.json").facts
    assert facts is not None
    for checked, answer in ((True, "linux"), (False, "linux host or container: not told")):
        save_host(replace(facts, probe=HostProbe(system="Linux", container_checked=checked)), tmp_path / "h.json")
        loaded = load_host(tmp_path / "h.json").facts
        assert loaded is not None and loaded.kind.name == "linux" and loaded.kind.answer == answer


def test_an_empty_host_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no host files"):
        host_paths([tmp_path])


# --- the commands, as a user runs them ------------------------------------------------------------

def _envbuild(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "CI": "true", "PYTHONPATH": str(REPO)})


def test_doctor_fleet_json_and_exit_code(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, 'targets:\n  - {cuda: "12.6"}\n  - {cuda: "12.9", route: conda-forge}\n'
                                'fleet: [RTX 5090]\n')
    done = _envbuild("doctor", str(spec), "--fleet", str(HOSTS), "--json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # the K80 host runs no target
    data = json.loads(done.stdout)
    assert data["cover"] == ["cuda12.9"] and list(data["uncovered"]) == ["kepler-k80"]
    assert [h["name"] for h in data["hosts"]][:2] == ["RTX 5090", "ada-l4"]  # the spec's entries first
    cell = next(c for c in data["cells"] if c["target"] == "cuda12.6" and c["host"] == "RTX 5090")
    assert (cell["verdict"], cell["runs"]) == (ARCH_NOT_IN_BUILD, False)


def test_doctor_fleet_table_marks_the_cover(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, 'targets:\n  - {cuda: "12.6"}\n  - {cuda: "12.8"}\n')
    done = _envbuild("doctor", str(spec), "--fleet", str(HOSTS / "volta-4xv100.json"),
                     "--fleet", str(HOSTS / "blackwell-b200.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "cuda12.6 *" in done.stdout and "cuda12.8 *" in done.stdout
    assert done.stdout.rstrip().endswith("cover: cuda12.6, cuda12.8")


def test_doctor_fleet_needs_a_spec(tmp_path: Path) -> None:
    done = _envbuild("doctor", "--fleet", str(HOSTS / "ada-l4.json"), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["Error: --fleet needs SPEC: the targets to judge on the recorded hosts"]


def test_doctor_save_refuses_a_folder_and_writes_nothing(tmp_path: Path) -> None:
    done = _envbuild("doctor", "--save", str(tmp_path), cwd=tmp_path)
    assert done.returncode != 0 and "Error:" in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_targets_json_carries_fleet_warnings(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, 'targets:\n  - {cuda: "12.6"}\n  - {cuda: "13.0"}\nfleet: [V100]\n')
    done = _envbuild("targets", str(spec), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = {row["target"]: row["fleet_warnings"] for row in json.loads(done.stdout)["targets"]}
    assert rows["cuda12.6"] == []
    assert len(rows["cuda13.0"]) == 1 and "fleet GPU V100: sm_70 not in" in rows["cuda13.0"][0]


CORPUS = paths.CORPUS / "nvidia-smi"


@needs_no_nvml
@pytest.mark.parametrize(("capture", "capabilities", "verdicts"), [
    # real captures (tests/corpus/nvidia-smi/manifest.yaml), torch 2.11 pip CUDA 12.6 and 13.0
    ("k80-410-table.txt", [(3, 7)], (A, A)),             # driver 410 too, but no build has the kernels
    ("titan-xp-450-table.txt", [(6, 1)], (D, A)),        # sm_60 kernels run on 6.1; driver 450 < 525.60.13
    ("v100-525-truncated-name.txt", [(7, 0)], (M, A)),  # "Tesla V100-SXM2..." still names a V100
    ("rtx4070-550-table.txt", [(8, 9)], (M, D)),
    ("a800-535-2gpu.txt", [(8, 0)], (M, D)),
    ("a100-580-2gpu.txt", [(8, 0)], (R, R)),
    ("rtx3090-465-table.txt", [], (D, D)),               # "NVIDIA GeForce ...": the driver alone decides
])
def test_real_nvidia_smi_captures_as_fleet_hosts(capture: str, capabilities, verdicts, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nvidia_smi(tmp_path / "bin", f"cat '{CORPUS / capture}'\n", monkeypatch)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    save_host(gather_host_facts(), tmp_path / "host.json", name=capture)
    host = load_host(tmp_path / "host.json")
    assert host.capabilities == capabilities
    spec = write_spec(tmp_path, 'targets:\n  - {cuda: "12.6"}\n  - {cuda: "13.0"}\n')
    matrix = fleet_matrix(resolve_targets(load_spec(spec)), [host])
    assert tuple(c.verdict for c in matrix.cells) == verdicts
