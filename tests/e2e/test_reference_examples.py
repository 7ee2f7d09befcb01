"""The examples of the reference documents that need no cloud, with the provider
swapped for sky.Local() (collections examples live in test_collections*)."""

from __future__ import annotations

import numpy as np

import skyward as sky

QUIET = sky.Options(console=False, logging=False)


@sky.function
def work(x):
    return x * 2


@sky.function
def process_partition(data: list[int]) -> dict:
    info = sky.instance_info()
    assert info is not None
    local_data = sky.shard(data)
    return {"node": info.node, "size": len(local_data), "sum": sum(local_data)}


@sky.function
def step(batch):
    info = sky.instance_info()
    if sky.is_head(info):
        print(f"node {info.node}/{info.total_nodes}")
    return sum(batch)


@sky.function
def train_shard(dataset):
    my_part = sky.shard(dataset, shuffle=True, seed=42)
    return sorted(my_part)


@sky.function
def process(x_full, y_full):
    x_local, y_local = sky.shard(x_full, y_full, shuffle=True, seed=42)
    return (x_local * 10 == y_local).all(), len(x_local)


@sky.compute
def add(a: int, b: int) -> int:
    return a + b


def test_cheat_sheet() -> None:
    with sky.Compute(provider=sky.Local(), nodes=4, options=QUIET) as pool:
        a = work(10) >> pool
        everyone = work(10) @ pool
        x, y = (work(1) & work(2)) >> pool
        fut = work(10) > pool
        val = fut.result()
        results = pool.map(work, [1, 2, 3, 4])
        n = pool.current_nodes()
    assert (a, everyone, (x, y), val, results, n) == (20, [20] * 4, (2, 4), 20, [2, 4, 6, 8], 4)


def test_broadcast_guide_map_reduce() -> None:
    with sky.Compute(provider=sky.Local(), nodes=4, options=QUIET) as compute:
        data = list(range(1000))
        results = process_partition(data) @ compute
    assert [r["node"] for r in results] == [0, 1, 2, 3]
    assert sum(r["sum"] for r in results) == sum(data)
    assert sum(r["size"] for r in results) == 1000


def test_runtime_examples() -> None:
    with sky.Compute(nodes=4, options=QUIET) as pool:
        assert step([1, 2, 3]) @ pool == [6] * 4
        parts = train_shard(list(range(100))) @ pool
        assert sorted(v for part in parts for v in part) == list(range(100))
        x = np.arange(40)
        outcomes = process(x, x * 10) @ pool
        assert all(ok for ok, _ in outcomes) and sum(size for _, size in outcomes) == 40
        r1, r2, r3 = sky.gather(add(1, 2), add(3, 4), add(5, 6)) >> pool
        assert (r1, r2, r3) == (3, 7, 11)
        streamed = list(sky.gather(add(1, 1), add(2, 2), stream=True) >> pool)
        assert streamed == [2, 4]
        assert pool.run(work(1), target="head") == 2 and pool.run(work(1), target=2) == 2
        assert work(21).with_timeout(600) >> pool == 42


def test_instance_info_fields() -> None:
    @sky.function
    def describe() -> dict:
        info = sky.instance_info()
        return {
            "node": info.node, "worker": info.worker, "total_nodes": info.total_nodes,
            "workers_per_node": info.workers_per_node, "accelerators": info.accelerators,
            "total_accelerators": info.total_accelerators, "head_addr": info.head_addr,
            "head_port": info.head_port, "job_id": info.job_id,
            "peers": [(p.node, p.private_ip) for p in info.peers], "accelerator": info.accelerator,
            "interface": info.network.interface, "global": info.global_worker_index,
            "total_workers": info.total_workers, "is_head": info.is_head, "hostname": info.hostname,
        }

    with sky.Compute(nodes=2, options=QUIET) as pool:
        first, second = describe() @ pool
    assert (first["node"], second["node"]) == (0, 1)
    assert first["is_head"] and not second["is_head"]
    assert first["total_nodes"] == 2 and first["workers_per_node"] == 1 and first["total_workers"] == 2
    assert first["global"] == 0 and second["global"] == 1 and first["worker"] == 0
    assert first["head_addr"] == "127.0.0.1" and first["head_port"] > 0
    assert first["job_id"] == second["job_id"] == pool.id
    assert first["peers"] == [(0, "127.0.0.1"), (1, "127.0.0.1")]
    assert first["accelerator"] is None and first["accelerators"] == 0.0 and first["total_accelerators"] == 0.0
    assert first["interface"] == "lo" and first["hostname"]


def test_old_reference_pool_decorator_and_multipool() -> None:
    @sky.pool(provider=sky.Local(), nodes=2, display="quiet")
    def main():
        r1, r2 = sky.gather(add(1, 2), add(3, 4)) >> sky
        return (add(1, 1) >> sky, add(2, 2) @ sky, (r1, r2))

    assert main() == (2, [4, 4], (3, 7))
    with sky.MultiPool(
        sky.ComputePool(provider=sky.Local(), display="quiet"),
        sky.ComputePool(provider=sky.Local(), nodes=2, display="quiet"),
    ) as (small, large):
        assert add(1, 2) >> small == 3
        assert add(1, 2) @ large == [3, 3]
