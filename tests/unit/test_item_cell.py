"""The item cell an executor child shares with its agent (``node.item_cell``): what the
child stores, the agent reads, also after the child died."""

from __future__ import annotations

import os
import subprocess
import sys

from skyward.node.item_cell import ItemCell

CHILD = """
import os, sys
from skyward.node.item_cell import ItemCell
cell = ItemCell(int(sys.argv[1]))
for index in range(7):
    cell.setter()(index)
os._exit(3)  # dies without a word, as a crashing task does
"""


def test_a_child_stores_the_index_and_the_agent_reads_it_after_the_child_died() -> None:
    cell, fd = ItemCell.create()
    try:
        cell.set(0)
        child = subprocess.run([sys.executable, "-c", CHILD, str(fd)], pass_fds=(fd,),
                               env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=60, check=False)
    finally:
        os.close(fd)
    assert child.returncode == 3
    assert cell.get() == 6


def test_the_cell_has_no_name_and_is_this_users_alone() -> None:
    cell, fd = ItemCell.create()
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
        assert target.endswith("(deleted)"), target
        assert os.fstat(fd).st_mode & 0o077 == 0
    finally:
        os.close(fd)
    cell.setter()(5)
    assert cell.get() == 5
