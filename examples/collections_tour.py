"""Distributed collections: every example of the reference documents, on a local pool.

Run it with `.venv/bin/python examples/collections_tour.py`. The provider is sky.Local()
instead of a cloud; the helpers the documents leave to you (compute_embedding,
train_one_epoch, evaluate, save_progress, ...) are small stand-ins defined here.
"""

from __future__ import annotations

import asyncio

import skyward as sky


def compute_embedding(item: str) -> list[float]:
    return [float(len(item)), float(sum(map(ord, item)) % 97)]


def train_one_epoch(epoch: int) -> float:
    return 1.0 / (epoch + 1 + sky.instance_info().node)


def evaluate(step: int) -> float:
    return abs(step - 7) / 10


def save_progress() -> None:
    sky.counter("saves").increment()


def do_part_one() -> None:
    sky.counter("part_one", consistency="strong").increment()


def do_part_two() -> int:
    return sky.counter("part_one", consistency="strong").value


# ----------------------------------------------------------------- dict


@sky.function
def process_with_cache(items: list[str]) -> dict:
    cache = sky.dict("embeddings")
    info = sky.instance_info()

    for item in sky.shard(items):
        if item in cache:
            result = cache[item]
        else:
            result = compute_embedding(item)
            cache[item] = result

    return {"node": info.node, "processed": len(items)}


# ----------------------------------------------------------------- counter


@sky.function
def train_step(batch) -> dict:
    progress = sky.counter("global_steps")
    progress.increment()
    return {"step": int(progress)}


# ----------------------------------------------------------------- set


@sky.function
def deduplicate(batch_id: int) -> str:
    seen = sky.set("processed_batches")
    key = f"batch:{batch_id}"

    if key in seen:
        return "skipped"

    seen.add(key)
    return "processed"


# ----------------------------------------------------------------- queue


@sky.function
def producer(tasks: list[int]):
    queue = sky.queue("work")
    info = sky.instance_info()
    if info.is_head:
        for task in tasks:
            queue.put(task)


@sky.function
def worker() -> list:
    queue = sky.queue("work")
    results = []
    while True:
        task = queue.get(timeout=0.5)
        if task is None:
            break
        results.append(task * 2)
    return results


# ----------------------------------------------------------------- barrier


@sky.function
def synchronized_epoch(epoch: int) -> dict:
    info = sky.instance_info()
    sync = sky.barrier("epoch_sync", n=info.total_nodes)

    loss = train_one_epoch(epoch)
    sync.wait()  # all nodes reach here before continuing

    return {"node": info.node, "loss": loss}


@sky.function
def phased():
    b = sky.barrier("sync", n=4)
    do_part_one()
    b.wait()  # blocks until all 4 nodes arrive
    return do_part_two()


# ----------------------------------------------------------------- lock


@sky.function
def safe_checkpoint(step: int) -> bool:
    lock = sky.lock("checkpoint_lock")
    state = sky.dict("checkpoint")

    with lock:
        current_best = state.get("best_loss", float("inf"))
        my_loss = evaluate(step)
        if my_loss < current_best:
            state["best_loss"] = my_loss
            state["best_step"] = step
            return True
    return False


@sky.function
def checkpoint_worker(item):
    processed = sky.counter("processed")
    seen = sky.set("seen")
    if item in seen:
        return None
    seen.add(item)
    processed.increment()
    with sky.lock("checkpoint"):
        save_progress()
    return item


# ----------------------------------------------------------------- consistency, async


@sky.function
def consistency_levels() -> tuple:
    cache = sky.dict("cache")  # default: eventual consistency (faster)
    strong = sky.dict("cache", consistency="strong")  # strong (always up-to-date)
    cache["seen-by"] = sky.instance_info().node
    return cache.consistency, strong.consistency


@sky.function
def async_interface(key: str) -> tuple:
    async def main() -> tuple:
        cache = sky.dict("async-cache")
        counter = sky.counter("async-counter")
        queue = sky.queue("async-queue")
        lock = sky.lock("async-lock")
        await cache.set_async(key, 42)
        value = await cache.get_async(key)
        await counter.increment_async()
        await queue.put_async(value)
        acquired = await lock.acquire_async()
        await lock.release_async()
        return value, acquired

    return asyncio.run(main())


def tour(pool: sky.Pool) -> dict:
    """Run every example on ``pool`` (4 nodes) and return what each gave."""
    items = [f"item-{i}" for i in range(40)]
    found: dict = {}
    found["cache"] = process_with_cache(items) @ pool
    found["embeddings"] = pool.dict("embeddings").get("item-3")  # eventual: may not be there yet
    found["steps"] = sorted(r["step"] for r in pool.map(train_step, range(8)))
    found["dedup"] = [deduplicate(i % 5) >> pool for i in range(10)]
    producer(list(range(20))) @ pool
    found["queue"] = sorted(x for part in worker() @ pool for x in part)
    found["epochs"] = [synchronized_epoch(epoch) @ pool for epoch in range(3)]
    found["phased"] = phased() @ pool
    found["checkpoint"] = [safe_checkpoint(step) >> pool for step in (12, 3, 9, 7, 8)]
    found["best"] = (pool.dict("checkpoint")["best_loss"], pool.dict("checkpoint")["best_step"])
    found["workers"] = sorted(x for x in pool.map(checkpoint_worker, [1, 2, 2, 3, 3, 3]) if x is not None)
    found["consistency"] = consistency_levels() >> pool
    found["async"] = async_interface("k") >> pool
    return found


def main() -> None:
    with sky.Compute(nodes=4, options=sky.Options(console=False)) as pool:
        for name, value in tour(pool).items():
            print(f"{name:12} {value}")


if __name__ == "__main__":
    main()
