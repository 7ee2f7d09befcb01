#!/usr/bin/env bash
# Set up a venv with skyward and its test dependencies, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
bash scripts/system_deps.sh
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# [plugins]: the frameworks the plugin tests drive (torch's CPU build, jax, keras, ...; ~1.5 GB);
# [bench]: the benchmarks' peers, for the test that runs a quick benchmark group
.venv/bin/python -m pip install -q -e '.[test,plugins,bench]'
# skyward's bytecode, as installing its wheel writes it: the editable install has none and,
# where PYTHONDONTWRITEBYTECODE is set, Python never writes it, so each of the suite's
# thousands of fresh interpreters (pool nodes, CLI calls, scripts) would compile the package
.venv/bin/python -m compileall -q skyward >/dev/null
if [ $# -gt 0 ]; then
    exec .venv/bin/python -m pytest -q -rfEs "$@"
fi
# The whole suite: every test on local pools, then the shared-pool tests again on four
# throwaway SSH hosts (tests/hosts.py), on the in-process fake cluster (the one engine
# without Ray), on that cluster behind the head relay's server (the relay protocol
# in-process), on sky.Container() against a local Docker Engine API fake and on an
# adopted kept pool (the pool daemon's relay), so every transport runs the same dispatch
# tests; those passes run only the tests that use the shared pool (pool4), the rest once.
# -rs prints every skip's reason; under CI=true a skip not allowed by tests/conftest.py's
# CI_SKIPS fails.
# It runs as two streams side by side: each waits on pools, SSH hosts and emulators for
# part of its time, so on two cores the pair took 35 minutes where one after the other
# took 48. The remote stream (tests/e2e/cloud and tests/e2e/ssh: pools on test hosts,
# then the ssh pass) writes to a log printed once the local stream (everything else,
# then the fake, relay, container and kept passes) is done; the run fails if either does.
# --durations lists the slowest tests, to keep the whole run within CI's budget.
# The remote stream runs from a copy as users have it (tests/installed_copy.py): skyward
# installed by pip, not editable, the tests beside it, so every SSH and cloud pool's
# client is the installed package and its hosts get a wheel written from it.
pytest=(.venv/bin/python -m pytest -q -rfEs)
remote_log="$(mktemp -t skyward-remote-stream-XXXXXX)"
installed="$(mktemp -d -t skyward-installed-XXXXXX)"
.venv/bin/python tests/installed_copy.py "$installed" >/dev/null
# each stream stops at its first failing pass (&&: set -e does not reach into a subshell
# whose status is tested)
(
    cd "$installed" &&
    venv/bin/python -m pytest -q -rfEs --durations=15 tests/e2e/cloud tests/e2e/ssh &&
    venv/bin/python -m pytest -q -rfEs --durations=10 --provider ssh
) >"$remote_log" 2>&1 &
remote_stream=$!
trap 'pkill -P "$remote_stream" 2>/dev/null; kill "$remote_stream" 2>/dev/null; rm -rf "$remote_log" "$installed"' EXIT
status=0
{
    "${pytest[@]}" --durations=15 --ignore=tests/e2e/cloud --ignore=tests/e2e/ssh &&
    "${pytest[@]}" --durations=10 --provider fake &&
    "${pytest[@]}" --durations=10 --provider relay &&
    "${pytest[@]}" --durations=10 --provider container &&
    "${pytest[@]}" --durations=10 --provider kept
} || status=$?
wait "$remote_stream" || status=$?
trap 'rm -rf "$remote_log" "$installed"' EXIT
echo "=== the remote stream, from an installed copy: tests/e2e/cloud and tests/e2e/ssh, then --provider ssh ==="
cat "$remote_log"
exit "$status"
