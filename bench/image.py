"""`make bench-image`: cold build, rebuild after a change outside the environment, size overhead,
and whether the env layer is byte-identical across two builds from scratch.

Targets (issue "Images"): rebuild <= 10 % of cold; image <= 5 % over the installed env plus the
base; the env layer digest always equal. Printed, never asserted: these machines are shared.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench._world import bench_env
from builder.context import make_context
from builder.image import BuildOptions, build_image, docker_client

NETWORK = BuildOptions(network="host")
NO_CACHE = BuildOptions(network="host", no_cache=True)


def build(env, folder: Path, options: BuildOptions, change_outside_env: bool = False):
    context = make_context(env.target, env.lock_path, folder)
    if change_outside_env:
        # The smoke suite ships with every image but is not part of the environment.
        readme = context.root / "smoke" / "README.md"
        readme.write_text(readme.read_text() + f"\n<!-- bench {time.time_ns()} -->\n")
    return build_image(context, options)


def installed_env_bytes(image_id: str) -> int:
    """The bytes of the files and links under /opt/env (`du` would add 4 kB per folder, which no
    layer stores)."""
    client = docker_client()
    script = r"find /opt/env \( -type f -o -type l \) -printf '%s\n' | awk '{s+=$1} END {print s}'"
    out = client.containers.run(image_id, ["sh", "-c", script], remove=True, user="0")
    return int(out.split()[0])


def main() -> None:
    with bench_env("cpu") as env:
        cold = build(env, env.folder / "cold", NO_CACHE)
        print(f"cold build (--no-cache): {cold.seconds:.1f} s, image {cold.size / 1e6:.0f} MB, "
              f"env layer {cold.env_layer_size / 1e6:.0f} MB {cold.env_layer_digest[:19]}")
        rebuild = build(env, env.folder / "rebuild", NETWORK, change_outside_env=True)
        print(f"rebuild after a smoke-suite change: {rebuild.seconds:.1f} s")
        again = build(env, env.folder / "again", NO_CACHE)
        print(f"second build from scratch: {again.seconds:.1f} s, env layer {again.env_layer_digest[:19]}")
        if again.base_size is None:
            raise SystemExit(f"bench: the engine does not know the runtime base {env.target.runtime_image.reference}")
        installed = installed_env_bytes(again.image_id)  # the tags moved there; earlier builds are gone
        overhead = 100 * (again.size / (installed + again.base_size) - 1)
        print(f"installed env {installed / 1e6:.0f} MB + base {cold.base_size / 1e6:.0f} MB "
              f"-> image {again.size / 1e6:.0f} MB")
        stable = "yes" if again.env_layer_digest == cold.env_layer_digest else "no"
        print(f"image: cold={cold.seconds:.1f} rebuild={rebuild.seconds:.1f} "
              f"rebuild_ratio={rebuild.seconds / cold.seconds:.3f} size_overhead={overhead:.2f} "
              f"env_layer_stable={stable}")


if __name__ == "__main__":
    main()
