"""sky.plugins.torch: DistributedDataParallel over a 2-node local pool (gloo on CPU).

The plugin forms torch.distributed's default group on every node before any task runs
(gloo on CPU nodes, nccl on CUDA nodes) and destroys it when the pool closes, so the task
goes straight to DistributedDataParallel. Every rank ends with the same weights.
Needs torch (pip install 'skyward[plugins]').
"""

import skyward as sky


@sky.function
def train(steps: int) -> list[float]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    assert dist.is_initialized()  # formed by the plugin: no init_process_group() needed
    torch.manual_seed(sky.instance_info().node)  # each rank starts differently; DDP syncs them
    model = DistributedDataParallel(torch.nn.Linear(3, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 3, generator=torch.Generator().manual_seed(0))
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]])
    mine_x, mine_y = sky.shard(x, y)  # this rank's half of the data
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(mine_x), mine_y).backward()
        optimizer.step()
    return [round(w, 4) for w in model.module.weight.detach().flatten().tolist()]


def main() -> None:
    with sky.Compute(nodes=2, plugins=[sky.plugins.torch()]) as pool:
        per_rank = train(100) @ pool
    print("weights per rank:", per_rank)
    print("ranks agree:", per_rank[0] == per_rank[1])


if __name__ == "__main__":
    main()
