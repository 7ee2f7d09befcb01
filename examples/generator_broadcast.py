"""Generator broadcast: a generator function sent to every node streams from each.

`counter(3) @ compute` returns one iterator per node, in node order, each yielding that
node's values as the node produces them. In a group (`&`, `sky.gather`) a generator's
place holds its iterator, next to the other calls' results.

Written as the original project's streaming-broadcast guide is; only the provider line
differs (a local 4-node pool here). Run it with `python examples/generator_broadcast.py`.
"""

import skyward as sky


@sky.function
def counter(n):
    yield from range(n)


@sky.function
def add(a, b):
    return a + b


@sky.function
def progress(steps):
    """Reports each step of this node's share of the work as it finishes."""
    info = sky.instance_info()
    for step in range(steps):
        yield {"node": info.node, "step": step, "of": steps}


if __name__ == "__main__":
    with sky.Compute(provider=sky.Local(), nodes=4) as compute:
        results = counter(3) @ compute
        for node, stream in enumerate(results):
            print(f"node {node}: {list(stream)}")

        gen_result, sum_result = (counter(3) & add(1, 2)) >> compute
        print("counter(3) & add(1, 2) ->", list(gen_result), sum_result)

        for stream in progress(2) @ compute:
            for update in stream:
                print(f"  node {update['node']}: step {update['step'] + 1}/{update['of']}")
