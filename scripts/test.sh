#!/usr/bin/env bash
# Set up a venv with skyward and its test dependencies, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
bash scripts/system_deps.sh
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# [plugins]: the frameworks the plugin tests drive (torch's CPU build, jax, keras, ...; ~1.5 GB)
.venv/bin/python -m pip install -q -e '.[test,plugins]'
if [ $# -gt 0 ]; then
    exec .venv/bin/python -m pytest -q "$@"
fi
# The whole suite: every test on local pools, then the shared-pool tests again on four
# throwaway SSH hosts (tests/hosts.py), on the in-process fake cluster (the one engine
# without Ray), on that cluster behind the head relay's server (the relay protocol
# in-process), on sky.Container() against a local Docker Engine API fake and on an
# adopted kept pool (the pool daemon's relay; the metrics-interval tests, ~90 s there,
# run on the other providers), so every transport runs the same dispatch tests.
# --durations lists the slowest tests, to keep the whole run within CI's budget.
.venv/bin/python -m pytest -q --durations=15
.venv/bin/python -m pytest -q --durations=10 --provider ssh
.venv/bin/python -m pytest -q --durations=10 --provider fake
.venv/bin/python -m pytest -q --durations=10 --provider relay
.venv/bin/python -m pytest -q --durations=10 --provider container
.venv/bin/python -m pytest -q --durations=10 --provider kept -k "not test_observe_metrics"
