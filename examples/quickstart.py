"""Quickstart: every dispatch operator on a local 4-node pool.

Run it with `bash scripts/quickstart.sh` (sets up .venv), or `python examples/quickstart.py`.
"""

import skyward as sky


@sky.function
def square(x: int) -> int:
    return x * x


@sky.function
def whoami() -> str:
    info = sky.instance_info()
    return f"node {info.node} of {info.total_nodes} (head: {info.is_head})"


@sky.function
def partial_sum(numbers: list[int]) -> dict:
    mine = sky.shard(numbers)  # this node's slice: numbers[node::total_nodes]
    print(f"summing {len(mine)} numbers")
    return {"node": sky.instance_info().node, "sum": sum(mine)}


def main() -> None:
    with sky.Compute(nodes=4) as pool:
        print("square(7) >> pool            =", square(7) >> pool)
        print("whoami() @ pool              =", whoami() @ pool)

        a, b = (square(3) & square(4)) >> pool
        print("(square(3) & square(4)) >> pool =", (a, b))

        future = square(12) > pool
        print("(square(12) > pool).result() =", future.result())

        print("pool.map(square, range(10))  =", pool.map(square, range(10)))

        print("gather(..., stream=True) yields as each finishes:")
        for result in sky.gather(*(square(n) for n in range(1, 5)), stream=True) >> pool:
            print("   ", result)

        numbers = list(range(1, 101))
        parts = partial_sum(numbers) @ pool
        total = sum(part["sum"] for part in parts)
        print(f"sharded sum over {len(parts)} nodes = {total} (expected {sum(numbers)})")


if __name__ == "__main__":
    main()
