"""A script's functions on a real local pool, shipped to each node once
(skyward/engine/shipping.py): results follow every rebinding and in-place change, a
function writing a global starts from the client's value on each call, and a node that
lost what it was sent (its store emptied, as a replaced agent's is) gets the function
again in full through the driver, with no error seen by the caller."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent('''
    import skyward as sky

    SCALE = 3
    ITEMS = [1, 2]
    COUNT = 0

    def scaled(x):
        return x * SCALE

    def counts_items(_):
        return len(ITEMS)

    @sky.function
    def writes_a_global():
        global COUNT
        COUNT += 1
        return COUNT

    @sky.function
    def held():
        from skyward.engine import shipping
        return len(shipping._received)

    @sky.function
    def drop_held():
        from skyward.engine import shipping
        shipping._received.clear()

    if __name__ == "__main__":
        with sky.Compute(nodes=2, options=sky.Options(console=False, logging=False)) as pool:
            assert pool.map(scaled, range(40)) == [3 * x for x in range(40)]
            assert held() @ pool == [1, 1], "each node holds the one function a map sent it"
            SCALE = 4
            assert pool.map(scaled, range(40)) == [4 * x for x in range(40)], "a rebound global is seen"
            assert pool.map(counts_items, range(4)) == [2] * 4
            ITEMS.append(3)
            assert pool.map(counts_items, range(4)) == [3] * 4, "a change in place is seen"
            assert [writes_a_global() >> pool for _ in range(4)] == [1] * 4
            drop_held() @ pool
            assert [sky.function(scaled)(1) >> pool for _ in range(4)] == [4] * 4, "a node that lost it gets it again"
            assert held() @ pool == [1, 1]
        print("shipped once, right every time")
''')


def test_a_scripts_functions_are_shipped_once_and_stay_right(tmp_path: Path) -> None:
    script = tmp_path / "shipping_script.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "shipped once, right every time" in done.stdout
