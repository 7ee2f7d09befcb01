"""SSH failures are clear errors: wrong key, unreachable host, changed host key, a
failing bootstrap step; a client killed with SIGKILL leaves nothing behind after ttl."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import asyncssh
import pytest
from conftest import QUIET, ssh_provider
from hosts import HostLab

import skyward as sky


def test_wrong_key_is_a_clear_auth_error(lab: HostLab, tmp_path: os.PathLike[str]) -> None:
    other = os.path.join(tmp_path, "other_key")
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(other)
    provider = ssh_provider(lab, hosts=lab.strings()[:1], key_path=other)
    with pytest.raises(ConnectionError, match="refused.*other_key.*authorized_keys"):
        with sky.Compute(provider=provider, nodes=1, options=QUIET):
            pass


def test_unreachable_host_fails_within_the_ssh_timeout(lab: HostLab) -> None:
    nowhere = lab.hosts[0].address.rsplit(".", 1)[0] + ".200"  # in the lab's subnet, no host
    provider = ssh_provider(lab, hosts=[f"root@{nowhere}:22"])
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=f"cannot reach root@{nowhere}:22 over SSH within 3s"):
        with sky.Compute(provider=provider, nodes=1, options=QUIET.with_(ssh_timeout=3)):
            pass
    assert time.monotonic() - started < 10


def test_changed_host_key_is_refused(lab: HostLab, tmp_path: os.PathLike[str]) -> None:
    known = os.path.join(tmp_path, "known_hosts")
    impostor = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    with open(known, "w") as f:
        f.write(f"{lab.hosts[0].address} {impostor}\n")
    provider = ssh_provider(lab, hosts=lab.strings()[:1], known_hosts=known)
    with pytest.raises(ConnectionError, match="host key of root@.* changed.*refusing"):
        with sky.Compute(provider=provider, nodes=1, options=QUIET):
            pass


def test_first_connection_records_the_host_key(lab: HostLab, tmp_path: os.PathLike[str]) -> None:
    known = os.path.join(tmp_path, "known_hosts")
    key = os.path.join(tmp_path, "k")
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(key)
    provider = ssh_provider(lab, hosts=lab.strings()[:1], known_hosts=known, key_path=key)
    with pytest.raises(ConnectionError):  # the key is refused, but the host key was seen
        with sky.Compute(provider=provider, nodes=1, options=QUIET):
            pass
    with open(known) as f:
        assert f.read().startswith(f"{lab.hosts[0].address} ssh-ed25519 ")


def test_failing_bootstrap_step_shows_command_and_output(lab: HostLab, index: str) -> None:
    image = sky.Image(
        pip=["no-such-package-skyward-test"],
        pip_indexes=[sky.PipIndex(index, packages=["no-such-package-skyward-test"])],
    )
    provider = ssh_provider(lab, hosts=lab.strings()[:1])
    with pytest.raises(RuntimeError) as failure:
        with sky.Compute(provider=provider, nodes=1, image=image, options=QUIET):
            pass
    message = str(failure.value)
    assert "failed in phase 'pip'" in message
    assert "uv pip install" in message and "no-such-package-skyward-test" in message
    assert "Output:\n" in message and "error" in message.split("Output:\n", 1)[1].lower()


@pytest.mark.slow
def test_client_killed_nodes_clean_up_after_ttl(lab: HostLab) -> None:
    script = textwrap.dedent(f"""
        import time
        import skyward as sky
        provider = sky.SSH(hosts={lab.strings()!r}, key_path={lab.client_key!r}, known_hosts={lab.known_hosts!r})
        pool = sky.Compute(provider=provider, nodes=3, ttl=3, options=sky.Options(console=False, logging=False))
        pool.open()
        print("OPEN", pool.id, flush=True)
        time.sleep(600)
    """)
    before = {pid for host in lab.hosts for pid in host.pids()}
    client = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = client.stdout.readline() if client.stdout else ""
        assert line.startswith("OPEN"), line
        pool_id = line.split()[1]
        assert lab.processes_naming(f"skyward-{pool_id[:12]}")
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=10)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            started = {pid for pids in lab.leftovers().values() for pid in pids} - before
            dirs = [n for h in lab.hosts for n in os.listdir(h.private("/tmp")) if pool_id[:12] in n]
            if not started and not dirs:
                break
            time.sleep(0.5)
        assert not started, f"still running after ttl: {started}"
        assert not dirs, f"pool files left: {dirs}"
    finally:
        if client.poll() is None:
            client.kill()
