"""sky.plugins.accelerate: Hugging Face Accelerate spans a 2-node local pool (MULTI_CPU, gloo).

The plugin gives every worker what `accelerate launch` would (one process per worker) and
forms torch.distributed's group, so Accelerator() sees 2 processes. Needs accelerate and
torch (pip install 'skyward[plugins]').
"""

import skyward as sky


@sky.function
def reduce_ranks() -> tuple[int, int, str, float]:
    import torch
    from accelerate import Accelerator

    accelerator = Accelerator()
    total = accelerator.reduce(torch.tensor([accelerator.process_index + 1.0]), reduction="sum")
    return accelerator.num_processes, accelerator.process_index, accelerator.distributed_type.value, float(total[0])


def main() -> None:
    with sky.Compute(nodes=2, plugins=[sky.plugins.accelerate({"mixed_precision": "no"})]) as pool:
        results = reduce_ranks() @ pool
    print("processes, index, type, sum of ranks+1:", results)


if __name__ == "__main__":
    main()
