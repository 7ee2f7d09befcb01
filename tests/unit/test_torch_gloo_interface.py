"""The torch plugin points gloo at the interface the node reaches the rendezvous by
(``GLOO_SOCKET_IFNAME``), unless the user named one: gloo's own choice, the address the
host name resolves to, is a loopback one on many hosts (tests/e2e/ssh/test_original_guides_ssh.py
runs DDP on such hosts)."""

from __future__ import annotations

import os

import psutil
import pytest

from skyward.plugins.torch_group import _gloo_interface


def test_the_interface_holding_the_route_to_the_rendezvous(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "")
    _gloo_interface("127.0.0.1")
    name = os.environ["GLOO_SOCKET_IFNAME"]
    assert any(a.address == "127.0.0.1" for a in psutil.net_if_addrs()[name]), name


def test_a_users_choice_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth7")
    _gloo_interface("127.0.0.1")
    assert os.environ["GLOO_SOCKET_IFNAME"] == "eth7"


def test_an_unresolvable_address_leaves_it_to_gloo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "")
    _gloo_interface("no-such-host.invalid")
    assert os.environ["GLOO_SOCKET_IFNAME"] == ""
