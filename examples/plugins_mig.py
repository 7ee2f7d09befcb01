"""sky.plugins.mig: each executor child gets its own MIG instance of a GPU. Needs a
MIG-capable NVIDIA GPU (A100, H100, ...): on a pool without one (like sky.Local()
here) opening is refused, naming the missing device."""

import os

import skyward as sky


@sky.function
def partition() -> tuple[int, str]:
    info = sky.instance_info()
    return info.worker, os.environ.get("CUDA_VISIBLE_DEVICES", "")


def main(provider=None) -> None:
    worker = sky.Worker(executor="process", concurrency=2)
    try:
        with sky.Compute(
            provider=provider or sky.Local(), plugins=[sky.plugins.mig("3g.40gb")], options=sky.Options(worker=worker)
        ) as pool:
            print("workers per node:", (partition() >> pool))
    except ValueError as refused:
        print("refused:", refused)


if __name__ == "__main__":
    main()
