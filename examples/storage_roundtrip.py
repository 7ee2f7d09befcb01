"""Upload, list, download and remove a file with sky.Storage.

    SKYWARD_S3_ENDPOINT=https://s3.us-east-1.amazonaws.com \\
    AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... SKYWARD_S3_BUCKET=my-bucket \\
        python examples/storage_roundtrip.py

With no SKYWARD_S3_ENDPOINT it starts a local S3 server (moto, from the test extra:
pip install -e '.[test]') on 127.0.0.1 and creates the bucket there. Against a real
endpoint the bucket (SKYWARD_S3_BUCKET, default "skyward-example") must exist.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import skyward as sky


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
            "s3", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id="local", aws_secret_access_key="local",
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
    # Credentials are read when the storage opens; None means boto3's credential chain.
    yield sky.Storage(
        endpoint,
        access_key=os.environ.get("AWS_ACCESS_KEY_ID"),
        secret_key=os.environ.get("AWS_SECRET_ACCESS_KEY"),
        path_style=os.environ.get("SKYWARD_S3_PATH_STYLE", "1") == "1",
    )


def main() -> None:
    bucket = os.environ.get("SKYWARD_S3_BUCKET", "skyward-example")
    key = "examples/roundtrip.txt"
    with tempfile.TemporaryDirectory() as scratch, configured_storage(bucket) as storage:
        source = Path(scratch) / "roundtrip.txt"
        source.write_text("hello from skyward\n")
        with storage:
            storage.upload(bucket, source, key=key)
            print(f"uploaded {key}")
            print(f"listed {storage.ls(bucket, prefix='examples/')}")
            copy = storage.download(bucket, key, Path(scratch) / "back" / "roundtrip.txt")
            print(f"downloaded {copy.read_text().strip()!r}")
            storage.rm(bucket, key)
            print(f"removed {key}; exists now: {storage.exists(bucket, key)}")


if __name__ == "__main__":
    main()
