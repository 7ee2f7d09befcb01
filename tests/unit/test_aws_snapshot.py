"""The instance types of skyward's AWS price snapshot (what `sky offers` lists with no
credentials) are EC2's own descriptions of them, as moto ships EC2's
``DescribeInstanceTypes`` answers: a type or a figure edited by hand fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from skyward.providers.aws.prices import snapshot, snapshot_types

ROOT = Path(__file__).resolve().parents[2]


def test_the_snapshot_types_are_ec2s_descriptions() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "aws_type_snapshot.py"), "--check"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_every_described_type_is_priced_in_every_region_of_the_snapshot() -> None:
    date, regions = snapshot()
    described = {kind.name for kind in snapshot_types()}
    assert described and date
    for region, priced in regions.items():
        assert described <= set(priced), f"{region} has no price for {sorted(described - set(priced))}"
    p4d = next(kind for kind in snapshot_types() if kind.name == "p4d.24xlarge")
    assert (p4d.accelerator, p4d.accelerator_count, p4d.accelerator_memory_gb, p4d.vcpus) == ("A100", 8, 40.0, 96)
