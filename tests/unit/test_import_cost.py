"""``import skyward`` loads no engine: Ray is imported when the first pool opens (issue 17,
import ≤ 0.3 s; the time itself is measured in benchmarks/, B4-import)."""

from __future__ import annotations

import subprocess
import sys


def test_importing_skyward_does_not_import_ray() -> None:
    code = "import sys, skyward; print(sorted(m for m in ('ray', 'boto3', 'asyncssh') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert "ray" not in loaded.stdout, loaded.stdout
