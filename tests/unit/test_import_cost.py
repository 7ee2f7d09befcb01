"""``import skyward`` loads no engine: Ray is imported when the first pool opens (issue 17,
import ≤ 0.3 s; the time itself is measured in benchmarks/, B4-import)."""

from __future__ import annotations

import subprocess
import sys


def test_importing_skyward_does_not_import_ray() -> None:
    code = "import sys, skyward; print(sorted(m for m in ('ray', 'boto3', 'asyncssh') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert "ray" not in loaded.stdout, loaded.stdout


def test_the_storage_package_imports_a_module_on_the_first_use_of_its_names() -> None:
    code = (
        "import sys, skyward.storage as storage\n"
        "before = sorted(m for m in sys.modules if m.startswith('skyward.storage.'))\n"
        "assert storage.S3.__module__ == 'skyward.storage.presets'\n"
        "assert sorted(storage.__all__) == storage.__all__ and 'Volume' in storage.__all__\n"
        "print(before, 'skyward.storage.presets' in sys.modules)"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert loaded.stdout.strip() == "[] True", loaded.stdout
