"""``python -m skyward.daemon DIR``: the pool daemon of ``DIR`` (``process.main``)."""

import sys
from pathlib import Path

from skyward.daemon.process import main

main(Path(sys.argv[1]))
