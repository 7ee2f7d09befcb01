"""Every examples/plugins_*.py runs and prints what docs/plugins.md promises.

The framework examples need the ``[plugins]`` extra (torch 2.13 CPU, jax, keras,
scikit-learn, joblib, accelerate): measured on the 2-core CI machine, installing it
into the test venv took ~35 s from pip's cache and the machine's wheel directory
(a few minutes from PyPI) and added ~1.46 GB (torch ~750 MB, jaxlib ~350 MB, scipy
~110 MB). Without it those examples are skipped. The GPU examples (cuml, mig, mps) run
on a local pool, which has no GPU, and must be refused naming the missing device.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
NEEDS = {
    "plugins_torch.py": ("torch",),
    "plugins_jax.py": ("jax",),
    "plugins_keras.py": ("keras", "jax"),
    "plugins_accelerate.py": ("accelerate", "torch"),
    "plugins_joblib.py": ("joblib",),
    "plugins_sklearn.py": ("sklearn",),
}
PROMISES = {
    "plugins_custom.py": [
        "client: pool open on 2 local nodes", "['HELLO FROM NODE 0!', 'HELLO FROM NODE 1!']", "client: pool closing",
    ],
    "plugins_torch.py": ["ranks agree: True"],
    "plugins_jax.py": ["process_count and psum per node: [(2, 3.0), (2, 3.0)]"],
    "plugins_keras.py": ["every node fitted: True"],
    "plugins_accelerate.py": ["[(2, 0, 'MULTI_CPU', 3.0), (2, 1, 'MULTI_CPU', 3.0)]"],
    "plugins_joblib.py": ["squares: [0, 1, 4, 9, 16, 25, 36, 49, 64, 81, 100", "nodes used: [0, 1]"],
    "plugins_sklearn.py": ["same as a local fit: True"],
    "plugins_cuml.py": ["refused: plugins.cuml(cuda='cu12') needs an NVIDIA GPU on every node, but this machine"],
    "plugins_mig.py": ["refused: plugins.mig('3g.40gb') needs an NVIDIA GPU on every node, but this machine"],
    "plugins_mps.py": ["refused: plugins.mps() needs an NVIDIA GPU on every node, but this machine"],
}


def test_every_plugin_example_is_listed() -> None:
    assert sorted(PROMISES) == sorted(p.name for p in (ROOT / "examples").glob("plugins_*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PROMISES))
def test_plugin_example(name: str, tmp_path: Path) -> None:
    missing = [module for module in NEEDS.get(name, ()) if importlib.util.find_spec(module) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}: pip install -e '.[plugins]'")
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    for promise in PROMISES[name]:
        assert promise in done.stdout, f"{name} did not print {promise!r}:\n{done.stdout}"
