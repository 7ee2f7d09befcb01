"""Operations on strong collections written down as they happen, and read back as the
histories tests/history.py checks.

``operate`` runs random operations on one counter and two keys of one dict, writing a
line to its own log when each is invoked and another when it completes (a file per
process, so a killed or cut-off process's operations survive it: those with no
completion line are of unknown outcome). ``histories`` reads every log of a directory
back into the counter's history and each key's. Times are ``time.monotonic()``: one
clock for every process of this machine, the host lab's namespaces included.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from history import Op

import skyward as sky

KEYS = ("k0", "k1")


def operate(name: str, process: str, count: int, seed: int, log: str, consistency: str = "strong",
            pause: float = 0.0) -> int:
    """``count`` random operations on the counter and dict ``name`` (``pause`` seconds
    apart), each written to ``log`` when invoked and when it completes; an operation
    that raises ends the run with its line left unfinished (unknown outcome)."""
    rng = random.Random(seed)
    counter = sky.counter(name, consistency=consistency)
    table = sky.dict(name, consistency=consistency)
    with open(log, "a", buffering=1, encoding="utf-8") as out:
        for number in range(count):
            key = rng.choice(KEYS)
            kind = rng.choice(("add", "read", "write", "get"))
            ident = f"{process}-{number}"
            value = f"{process}-{number}" if kind == "write" else None
            out.write(json.dumps({"id": ident, "at": time.monotonic(), "kind": kind, "key": key, "value": value}) + "\n")
            if kind == "add":
                result: object = counter.increment(1)
            elif kind == "read":
                result = counter.value
            elif kind == "write":
                table[key] = value
                result = None
            else:
                result = table.get(key)
            out.write(json.dumps({"id": ident, "at": time.monotonic(), "result": result}) + "\n")
            if pause:
                time.sleep(pause)
    return count


def histories(directory: Path) -> tuple[list[Op], dict[str, list[Op]]]:
    """The counter's history and each dict key's, from every process's log in ``directory``."""
    invoked: dict[str, dict[str, object]] = {}
    completed: dict[str, dict[str, object]] = {}
    for log in directory.glob("*.log"):
        for line in log.read_text().splitlines():
            record = json.loads(line)
            (completed if "result" in record else invoked)[record["id"]] = record
    counter: list[Op] = []
    keys: dict[str, list[Op]] = {key: [] for key in KEYS}
    for ident, start in invoked.items():
        end = completed.get(ident)
        process = ident.rsplit("-", 1)[0]
        at = end["at"] if end is not None else None
        result = end["result"] if end is not None else None
        kind = start["kind"]
        if kind in ("add", "read"):
            counter.append(Op(process, kind, 1 if kind == "add" else None, start["at"], at, result))  # type: ignore[arg-type]
        else:
            arg = start["value"] if kind == "write" else None
            keys[start["key"]].append(Op(process, "write" if kind == "write" else "read", arg, start["at"], at, result))  # type: ignore[arg-type,index]
    return counter, keys
