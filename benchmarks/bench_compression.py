"""P — payload compression (lz4) on the remote path: a large argument and result through an SSH pool's relay.

    .venv/bin/python -m benchmarks.bench_compression           # alone (5-8 min), prints its tables
    .venv/bin/python -m benchmarks.bench_compression --quick   # fewer sizes and runs (~3 min)

Two `sky.SSH` pools of 1 test host each (tests/hosts.py: a network namespace with its own
sshd, joined to this machine by a veth pair) run `echo(x)`, which returns its argument:
each round trip sends the payload through the client's SSH-forwarded channel to the head
relay and back. Payloads: `zeros` (a float64 NumPy array of zeros), `random` (uniform float64:
incompressible), `ints` (int64 in 0..99: lz4 makes them 37%) and `pandas` (a
DataFrame of object-dtype strings repeated from 8 city names, a 4-value categorical, small
ints and 2-decimal prices), of 1, 16 and 64 MB pickled. Each is timed with the relay
stream's compression on (host 0's pool) and off (host 1's; `launch.COMPRESS`), the two
called in turn so both see the same load, at the veth's own speed and with both ends of the veth shaped by `tc
qdisc ... tbf` to 1 Gbit/s and 100 Mbit/s (64 MB is left out at 100 Mbit/s). The "skyward
lz4" rows are the times with compression, the "plain" rows without; a plain row's "skyward ÷
peer" is lz4's median over its own (below 1.00x compression pays). The `lz4 ...` rows at the top time `lz4.frame` itself (the
settings `codec.shrink` uses) on 16 MB of each payload in this process, and `codec.shrink`'s
decision (the sampling look, then compressing or not). Needs root and iproute2/openssh-server.
What was decided from these numbers, and why: docs/compression.md.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Any

from benchmarks.common import Row, failed_row, markdown_table, row
from benchmarks.isolate import SubjectFailed, isolated

GROUP = "P"
TITLE = "P — payload compression (lz4) through an SSH pool's relay"
TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
KINDS = ("zeros", "random", "ints", "pandas")
MB = 1_000_000
BANDWIDTHS = ("veth", "1gbit", "100mbit")
"""The veth's own speed, then `tc` rates (both directions)."""
SHOWN = {"veth": "veth (unshaped)", "1gbit": "1 Gbit/s", "100mbit": "100 Mbit/s"}
CITIES = ("Lisbon", "Porto", "Braga", "Faro", "Coimbra", "Aveiro", "Evora", "Viseu")


def run(quick: bool = False) -> list[Row]:
    try:
        result = isolated(measure_all, quick, timeout=1500)
    except SubjectFailed as exc:
        return [failed_row(GROUP, "(whole group)", exc)]
    return rows_of(result)


def rows_of(result: dict[str, Any]) -> list[Row]:
    rows = []
    for kind, found in result["lz4"].items():
        metric = f"lz4 {kind}"
        size = found["size"]
        note = f"{size / MB:.1f} MB → {found['packed'] / MB:.2f} MB ({found['packed'] / size:.1%})"
        rows.append(row(GROUP, f"lz4 compress, {kind}", [size / s / MB for s in found["compress"]], note,
                        unit="MB/s", metric=metric))
        rows.append(row(GROUP, f"lz4 decompress, {kind}", [size / s / MB for s in found["decompress"]],
                        unit="MB/s", metric=metric))
        rows.append(row(GROUP, f"codec.shrink, {kind}", found["shrink"],
                        "compressed" if found["kept"] else "left plain", metric=metric))
    if "skipped" in result:
        rows.append(failed_row(GROUP, "SSH pool", f"not measured: {result['skipped']}"))
        return rows
    if "error" in result:
        rows.append(failed_row(GROUP, "SSH pool", result["error"]))
    for key, samples in result["remote"].items():
        bandwidth, kind, size, mode = key.split("|")
        metric = f"{kind} {size} MB, {SHOWN[bandwidth]}"
        subject = f"skyward lz4, {metric}" if mode == "lz4" else f"plain, {metric}"
        rows.append(row(GROUP, subject, samples, metric=metric))
    return rows


def payload(kind: str, size: int) -> Any:
    """``kind`` of about ``size`` bytes pickled."""
    import numpy as np

    rng = np.random.default_rng(0)
    if kind == "zeros":
        return np.zeros(size // 8)
    if kind == "random":
        return rng.random(size // 8)
    if kind == "ints":
        return rng.integers(0, 100, size // 8)
    import pandas as pd

    rows = size // 25  # ~25 bytes a row pickled
    return pd.DataFrame({
        "city": pd.Series(rng.choice(CITIES, rows), dtype=object),
        "kind": pd.Categorical(rng.choice(["a", "b", "c", "d"], rows)),
        "count": rng.integers(0, 1000, rows),
        "price": np.round(rng.random(rows) * 100, 2),
    })


def echo(value: Any) -> Any:
    return value


def measure_lz4(runs: int) -> dict[str, Any]:
    """lz4.frame at ``codec.shrink``'s settings on 16 MB of each kind (best of ``runs``)."""
    import lz4.frame

    from skyward.core import codec
    from skyward.engine.wire import encode

    out: dict[str, Any] = {}
    for kind in KINDS:
        header, buffers = _flat(encode(payload(kind, 16 * MB)))
        data = header + b"".join(bytes(memoryview(b)) for b in buffers)
        packed = lz4.frame.compress(data, compression_level=0, block_size=lz4.frame.BLOCKSIZE_MAX4MB)
        found: dict[str, Any] = {"size": len(data), "packed": len(packed), "compress": [], "decompress": [], "shrink": []}
        for _ in range(runs):
            found["compress"].append(_seconds(lz4.frame.compress, data, compression_level=0,
                                              block_size=lz4.frame.BLOCKSIZE_MAX4MB))
            found["decompress"].append(_seconds(lz4.frame.decompress, packed))
            found["shrink"].append(_seconds(codec.shrink, data))
        found["kept"] = codec.shrink(data) is not None
        out[kind] = found
    return out


def _flat(payload: Any) -> tuple[bytes, list[Any]]:
    return (payload, []) if isinstance(payload, bytes) else payload


def _seconds(fn: Any, *args: Any, **kwargs: Any) -> float:
    started = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - started


def measure_all(quick: bool) -> dict[str, Any]:
    """lz4 alone, then the SSH pools' round trips (seconds; lists of samples)."""
    results: dict[str, Any] = {"lz4": measure_lz4(3 if quick else 5), "remote": {}}
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from hosts import HostLab, available

    reason = available()
    if reason is not None:
        results["skipped"] = reason
        return results
    try:
        with HostLab.start(2) as lab:
            _measure_pools(lab, quick, results["remote"])
    except Exception:  # noqa: BLE001 (keep what was measured)
        import traceback

        results["error"] = traceback.format_exc()[-1500:]
    return results


def _measure_pools(lab: Any, quick: bool, out: dict[str, list[float]]) -> None:
    """Two pools open at once, host 0's compressing and host 1's not, called in turn
    (so both see the same load on the shared cores)."""
    import contextlib
    import importlib.metadata

    import skyward as sky
    from skyward.providers.ssh import launch

    runs = 1 if quick else 3
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in ("numpy", "pandas")]
    options = sky.Options(console=False, logging=False)
    task = sky.function(echo)
    sizes = (1, 16) if quick else (1, 16, 64)
    payloads = {(kind, size): payload(kind, size * MB) for kind in KINDS for size in sizes}
    with contextlib.ExitStack() as stack:
        pools = {}
        for index, mode in enumerate(("lz4", "plain")):
            launch.COMPRESS = mode == "lz4"
            provider = sky.SSH(hosts=[lab.strings()[index]], key_path=lab.client_key, known_hosts=lab.known_hosts)
            pools[mode] = stack.enter_context(
                sky.Compute(provider=provider, nodes=1, image=sky.Image(pip=pins), options=options)
            )
        launch.COMPRESS = True
        for value in payloads.values():  # warm up: imports on the nodes, buffers on both ends
            for pool in pools.values():
                task(value) >> pool
        for bandwidth in BANDWIDTHS:
            with _shaped(lab.hosts[0], lab.tag, bandwidth), _shaped(lab.hosts[1], lab.tag, bandwidth):
                for (kind, size), value in payloads.items():
                    if bandwidth == "100mbit" and size > 16:
                        continue
                    for _ in range(runs):
                        for mode, pool in pools.items():
                            started = time.perf_counter()
                            task(value) >> pool
                            out.setdefault(f"{bandwidth}|{kind}|{size}|{mode}", []).append(time.perf_counter() - started)
                    print(f"[P] {SHOWN[bandwidth]:15} {kind:6} {size:2} MB " + ", ".join(
                        f"{mode} {statistics.median(out[f'{bandwidth}|{kind}|{size}|{mode}']):.3f} s" for mode in pools
                    ), file=sys.stderr, flush=True)


class _shaped:
    """Both ends of ``host``'s veth limited to ``rate`` (a `tc` rate) while inside; the
    veth's own speed for "veth". The qdiscs are removed on the way out."""

    def __init__(self, host: Any, tag: str, rate: str) -> None:
        index = host.name.rsplit("h", 1)[-1]
        self._ends = [((), f"skv{tag}{index}"), (("ip", "netns", "exec", host.netns), f"skp{tag}{index}")]
        self._rate = rate

    def __enter__(self) -> None:
        if self._rate == "veth":
            return
        bits = int(self._rate.removesuffix("mbit").removesuffix("gbit")) * (1000 if self._rate.endswith("gbit") else 1)
        burst = max(128 * 1024, bits * 1_000_000 // 8 // 250)  # 4 ms of the rate, at least 128 KiB
        for prefix, device in self._ends:
            _tc(*prefix, "tc", "qdisc", "replace", "dev", device, "root", "tbf",
                "rate", self._rate, "burst", str(burst), "latency", "50ms")

    def __exit__(self, *exc: object) -> None:
        if self._rate == "veth":
            return
        for prefix, device in self._ends:
            _tc(*prefix, "tc", "qdisc", "del", "dev", device, "root", check=False)


def _tc(*command: str, check: bool = True) -> None:
    import subprocess

    subprocess.run(command, check=check, capture_output=True, timeout=30)


def pivot(rows: list[Row]) -> str:
    """The remote rows as one table: plain and lz4 medians side by side."""
    plain = {r["metric"]: r for r in rows if r["subject"].startswith("plain") and r.get("runs")}
    lines = []
    for r in rows:
        if not r["subject"].startswith("skyward lz4") or not r["runs"]:
            continue
        other = plain.get(r.get("metric", ""))
        kind, rest = r["metric"].split(" ", 1)
        size, bandwidth = rest.split(", ")
        if other is None:
            continue
        lines.append((bandwidth, kind, size, f"{other['median_s']:.3f} s", f"{r['median_s']:.3f} s",
                      f"{r['median_s'] / other['median_s']:.2f}x"))
    return markdown_table(("link", "payload", "size", "plain", "lz4", "lz4 ÷ plain"), lines)


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    one, five, _ = os.getloadavg()
    print(f"load average at start: {one:.2f} (1 min), {five:.2f} (5 min)", file=sys.stderr)
    started = time.monotonic()
    import importlib

    from benchmarks.common import results_table

    rows = importlib.import_module("benchmarks.bench_compression").run(quick)  # by name, as the isolated interpreter

    print(results_table([r for r in rows if r["subject"].split(",")[0] in {"lz4 compress", "lz4 decompress", "codec.shrink"}]))
    print()
    print(pivot(rows))
    failed = [r for r in rows if not r["runs"]]
    for r in failed:
        print(f"{r['subject']}: {r['note']}")
    one, five, _ = os.getloadavg()
    print(f"\n{(time.monotonic() - started) / 60:.1f} min; load average at the end: {one:.2f} (1 min), {five:.2f} (5 min)",
          file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
