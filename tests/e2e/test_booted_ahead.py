"""What an SSH pool's open begins before it can finish it (providers/ssh/cluster.py): the
joining hosts' ``ray start`` and the head relay boot while the head's Ray starts, then
wait on stdin for the head's address and the relay's config. Each ends, starting nothing,
when its stdin ends first (the open failed meanwhile): nothing is left waiting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from skyward.providers import ray_start


def _ended(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, input="", capture_output=True, text=True, timeout=60, check=False)


def test_a_joining_ray_start_whose_address_never_comes_ends(tmp_path: Path) -> None:
    done = _ended([
        sys.executable, "-m", "skyward.providers.ray_start", "start", ray_start.ADDRESS_ON_STDIN,
        f"--temp-dir={tmp_path / 'ray'}", "--disable-usage-stats",
    ])
    assert done.returncode == 1, done
    assert "stdin ended before the GCS address for --address=- came" in done.stderr
    assert not (tmp_path / "ray").exists()  # Ray started nothing


def test_a_head_relay_whose_config_never_comes_ends(tmp_path: Path) -> None:
    done = _ended([sys.executable, "-m", "skyward.providers.ssh.head_relay", str(tmp_path)])
    assert done.returncode == 1, done
    assert "stdin ended before its config came" in done.stderr
    assert list(tmp_path.iterdir()) == []
