"""bench/image.py's split of a build's time per RUN, from the engine's log lines as they arrive."""

from __future__ import annotations

import itertools

import pytest

from bench import image as bench_image

pytestmark = pytest.mark.unit

# What the legacy builder streams for one layer group's RUN, then the next step (times in seconds).
LOG = [
    (0.0, "Step 14/30 : RUN touch /tmp/envbuild-start  && PYTHONPATH=/opt/envbuild/installer python -m "
          "builder.lock.install --add --plan /opt/envbuild/plans/torch.json --prefix /opt/env"),
    (0.5, " ---> Running in 0123456789ab"),
    (31.5, "installed 12 conda and 0 pip package(s) into /opt/env for /opt/env (760696223 bytes, 28.0 s)"),
    (40.0, "Removing intermediate container 0123456789ab"),
    (40.0, " ---> 89abcdef0123"),
    (40.0, "Step 15/30 : COPY envbuild/layers/torch-deps/ /"),
    (40.2, " ---> fedcba987654"),
]


def test_an_installing_run_is_split_into_its_parts(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    times = iter([t for t, _ in LOG])
    monkeypatch.setattr(bench_image.time, "monotonic", lambda: next(times))
    clock = bench_image.StepClock()
    for _, line in LOG:
        clock(line)
    run, copy = clock.steps
    assert (run.number, run.seconds, run.installer_s) == (14, 40.0, 28.0)
    assert copy.seconds == pytest.approx(0.2)
    bench_image.print_step_times("image", clock)
    out = capsys.readouterr().out
    assert ("step 14 group torch: 40.0 s (container start 0.5, before the installer 3.0, installer 28.0, "
            "after the installer 8.5)") in out
    assert "image: install RUNs: container_start=0.5 before_the_installer=3.0 installer=28.0 after_the_installer=8.5" in out
    assert "step 15" not in out  # under a second


def test_a_plain_build_stream_feeds_the_same_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = itertools.count()
    monkeypatch.setattr(bench_image.time, "monotonic", lambda: float(next(counter)))
    clock = bench_image.StepClock()
    clock.feed({"stream": "Step 1/2 : FROM base\n ---> 0123456789ab\n"})
    clock.feed({"stream": "Step 2/2 : RUN true\n"})
    clock.feed({"aux": {"ID": "sha256:00"}})
    assert [step.number for step in clock.steps] == [1, 2]
    assert clock.steps[0].seconds == 1.0


def test_the_shared_compiler_run_is_left_out_of_the_env_ratio(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = itertools.count(step=5)
    monkeypatch.setattr(bench_image.time, "monotonic", lambda: float(next(counter)))
    clock = bench_image.StepClock()
    # The legacy builder prints a RUN's continuation lines joined into one.
    clock("Step 3/9 : RUN if ! command -v apt-get >/dev/null 2>&1; then     exit 1;     fi;     apt-get update -q  "
          "&& DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gcc g++ libc6-dev")
    clock(" ---> 0123456789ab")
    clock("Step 4/9 : RUN true")
    clock(" ---> 89abcdef0123")
    assert bench_image.compiler_seconds(clock) == 5.0
    pair = bench_image.Pair(cold=60.0, baseline=50.0, cold_compiler=12.0, baseline_compiler=10.0)
    assert pair.ratio == pytest.approx(1.2)
    assert pair.env_ratio == pytest.approx(48.0 / 40.0)
