"""The benchmark suite's report writer, on made-up rows (no benchmark runs here)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType

COMMON = Path(__file__).resolve().parents[2] / "benchmarks" / "common.py"


def load_common() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_common_under_test", COMMON)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_row_summarizes_samples() -> None:
    common = load_common()
    row = common.row("B1", "skyward f() >> pool", [0.003, 0.001, 0.002], "warm")
    assert (row["median_s"], row["min_s"], row["max_s"], row["runs"]) == (0.002, 0.001, 0.003, 3)
    failed = common.failed_row("B1", "Ray task", RuntimeError("boom"))
    assert failed["runs"] == 0 and math.isnan(failed["median_s"]) and "boom" in failed["note"]


def test_report_has_results_table_targets_and_machine_section() -> None:
    common = load_common()
    rows = [
        common.row("B1", "skyward f() >> pool", [0.002, 0.0021]),
        {**common.row("B1", "Ray actor call", [0.001]), "ratio": 2.0},
        common.row("B5", "skyward Compute(nodes=4)", [600.0], unit="MiB"),
    ]
    checks = [{"id": "B1-actor", "target": "≤ 1.3x a Ray actor call", "measured": "2.00x", "passed": False}]
    report = common.render_report(
        rows, checks, {"CPU": "Test CPU", "cores": "2"},
        when="today", header="# Benchmarks\n\n`.venv/bin/python benchmarks/run.py`",
        sections={"B1": "B1 — round trip"}, methods={"B1": "one call at a time"},
        explanations=[("B1-actor", "the agent is a threaded actor")],
    )
    assert "## Machine" in report and "| CPU | Test CPU |" in report
    assert "### B1 — round trip" in report
    assert "| subject | median | min | max | runs | skyward ÷ peer | note |" in report
    assert "| Ray actor call | 1.00 ms | 1.00 ms | 1.00 ms | 1 | 2.00x |  |" in report
    assert "600 MiB" in report
    assert "**MISS**" in report and "the agent is a threaded actor" in report
    assert report.index("## Machine") < report.index("## Results") < report.index("## Targets")


def test_machine_describes_cores_and_versions() -> None:
    info = load_common().machine()
    for key in ("CPU", "cores", "RAM", "OS", "Python", "ray"):
        assert info[key]


def load_suite() -> tuple[ModuleType, ModuleType]:
    """``benchmarks.run`` and ``benchmarks.targets`` (the suite is a package at the repo root)."""
    import importlib
    import sys

    root = str(COMMON.parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    return importlib.import_module("benchmarks.run"), importlib.import_module("benchmarks.targets")


def test_every_group_is_discovered_and_runnable() -> None:
    run, _ = load_suite()
    groups = {run.group_of(module): module for module in run.discover()}
    assert {"B1", "B2", "B3", "B4", "B5", "B6"} <= set(groups)
    assert all(callable(module.run) for module in groups.values())


def test_targets_are_checked_and_misses_explained() -> None:
    run, targets = load_suite()
    common = load_common()
    rows = run.with_ratios([
        common.row("B1", "skyward f() >> pool", [0.0002]),
        common.row("B1", "Ray actor call", [0.0007]),
        common.row("B1", "Ray task", [0.0003]),
        common.row("B4", "skyward Compute(nodes=4) shutdown", [2.0], metric="shutdown"),
        common.row("B4", "skyward warm open, Local(keep_warm)", [0.8], metric="warm"),
    ])
    assert rows[1]["ratio"] is not None and abs(rows[1]["ratio"] - 0.2857) < 1e-3
    checks = {check["id"]: check for check in targets.check_all(rows)}
    assert checks["B1-actor"]["passed"] is True
    assert checks["B1-task"]["passed"] is False
    assert checks["B4-shutdown"]["passed"] is False
    assert checks["B5"]["passed"] is None and checks["B5"]["measured"] == "not measured"
    assert checks["B4-warm"]["passed"] is False and checks["B4-warm"]["measured"].startswith("0.8 s")
    explained = dict(targets.explain(list(checks.values())))
    assert len(explained) == 3 and all(text for text in explained.values())


def test_shutdown_misses_its_target_with_a_process_left_alive() -> None:
    run, targets = load_suite()
    common = load_common()
    quick = common.row("B4", "skyward Compute(nodes=4) shutdown", [0.4], metric="shutdown", facts={"left": 0})
    assert {c["id"]: c for c in targets.check_all([quick])}["B4-shutdown"]["passed"] is True
    leaky = common.row("B4", "skyward Compute(nodes=4) shutdown", [0.4], metric="shutdown", facts={"left": 1})
    check = {c["id"]: c for c in targets.check_all([leaky])}["B4-shutdown"]
    assert check["passed"] is False and "1 processes left alive" in check["measured"]


def test_map_is_held_against_the_peers_best_chunk_size() -> None:
    _, targets = load_suite()
    common = load_common()
    rows = [
        common.row("B2", "skyward pool.map, f in the script", [0.030]),
        common.row("B2", "skyward pool.map, f imported", [0.010]),
        common.row("B2", "ProcessPoolExecutor.map chunksize=1", [0.400]),
        common.row("B2", "ProcessPoolExecutor.map chunksize=100", [0.020]),
        common.row("B2", "ProcessPoolExecutor.map chunksize=1000", [0.008]),
        common.row("B2", "Dask client.map", [0.900]),
    ]
    checks = {c["id"]: c for c in targets.check_all(rows)}
    # the script's function is the user's case: 0.030 against the best setting's 0.008
    assert checks["B2-best"]["passed"] is False
    assert checks["B2-best"]["measured"] == "3.75x (ProcessPoolExecutor.map chunksize=1000)"
    # chunksize=1 is found by its exact name, not as the prefix of chunksize=100
    assert checks["B2-ppe"]["measured"] == "13.3x faster"
    # any peer at its best setting is the one to beat: here Dask's batches
    batched = common.row("B2", "Dask tasks of 1,000 items", [0.006])
    check = {c["id"]: c for c in targets.check_all([*rows, batched])}["B2-best"]
    assert check["measured"] == "5.00x (Dask tasks of 1,000 items)"


def test_remote_map_is_held_against_the_fastest_peer_and_subjects_take_turns() -> None:
    run, targets = load_suite()
    import benchmarks.bench_r_remote as remote

    samples = {"skyward": {remote.TRIP: [0.001], remote.MAP: [0.030], remote.BROADCAST: [1.0]},
               remote.RAY: {remote.TRIP: [0.001], remote.MAP: [2.0], remote.BATCHED: [0.020], remote.BROADCAST: [1.0]},
               remote.DASK: {"error": "RuntimeError: boom"},
               remote.TUNNEL: {remote.TRIP: [0.0005], remote.BROADCAST: [0.5]}}
    real, remote.isolated = remote.isolated, lambda fn, *args, timeout: samples
    try:
        rows = run.with_ratios(remote.run(quick=True))
    finally:
        remote.isolated = real
    by_subject = {r["subject"]: r for r in rows}
    batched = by_subject["Ray (driver on host 0) map 10,000 in tasks of 1,000 items"]
    assert batched["metric"] == "map 10,000" and abs(batched["ratio"] - 1.5) < 1e-9
    failed = by_subject["Dask SSHCluster map 10,000 in tasks of 1,000 items"]
    assert failed["runs"] == 0 and "boom" in failed["note"]
    checks = {c["id"]: c for c in targets.check_all(rows)}
    assert checks["R-map"]["passed"] is False
    assert checks["R-map"]["measured"] == "1.50x (Ray (driver on host 0) map 10,000 in tasks of 1,000 items)"
    assert checks["R-map-ray"]["passed"] is True and checks["R-map-ray"]["measured"] == "66.7x faster"

    order: list[str] = []

    def turn(name: str, fails_in: int = 0):  # a subject's round, recording the order of turns
        def one_round() -> dict[str, list[float]]:
            order.append(name)
            if order.count(name) == fails_in:
                raise RuntimeError(f"{name} broke")
            return {"trip": [float(len(order))]}

        return one_round

    results = remote.in_turns({"a": turn("a"), "b": turn("b", fails_in=2), "c": turn("c")}, rounds=3)
    assert order == ["a", "b", "c", "a", "b", "c", "a", "c"]
    assert results["a"] == {"trip": [1.0, 4.0, 7.0]} and results["c"] == {"trip": [3.0, 6.0, 8.0]}
    assert results["b"] == {"error": "RuntimeError: b broke"}


def test_again_rows_are_reported_with_and_without_the_import() -> None:
    _, targets = load_suite()
    common = load_common()
    import benchmarks.bench_cloud_kept as cloud_kept
    import benchmarks.bench_ssh_bootstrap as ssh_bootstrap

    rows = [
        common.row("B4", "skyward kept pool, the script run again (keep_alive)", [0.05], metric="kept"),
        common.row("B4", "skyward kept pool, the script run again (keep_alive), with `import skyward`", [0.5],
                   metric="kept+import"),
    ]
    # the kept-pool scripts of S1 and K report their import apart (as kept_runs reads them)
    runs = [{"import": 0.15, "open": 0.9, "ray": False}, {"import": 0.25, "open": 0.95, "ray": False}]
    rows += ssh_bootstrap.kept_rows("S1", "3 hosts kept pool, the script run again", runs)
    rows += ssh_bootstrap.kept_rows("K", cloud_kept.SUBJECT, runs)
    assert [r["subject"] for r in rows[2:4]] == [
        "3 hosts kept pool, the script run again", "3 hosts kept pool, the script run again, with `import skyward`",
    ]
    assert rows[3]["median_s"] == 1.125 and "`import skyward` not counted" in rows[2]["note"]
    assert rows[2]["facts"] == {"without_ray": True} and "no Ray in the client" in rows[3]["note"]
    checks = {c["id"]: c for c in targets.check_all(rows)}
    assert checks["B4-kept"]["passed"] is True
    assert checks["B4-kept-import"]["passed"] is False
    for kept in ("R-kept", "K-kept"):
        assert checks[kept]["passed"] is True and checks[f"{kept}-import"]["passed"] is False
    script = ssh_bootstrap.KEPT_SCRIPT.format(hosts=["10.0.0.1"], key="k", known="h", pip=["p"], index="i",
                                              includes="d")
    for source in (script, cloud_kept.SCRIPT):
        compile(source, "<kept script>", "exec")
        assert source.index("began = ") < source.index("import skyward") < source.index("def pid()")


def test_script_functions_do_what_their_importable_twins_do() -> None:
    load_suite()
    import numpy as np

    from benchmarks import payloads

    array = np.arange(10.0)
    assert payloads.in_script("probe")(array) == payloads.probe(array)
    assert payloads.in_script("probe_counted")(payloads.Counted(array)) == payloads.probe(array)
    assert payloads.in_script("burn")(3) == payloads.burn(3)
    assert payloads.in_script("identity")(7) == 7 and payloads.in_script("pid")() == payloads.pid()
    assert payloads.identities([1, 2]) == [1, 2]


def test_subjects_take_turns_and_their_rounds_merge() -> None:
    load_suite()
    import benchmarks.isolate as isolate

    merged = isolate.merged_facts([{"in_order": True, "items": 10_000, "n": 1}, {"in_order": False, "items": 10_000, "n": 3}])
    assert merged == {"in_order": False, "items": 10_000, "n": 2}
    order: list[str] = []

    def fake_isolated(fn, *args):  # the order subjects run in, without interpreters
        order.append(args[0])
        return {"samples": [len(order) * 1.0], "note": "n", "facts": {"ok": True}}

    real, isolate.isolated = isolate.isolated, fake_isolated
    try:
        rows = isolate.alternated([isolate.Subject("G", name, print, (name,)) for name in ("a", "b")], rounds=3)
    finally:
        isolate.isolated = real
    assert order == ["a", "b", "a", "b", "a", "b"]
    assert [r["runs"] for r in rows] == [3, 3] and rows[0]["min_s"] == 1.0 and rows[1]["max_s"] == 6.0
