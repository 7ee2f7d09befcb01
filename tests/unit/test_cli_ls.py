"""``sky ls`` fits 80 columns: a pool of a cloud region, kept and in use, is one line."""

from __future__ import annotations

import io
import time

from rich.console import Console

from skyward.cli import output, pools
from skyward.providers.daemon_client import KeptPoolState
from skyward.providers.registry import LivePool, NodeRecord


def test_a_kept_cloud_pool_in_use_fits_80_columns(monkeypatch: object) -> None:
    now = time.time()
    nodes = tuple(NodeRecord(str(i), f"10.0.0.{i}", "g5.12xlarge", 1.6344, True) for i in range(16))
    pool = LivePool("a1b2c3d4e5f6a7b8", "aws", "ap-southeast-2", 4242424, "host", now - 7300, "pool-a1b2c3d4", nodes,
                    keep_alive=600.0)
    kept = {pool.pool_id: KeptPoolState("pool-a1b2c3d4", pool.pool_id, 16, 600.0, 4242425, 0.0, now - 7300, b"", 4242424)}
    screen = io.StringIO()
    monkeypatch.setattr(output, "console", Console(file=screen, width=80, soft_wrap=True))  # type: ignore[attr-defined]
    output.table("open pools", pools.LS_COLUMNS, [pools._row(pool, kept, now)])
    lines = screen.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80, lines
    [row] = [line for line in lines if "pool-a1b2c3d4" in line]
    assert "aws/ap-southeast-2" in row and "kept: pid 4242425" in row and "2h01m" in row, row
