"""Write the instance types of skyward's AWS price snapshot from moto's copy of EC2's
``DescribeInstanceTypes`` answers (``moto/ec2/resources/instance_types.json.gz``, which
moto's maintainers fetch from AWS), parsed as ``skyward.providers.aws.catalog`` parses a
live answer. Only the types the snapshot prices are kept; a priced type moto does not
describe (EC2 retired it) is named in ``types_about`` and not offered from the snapshot.

    .venv/bin/python scripts/aws_type_snapshot.py          # rewrite the "types" section
    .venv/bin/python scripts/aws_type_snapshot.py --check  # exit 1 if it differs

``tests/unit/test_aws_snapshot.py`` runs the check.
"""

from __future__ import annotations

import gzip
import json
import sys
from dataclasses import asdict
from importlib import resources
from typing import Any

import moto

from skyward.providers.aws.catalog import parse_type
from skyward.providers.aws.prices import SNAPSHOT


def described() -> dict[str, Any]:
    """moto's DescribeInstanceTypes entries by type."""
    path = resources.files("moto.ec2") / "resources" / "instance_types.json.gz"
    with gzip.open(str(path), "rt", encoding="utf-8") as file:
        found: dict[str, Any] = json.load(file)
    return found


def types(snapshot: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The priced types of ``snapshot`` that moto describes, as the snapshot holds them,
    by name; and the priced types it does not describe."""
    priced = sorted({name for region in snapshot["ondemand"].values() for name in region})
    entries = described()
    missing = [name for name in priced if name not in entries]
    return [asdict(parse_type(entries[name])) for name in priced if name in entries], missing


def main(argv: list[str]) -> int:
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    wanted, missing = types(snapshot)
    if "--check" in argv:
        if snapshot.get("types") != wanted:
            print(f"{SNAPSHOT}: its types differ from moto {moto.__version__}'s; run {__file__}", file=sys.stderr)
            return 1
        return 0
    snapshot["types"] = wanted
    snapshot["types_about"] = (
        "The priced instance types' vCPUs, memory, architecture and accelerators, from EC2's "
        "DescribeInstanceTypes answers as moto "
        f"{moto.__version__} ships them (moto/ec2/resources/instance_types.json.gz), written by "
        "scripts/aws_type_snapshot.py. Used with the prices above by `sky offers` on a machine "
        "with no cloud credentials."
        + (f" Priced but not described there, so not offered from the snapshot: {', '.join(missing)}." if missing else "")
    )
    SNAPSHOT.write_text(json.dumps(snapshot, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
