"""sky.plugins.mps: concurrent tasks share each node's GPU through CUDA MPS. Needs an
NVIDIA GPU: on a pool without one (like sky.Local() here) opening is refused, naming
the missing device."""

import os

import skyward as sky


@sky.function
def mps_settings() -> str:
    return os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "")


def main(provider=None) -> None:
    try:
        with sky.Compute(
            provider=provider or sky.Local(), plugins=[sky.plugins.mps(active_thread_percentage=50)],
            options=sky.Options(worker=sky.Worker(concurrency=2)),
        ) as pool:
            print("active thread percentage:", mps_settings() >> pool)
    except ValueError as refused:
        print("refused:", refused)


if __name__ == "__main__":
    main()
