"""examples/checkpoint_volume.py runs end to end (two local pools mounting a bucket
folder, writable then read-only): against the local S3 server it starts itself, and
against an endpoint given through the environment. Leaves nothing mounted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from storage_server import MotoServer

from skyward.storage.mount import fuse_tool_available

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "checkpoint_volume.py"
PROMISES = [
    "the head node wrote ['epoch-0.json', 'epoch-1.json', 'epoch-2.json']",
    "a later pool read back {'epoch': 2, 'weights': 1.5}",
    "in the bucket: ['run-42/epoch-0.json', 'run-42/epoch-1.json', 'run-42/epoch-2.json']",
]
_missing = fuse_tool_available()
pytestmark = pytest.mark.skipif(_missing is not None, reason=f"no FUSE mounts here: {_missing}")


def mount_points() -> list[str]:
    with open("/proc/mounts") as mounts:
        return [line.split()[1] for line in mounts]


def run_example(env: dict[str, str], tmp_path: Path) -> str:
    clean = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWS_", "SKYWARD_S3_"))
    }
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**clean, "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1", **env},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    for promise in PROMISES:
        assert promise in done.stdout, f"missing {promise!r} in:\n{done.stdout}"
    folder = re.search(r"^mounting \S+ at (\S+)$", done.stdout, re.M)
    assert folder is not None, done.stdout
    assert folder.group(1) not in mount_points()
    assert not os.path.exists(folder.group(1))
    return done.stdout


def test_example_starts_its_own_server(tmp_path: Path) -> None:
    pytest.importorskip("moto")
    assert "started a local S3 server at http://127.0.0.1:" in run_example({}, tmp_path)


def test_example_uses_the_endpoint_from_the_environment(
    moto_server: MotoServer, bucket: str, tmp_path: Path
) -> None:
    out = run_example(
        {
            "SKYWARD_S3_ENDPOINT": moto_server.endpoint,
            "SKYWARD_S3_BUCKET": bucket,
            "AWS_ACCESS_KEY_ID": moto_server.access_key,
            "AWS_SECRET_ACCESS_KEY": moto_server.secret_key,
        },
        tmp_path,
    )
    assert "started a local S3 server" not in out
