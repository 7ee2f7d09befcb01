"""Mount a Volume's bucket as a directory through s3fs-fuse, and unmount it.

``mount_volume`` runs ``s3fs -f`` (foreground) as a child process in a session of its
own, with the keys in a 0600 password file inside a private 0700 directory that lives as
long as the mount, and s3fs's messages in a log file beside it: a failed mount raises a
VolumeMountError carrying s3fs's own reason (NoSuchBucket, unable to connect, ...). It
returns once the mount is in /proc/mounts and the directory can be listed. Runs on any
node with skyward installed; ``fuse_tool_available()`` says what is missing."""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from skyward.storage.endpoint import check_endpoint, signing_region
from skyward.storage.errors import VolumeMountError
from skyward.storage.volume import Volume

MOUNT_TIMEOUT_S = 30.0
UNMOUNT_TIMEOUT_S = 15.0
#: s3fs's own request limits, so a dead endpoint fails the mount in seconds.
S3FS_CONNECT_TIMEOUT_S = 5
S3FS_READWRITE_TIMEOUT_S = 60
S3FS_RETRIES = 2
INSTALL_HINT = "install it with `apt-get install -y s3fs` (Debian/Ubuntu)"

_LOG_PREFIX = re.compile(r"^\S+Z \[(?:CRT|ERR|WAN)\] (?:[\w.]+:[\w:~]+\(\d+\): )?")
_NOISE = ("change debug level", "Exiting FUSE event loop", "### giving up")
#: What s3fs logs when its start-up check (bucket, credentials) failed; its log reaches
#: the file when it flushes, at the latest when it exits.
_GAVE_UP = "Exiting FUSE event loop due to errors"
_HINTS = {
    "NoSuchBucket": "check the bucket name and the endpoint",
    "InvalidAccessKeyId": "check access_key",
    "SignatureDoesNotMatch": "check secret_key",
    "AccessDenied": "check that the keys may use this bucket",
}


@dataclass(frozen=True, slots=True)
class MountedVolume:
    """A live s3fs mount made by ``mount_volume``; give it to ``unmount``."""

    volume: Volume
    mount: str  # the mount point as /proc/mounts shows it (symlinks resolved)
    process: subprocess.Popen[bytes] = field(repr=False, compare=False)
    private_dir: str = field(repr=False)
    created: tuple[str, ...] = ()  # directories made for the mount point, outermost first

    @property
    def log_path(self) -> str:
        """s3fs's messages (errors only)."""
        return os.path.join(self.private_dir, "s3fs.log")


def fuse_tool_available() -> str | None:
    """None when s3fs can mount here, else the reason and how to fix it."""
    if shutil.which("s3fs") is None:
        return f"s3fs is not installed: {INSTALL_HINT}"
    if not os.path.exists("/dev/fuse"):
        return (
            "there is no /dev/fuse: load the fuse module (`modprobe fuse`), or run the "
            "container with `--device /dev/fuse --cap-add SYS_ADMIN`"
        )
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user: run as root or fix its mode"
    if os.geteuid() != 0 and _fusermount() is None:
        return (
            "fusermount is missing (needed to mount as a non-root user): "
            "apt-get install -y fuse3"
        )
    return None


def is_mounted(path: str) -> bool:
    """Whether ``path`` (symlinks resolved) is a mount point in /proc/mounts."""
    return os.path.realpath(path) in _mount_points()


def mount_volume(
    volume: Volume,
    endpoint: str,
    access_key: str | None,
    secret_key: str | None,
    *,
    path_style: bool = False,
    region: str | None = None,
    session_token: str | None = None,
    timeout: float = MOUNT_TIMEOUT_S,
) -> MountedVolume:
    """Mount ``volume.bucket`` (its ``prefix`` only, when set) at ``volume.mount``,
    read-only if ``volume.read_only``; creates the mount point if missing.

    ``region`` is the signing region (default: read from the endpoint's host); keys None
    leave s3fs to its own credential lookup; ``session_token`` goes with temporary keys.
    Raises VolumeMountError naming the bucket, the mount point and the cause (s3fs's
    message when it gave one) within ``timeout``; nothing is left mounted or created
    then."""
    check_endpoint("mount_volume", "endpoint", endpoint)
    if (access_key is None) != (secret_key is None):
        raise ValueError("mount_volume: pass access_key and secret_key together, or neither")
    if session_token is not None and access_key is None:
        raise ValueError("mount_volume: a session_token needs access_key and secret_key")
    missing = fuse_tool_available()
    if missing is not None:
        raise VolumeMountError(volume.bucket, volume.mount, missing)
    created = _prepare_mount_point(volume)
    private_dir = tempfile.mkdtemp(prefix="skyward-s3fs-")
    mounted: MountedVolume | None = None
    try:
        password_file = None
        if access_key is not None and secret_key is not None and session_token is None:
            password_file = _write_password_file(private_dir, access_key, secret_key)
        command = _command(
            volume, endpoint, password_file,
            path_style=path_style, region=region or signing_region(endpoint),
        )
        environment = None
        if session_token is not None:  # s3fs reads temporary keys from its environment only
            environment = {
                **os.environ, "AWS_ACCESS_KEY_ID": str(access_key),
                "AWS_SECRET_ACCESS_KEY": str(secret_key), "AWS_SESSION_TOKEN": session_token,
            }
        with open(os.path.join(private_dir, "s3fs.log"), "wb") as log:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, env=environment,
            )
        mounted = MountedVolume(
            volume, os.path.realpath(volume.mount), process, private_dir, created
        )
        _wait_until_mounted(mounted, timeout)
        return mounted
    except BaseException:
        if mounted is not None:
            _teardown(mounted, UNMOUNT_TIMEOUT_S, grace=0.0)
        else:
            shutil.rmtree(private_dir, ignore_errors=True)
            _remove_created(created)
        raise


def unmount(mounted: MountedVolume, *, timeout: float = UNMOUNT_TIMEOUT_S) -> None:
    """Unmount (``fusermount -u``, else a lazy ``umount -l``), stop s3fs, delete the
    password file and the mount point directories ``mount_volume`` created. Safe to
    call again; bounded by ``timeout``. Raises VolumeMountError if it stays mounted."""
    _teardown(mounted, timeout)
    if is_mounted(mounted.mount):
        raise VolumeMountError(
            mounted.volume.bucket, mounted.mount,
            f"still mounted after fusermount -u and umount -l ({timeout:.0f} s)",
        )


def _command(
    volume: Volume,
    endpoint: str,
    password_file: str | None,
    *,
    path_style: bool,
    region: str,
) -> list[str]:
    prefix = volume.prefix.strip("/")
    source = f"{volume.bucket}:/{prefix}" if prefix else volume.bucket
    options = [
        f"url={endpoint.rstrip('/')}",
        f"endpoint={region}",
        f"connect_timeout={S3FS_CONNECT_TIMEOUT_S}",
        f"readwrite_timeout={S3FS_READWRITE_TIMEOUT_S}",
        f"retries={S3FS_RETRIES}",
        "sigv4",
        "dbglevel=err",
    ]
    if password_file is not None:
        options.append(f"passwd_file={password_file}")
    if path_style:
        options.append("use_path_request_style")
    if volume.read_only:
        options.append("ro")
    command = ["s3fs", source, volume.mount, "-f"]
    for option in options:
        command += ["-o", option]
    return command


def _write_password_file(private_dir: str, access_key: str, secret_key: str) -> str:
    path = os.path.join(private_dir, "passwd")
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(f"{access_key}:{secret_key}\n")
    return path


def _prepare_mount_point(volume: Volume) -> tuple[str, ...]:
    """Check the mount point is free and empty; create it (and missing parents).
    Returns the directories created, outermost first."""
    path = Path(volume.mount)
    if is_mounted(str(path)):
        raise VolumeMountError(
            volume.bucket, volume.mount, "it is already a mount point; unmount it first"
        )
    if path.exists():
        if not path.is_dir():
            raise VolumeMountError(volume.bucket, volume.mount, "it exists and is not a directory")
        if any(path.iterdir()):
            raise VolumeMountError(
                volume.bucket, volume.mount,
                "the directory is not empty and the mount would hide its files; use an "
                "empty or new directory",
            )
        return ()
    missing = [parent for parent in (path, *path.parents) if not parent.exists()]
    missing.reverse()
    try:
        path.mkdir(parents=True)
    except OSError as error:
        _remove_created(tuple(str(directory) for directory in missing if directory.exists()))
        raise VolumeMountError(
            volume.bucket, volume.mount,
            f"the mount point could not be created ({error.strerror}); create it first "
            "(e.g. with sudo, owned by this user) or mount under a directory this user owns",
        ) from None
    return tuple(str(directory) for directory in missing)


def _wait_until_mounted(mounted: MountedVolume, timeout: float) -> None:
    """Until the mount is in /proc/mounts and lists through s3fs. s3fs unmounts when its
    start-up check fails, and a listing that lands after that lists the bare directory:
    it counts only if the mount is still there once the listing has returned."""
    deadline = time.monotonic() + timeout
    while True:
        code = mounted.process.poll()
        if code is not None:
            raise _failure(mounted, f"s3fs exited (status {code}) without mounting")
        remaining = deadline - time.monotonic()
        if is_mounted(mounted.mount):
            listed = _list(mounted.mount, max(remaining, 0.1))
            if listed is True:
                if is_mounted(mounted.mount) and _GAVE_UP not in _log_text(mounted.log_path):
                    return
                raise _failure(mounted, "s3fs gave up after mounting")
            if isinstance(listed, OSError) and listed.errno in (errno.EPERM, errno.EACCES):
                raise _failure(
                    mounted,
                    f"listing the mount point failed ({listed.strerror}): the endpoint refused "
                    "to list the bucket; check that the keys may list it",
                )
        if remaining <= 0:
            raise _failure(mounted, f"the mount did not come up within {timeout:.0f} s")
        time.sleep(0.05)


def _failure(mounted: MountedVolume, fallback: str) -> VolumeMountError:
    """The error for a mount that failed: s3fs's reason when it logged one (it may still
    be writing it, so give it a moment to exit), else ``fallback``."""
    try:
        mounted.process.wait(timeout=2)
    except subprocess.TimeoutExpired:
        pass
    reason = _reason(_log_text(mounted.log_path))
    return VolumeMountError(mounted.volume.bucket, mounted.volume.mount, reason or fallback)


def _log_text(log_path: str) -> str:
    try:
        return Path(log_path).read_text(errors="replace")
    except OSError:
        return ""


def _reason(text: str) -> str:
    """The S3 error code and message from a response body s3fs logged (with a hint),
    then its critical/error lines without timestamps and source locations."""
    critical: list[str] = []
    errors: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("<") or any(noise in line for noise in _NOISE):
            continue
        if "[INF]" in line or "[DBG]" in line:
            continue
        cleaned = _LOG_PREFIX.sub("", line)
        (critical if "[CRT]" in line else errors).append(cleaned)
    lines = list(dict.fromkeys(critical or errors))[-3:]
    code = re.search(r"<Code>(.*?)</Code>", text)
    if code:
        message = re.search(r"<Message>(.*?)</Message>", text)
        said = code.group(1) + (f" ({message.group(1)})" if message else "")
        hint = _HINTS.get(code.group(1))
        lines.insert(0, f"S3 answered {said}" + (f": {hint}" if hint else ""))
    return "; ".join(f"s3fs: {line}" if index else line for index, line in enumerate(lines))


def _list(path: str, timeout: float) -> bool | OSError | None:
    """True if ``os.listdir(path)`` succeeds within ``timeout``, its OSError if it fails,
    None if it is still blocked (a thread, because a FUSE call takes as long as the
    filesystem takes to answer)."""
    outcome: list[bool | OSError] = []

    def attempt() -> None:
        try:
            os.listdir(path)
            outcome.append(True)
        except OSError as error:
            outcome.append(error)

    worker = threading.Thread(target=attempt, name="skyward-mount-check", daemon=True)
    worker.start()
    worker.join(timeout)
    return outcome[0] if outcome else None


def _teardown(mounted: MountedVolume, timeout: float, *, grace: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    if is_mounted(mounted.mount):
        fusermount = _fusermount()
        if fusermount is not None:
            _run([fusermount, "-u", mounted.mount], deadline)
        if is_mounted(mounted.mount):
            _run(["umount", "-l", mounted.mount], deadline)
    _stop(mounted.process, min(grace, max(deadline - time.monotonic(), 0.0)))
    shutil.rmtree(mounted.private_dir, ignore_errors=True)
    if not is_mounted(mounted.mount):
        _remove_created(mounted.created)


def _stop(process: subprocess.Popen[bytes], grace: float) -> None:
    """Give s3fs ``grace`` seconds to exit on its own (it does once unmounted), then
    SIGTERM, then SIGKILL, a few seconds each."""
    for sent, wait in ((None, grace), (signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        if process.poll() is not None:
            return
        if sent is not None:
            process.send_signal(sent)
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _run(command: list[str], deadline: float) -> None:
    try:
        subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True,
            timeout=max(deadline - time.monotonic(), 1.0), check=False,
        )
    except (subprocess.TimeoutExpired, OSError):
        pass


def _remove_created(created: tuple[str, ...]) -> None:
    """Remove the directories made for a mount point, innermost first, if still empty."""
    for directory in reversed(created):
        try:
            os.rmdir(directory)
        except OSError:
            return


def _fusermount() -> str | None:
    return shutil.which("fusermount3") or shutil.which("fusermount")


def _mount_points() -> set[str]:
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as mounts:
            return {_unescape(line.split()[1]) for line in mounts if len(line.split()) > 1}
    except OSError:
        return set()


def _unescape(field: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)
