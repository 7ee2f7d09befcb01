"""sky.plugins.keras: Keras 3 on the jax backend fits a tiny model on every node.

Needs keras and jax (pip install 'skyward[plugins]').
"""

import skyward as sky


@sky.function
def fit() -> tuple[str, float]:
    import keras
    import numpy as np

    x = np.linspace(-1, 1, 64, dtype="float32").reshape(-1, 1)
    y = 3 * x + 1
    keras.utils.set_random_seed(sky.instance_info().node)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    history = model.fit(x, y, epochs=30, verbose=0)
    return keras.backend.backend(), round(float(history.history["loss"][-1]), 4)


def main() -> None:
    with sky.Compute(nodes=2, plugins=[sky.plugins.keras(backend="jax")]) as pool:
        results = fit() @ pool
    print("backend and final loss per node:", results)
    print("every node fitted:", all(backend == "jax" and loss < 0.01 for backend, loss in results))


if __name__ == "__main__":
    main()
