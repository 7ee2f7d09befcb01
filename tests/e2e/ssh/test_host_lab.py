"""The test hosts themselves (tests/hosts.py): a lab whose process was killed before it
could close it leaves nothing behind once the next lab starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from hosts import LAB_DIR, HostLab, available

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STARTS_A_LAB = """
import sys, time
from hosts import HostLab
lab = HostLab.start(1)
print(lab.tag, lab.root, lab.hosts[0].netns, lab.bridge, flush=True)
time.sleep(600)
"""


def test_a_lab_whose_process_was_killed_is_taken_away_by_the_next() -> None:
    reason = available()
    if reason is not None:
        pytest.skip(reason)
    owner = subprocess.Popen(
        [sys.executable, "-c", STARTS_A_LAB], cwd=TESTS, env={**os.environ, "PYTHONPATH": TESTS},
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert owner.stdout is not None
        _, root, netns, bridge = owner.stdout.readline().split()
    finally:
        owner.send_signal(signal.SIGKILL)  # no close(): its namespace, sshd and files stay
        owner.wait(timeout=30)
    assert netns in _namespaces() and os.path.isdir(root)
    assert _pids_in(netns), "the killed lab's sshd should still run"
    with HostLab.start(1) as lab:
        assert netns not in _namespaces(), "the killed lab's namespace is still there"
        assert not os.path.exists(root) and os.path.dirname(root) == LAB_DIR
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
        assert f" {bridge}:" not in links, "the killed lab's bridge is still there"
        assert lab.root != root and os.path.isdir(lab.root)  # a live lab is left alone: its own
        with HostLab.start(1) as second:
            assert os.path.isdir(lab.root) and lab.hosts[0].netns in _namespaces(), "a live lab was taken away"
            assert second.root != lab.root


def _namespaces() -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def _pids_in(netns: str) -> list[str]:
    return subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split()
