"""What a user reads when their code fails: the task's traceback from their own function
down, their line that sent it, and the message; none of skyward's frames (one line says
how to see them: ``SKYWARD_TRACEBACK=full``). A cloud without credentials ends in its
one-line message, not the cloud library's frames."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import skyward

SKYWARD = os.path.dirname(os.path.abspath(skyward.__file__))
FAILS = """
import skyward as sky

@sky.function
def outer(x):
    return inner(x)

def inner(x):
    return 1 / x

with sky.Compute(nodes=1, console=False, logging=False) as pool:
    outer(0) >> pool
"""
NO_CREDENTIALS = """
import skyward as sky

with sky.Compute(provider=sky.AWS(), nodes=1, console=False, logging=False) as pool:
    pass
"""


def ours(text: str) -> list[str]:
    """The frames of skyward's files in a printed traceback, but the one that says how to
    see the rest."""
    return [line for line in re.findall(r'File "([^"]+)", line \d+', text) if line.startswith(SKYWARD)
            and not line.endswith(os.path.join("core", "frames.py"))]


def run(script: str, tmp_path: Path, env: dict[str, str]) -> str:
    (tmp_path / "script.py").write_text(script)
    done = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stderr


def test_a_failed_task_shows_the_users_frames_only(sandbox: dict, tmp_path: Path) -> None:
    shown = run(FAILS, tmp_path, sandbox["env"])
    assert ours(shown) == [], shown
    assert "in outer" in shown and "in inner" in shown and "return 1 / x" in shown, shown
    assert "outer(0) >> pool" in shown and shown.rstrip().endswith("raised on node 0 while running outer"), shown
    assert "SKYWARD_TRACEBACK=full" in shown, shown

    full = run(FAILS, tmp_path, {**sandbox["env"], "SKYWARD_TRACEBACK": "full"})
    assert any(path.endswith("driver.py") for path in ours(full)), full
    assert any(path.endswith("execution.py") for path in ours(full)), full


def test_a_cloud_without_credentials_ends_in_its_message(sandbox: dict, tmp_path: Path) -> None:
    env = {key: value for key, value in sandbox["env"].items() if not key.startswith("AWS_")}
    env.update(AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true", AWS_DEFAULT_REGION="us-east-1")
    shown = run(NO_CREDENTIALS, tmp_path, env)
    assert ours(shown) == [] and "botocore" not in shown, shown
    assert shown.rstrip().splitlines()[-1].startswith("skyward.providers.aws.session.AWSError: AWS credentials were not found")
    assert len(shown.splitlines()) < 10, shown
