"""Checkpoints through a mounted bucket: one pool trains and its head node writes a
checkpoint per epoch into a writable sky.Volume; a later pool mounts the same folder
read-only and picks the latest one up; the client sees them as plain objects.

    SKYWARD_S3_ENDPOINT=https://s3.us-east-1.amazonaws.com \\
    AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... SKYWARD_S3_BUCKET=my-runs \\
        python examples/checkpoint_volume.py

With no SKYWARD_S3_ENDPOINT it starts a local S3 server (moto, from the test extra:
pip install -e '.[test]') on 127.0.0.1 and creates the bucket there. Mounting needs
s3fs (`apt-get install -y s3fs`) and root or fusermount on this machine. The volume is
mounted under a fresh temporary directory (on a remote pool use a path such as
/checkpoints).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import skyward as sky

RUN = "run-42/"


@contextmanager
def local_s3(bucket: str) -> Iterator[sky.Storage]:
    """A moto S3 server on a free local port with ``bucket`` in it."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        ).create_bucket(Bucket=bucket)
        print(f"started a local S3 server at {endpoint}")
        yield sky.Storage(endpoint, access_key="local", secret_key="local", path_style=True)
    finally:
        server.stop()


@contextmanager
def configured_storage(bucket: str) -> Iterator[sky.Storage]:
    endpoint = os.environ.get("SKYWARD_S3_ENDPOINT")
    if not endpoint:
        with local_s3(bucket) as storage:
            yield storage
        return
    yield sky.Storage(
        endpoint,
        access_key=os.environ.get("AWS_ACCESS_KEY_ID"),
        secret_key=os.environ.get("AWS_SECRET_ACCESS_KEY"),
        path_style=os.environ.get("SKYWARD_S3_PATH_STYLE", "1") == "1",
    )


@sky.function
def train(folder: str, epochs: int) -> list[str]:
    """Every node trains; the head node alone writes each epoch's checkpoint."""
    written = []
    weights = 0.0
    for epoch in range(epochs):
        weights += 0.5  # one epoch of training
        if sky.is_head():
            path = os.path.join(folder, f"epoch-{epoch}.json")
            with open(path, "w") as handle:
                json.dump({"epoch": epoch, "weights": weights}, handle)
            written.append(os.path.basename(path))
    return written


@sky.function
def latest(folder: str) -> dict[str, float]:
    """The newest checkpoint in the mounted folder."""
    newest = sorted(os.listdir(folder))[-1]
    with open(os.path.join(folder, newest)) as handle:
        return json.load(handle)


def main() -> None:
    bucket = os.environ.get("SKYWARD_S3_BUCKET", "skyward-example")
    options = sky.Options(console=False, logging=False)
    with tempfile.TemporaryDirectory() as scratch, configured_storage(bucket) as storage:
        folder = os.path.join(scratch, "checkpoints")
        print(f"mounting {bucket}/{RUN} at {folder}")
        writable = sky.Volume(
            bucket=bucket, mount=folder, prefix=RUN, read_only=False, storage=storage
        )
        with sky.Compute(nodes=2, volumes=[writable], options=options) as pool:
            written = [names for names in train(folder, 3) @ pool if names]
        print(f"the head node wrote {written[0]}")

        # Later, another pool: the same folder of the bucket, read-only this time.
        readable = sky.Volume(bucket=bucket, mount=folder, prefix=RUN, storage=storage)
        with sky.Compute(nodes=1, volumes=[readable], options=options) as pool:
            print(f"a later pool read back {latest(folder) >> pool}")

        with storage:
            keys = storage.ls(bucket, prefix=RUN)
            print(f"in the bucket: {keys}")
            for key in keys:
                storage.rm(bucket, key)


if __name__ == "__main__":
    main()
