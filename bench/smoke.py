"""`make bench-smoke`: the CPU smoke suite inside a container of a freshly built image, timed once.

Target (issue 24, smoke suite depth): <= 30 s here for the container run, DistributedDataParallel and
torch.compile checks included. A figure, not a timed test: the line prints the goal beside it.
"""

from __future__ import annotations

from bench._world import bench_env
from builder.image.build import BuildOptions, build_image
from builder.image.context import make_context
from builder.image.smoke_run import Expected, run_in_image


def main() -> None:
    with bench_env("cpu") as env:
        image = build_image(make_context(env.target, env.lock_path, env.folder / "context"),
                            BuildOptions(network="host"))
        report = run_in_image(image.tags[0], expect=Expected(env.target.torch, "cpu"))
        for row in report.table_rows():
            print("  " + "  ".join(f"{cell:<30}" if i == 0 else str(cell) for i, cell in enumerate(row)))
        s = report.summary
        print(f"smoke: container_seconds={report.seconds:.1f} goal<=30 passed={s.get('passed', 0)} "
              f"failed={s.get('failed', 0)} skipped={s.get('skipped', 0)}")


if __name__ == "__main__":
    main()
