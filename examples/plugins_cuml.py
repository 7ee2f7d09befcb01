"""sky.plugins.cuml: RAPIDS cuML on GPU nodes. Needs NVIDIA GPUs: on a pool without
them (like sky.Local() here) opening is refused, naming the missing device.
Pass an SSH or cloud provider with GPUs to run it for real."""

import skyward as sky


@sky.function
def fit_on_gpu() -> float:
    import cupy
    from cuml.linear_model import LinearRegression

    x = cupy.random.rand(1000, 4)
    y = x @ cupy.array([1.0, 2.0, 3.0, 4.0])
    return float(LinearRegression().fit(x, y).coef_[0])


def main(provider=None) -> None:
    try:
        with sky.Compute(provider=provider or sky.Local(), plugins=[sky.plugins.cuml()]) as pool:
            print("first coefficient:", fit_on_gpu() >> pool)
    except ValueError as refused:
        print("refused:", refused)


if __name__ == "__main__":
    main()
