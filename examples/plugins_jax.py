"""sky.plugins.jax: jax.distributed across a 2-node local pool; a psum over all processes.

Needs jax (pip install 'skyward[plugins]').
"""

import skyward as sky


@sky.function
def global_sum() -> tuple[int, float]:
    import jax
    import jax.numpy as jnp

    mine = jnp.array([sky.instance_info().node + 1.0])  # node 0 holds 1, node 1 holds 2
    summed = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(mine)
    return jax.process_count(), float(summed[0])


def main() -> None:
    with sky.Compute(nodes=2, plugins=[sky.plugins.jax()]) as pool:
        results = global_sum() @ pool
    print("process_count and psum per node:", results)


if __name__ == "__main__":
    main()
