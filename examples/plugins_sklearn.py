"""sky.plugins.sklearn: GridSearchCV(n_jobs=-1) fits on a 2-node local pool, and finds
what a local fit finds. Needs scikit-learn (pip install 'skyward[plugins]').
"""

from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV
from sklearn.svm import SVC

import skyward as sky

GRID = {"C": [0.1, 1, 10], "kernel": ["linear", "rbf"]}


def main() -> None:
    x, y = load_iris(return_X_y=True)
    local = GridSearchCV(SVC(), GRID, cv=3).fit(x, y)
    with sky.Compute(nodes=2, plugins=[sky.plugins.sklearn()]) as pool:
        remote = GridSearchCV(SVC(), GRID, cv=3, n_jobs=-1).fit(x, y)
    print("best params on the pool:", remote.best_params_)
    print("same as a local fit:", remote.best_params_ == local.best_params_)


if __name__ == "__main__":
    main()
