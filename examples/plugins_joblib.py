"""sky.plugins.joblib: joblib.Parallel(n_jobs=-1) fans out over a 2-node local pool.

Needs joblib (pip install 'skyward[plugins]').
"""

from joblib import Parallel, delayed

import skyward as sky


def where(x: int) -> tuple[int, int]:
    return x * x, sky.instance_info().node


def main() -> None:
    with sky.Compute(nodes=2, plugins=[sky.plugins.joblib()]) as pool:
        results = Parallel(n_jobs=-1, batch_size=2)(delayed(where)(i) for i in range(20))
    print("squares:", [square for square, _ in results])
    print("nodes used:", sorted({node for _, node in results}))


if __name__ == "__main__":
    main()
