"""An accept loop outlives a storm of failed accepts (``core.accepting``): with the
process out of file descriptors (``EMFILE``) it waits, warns once and accepts again as
soon as descriptors are free; it ends when its socket is shut down and closed."""

from __future__ import annotations

import subprocess
import sys

STORM = r"""
import os, resource, socket, sys, threading, time
from skyward.core.accepting import accepted

server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
path = sys.argv[1]
server.bind(path)
server.listen(64)
served, warnings = [], []

def serve():
    for connection in accepted(server, warnings.append):
        served.append(connection)

thread = threading.Thread(target=serve, daemon=True)
thread.start()
callers = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(3)]  # made while descriptors are left
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 8, hard))
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
for caller in callers:  # the kernel queues them; the accepts fail with EMFILE
    caller.connect(path)
time.sleep(1.0)
failed_while_full = len(served)
for descriptor in held:
    os.close(descriptor)
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
deadline = time.monotonic() + 10
while len(served) < 3 and time.monotonic() < deadline:
    time.sleep(0.05)
late = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
late.connect(path)
while len(served) < 4 and time.monotonic() < deadline:
    time.sleep(0.05)
server.shutdown(socket.SHUT_RDWR)
server.close()
thread.join(5)
print(failed_while_full, len(served), len(warnings), "EMFILE" in " ".join(warnings) or "Too many" in " ".join(warnings), thread.is_alive())
"""


def test_the_loop_outlives_emfile_and_ends_when_its_socket_closes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [sys.executable, "-c", STORM, str(tmp_path / "s")], capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    while_full, served, warnings, named, alive = done.stdout.split()
    # short of descriptors, connections wait (a descriptor Python frees may let one in); then every one, and a late one
    assert int(while_full) < 3 and served == "4", done.stdout
    assert warnings == "1" and named == "True", done.stdout  # warned once, naming the error
    assert alive == "False", "the loop did not end when its socket was shut down and closed"
