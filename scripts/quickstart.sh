#!/usr/bin/env bash
# Set up a venv with skyward and run examples/quickstart.py on a local 4-node pool.
# skyward is installed as a user installs it (a wheel, not an editable checkout), and
# only when its sources changed since the last run (a hash in .venv/.skyward-source).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "quickstart: creating .venv with $("$PYTHON" --version)"
    "$PYTHON" -m venv .venv
fi
source_hash="$(.venv/bin/python - <<'PY'
import hashlib, pathlib
digest = hashlib.sha256()
for path in sorted([pathlib.Path("pyproject.toml"), *pathlib.Path("skyward").rglob("*")]):
    if path.is_file() and "__pycache__" not in path.parts:
        digest.update(str(path).encode() + b"\0" + path.read_bytes())
print(digest.hexdigest())
PY
)"
if [ "$(cat .venv/.skyward-source 2>/dev/null)" != "$source_hash" ] || ! .venv/bin/python -c "import skyward" 2>/dev/null; then
    echo "quickstart: installing skyward and its dependencies into .venv (the first time takes a minute or two)"
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q .
    echo "$source_hash" > .venv/.skyward-source
else
    echo "quickstart: skyward is installed and up to date in .venv"
fi
echo "quickstart: running examples/quickstart.py (a local pool of 4 nodes)"
exec .venv/bin/python examples/quickstart.py
