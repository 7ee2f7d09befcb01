"""A real S3-compatible server for the storage tests: moto in server mode on 127.0.0.1
(or another address of ours, such as the SSH test hosts' gateway), in a child process
(its own interpreter, so a 200 MB transfer does not share our GIL).

``MotoServer.start(auth=True)`` gives a server that checks signatures: it creates one
IAM user with full access, then turns authentication on, so only that user's keys work
(wrong ones get InvalidAccessKeyId / SignatureDoesNotMatch)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 30.0
#: Credentials of a server without authentication: any pair is accepted.
ANY_KEY = "testing-access-key"
ANY_SECRET = "testing-secret-key"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@dataclass
class MotoServer:
    endpoint: str
    process: subprocess.Popen[bytes]
    log_path: Path
    access_key: str = ANY_KEY
    secret_key: str = ANY_SECRET

    @classmethod
    def start(cls, log_dir: Path, *, auth: bool = False, host: str = "127.0.0.1") -> MotoServer:
        """Start ``python -m moto.server`` on a free port of ``host`` and wait until it
        answers."""
        port = free_port(host)
        log_path = log_dir / f"moto-{port}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"},
            )
        server = cls(f"http://{host}:{port}", process, log_path)
        try:
            server._wait_ready()
            if auth:
                server._enable_auth()
        except BaseException:
            server.stop()
            raise
        return server

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and reap it."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)

    def client(self, service: str = "s3") -> Any:
        """A boto3 client with this server's working keys (for setting up fixtures)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            service, endpoint_url=self.endpoint, region_name="us-east-1",
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
            config=Config(s3={"addressing_style": "path"}),
        )

    def new_bucket(self) -> str:
        name = f"t-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def drop_bucket(self, name: str) -> None:
        """Delete the bucket and everything in it (keeps the server's memory small)."""
        client = self.client()
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", ())]
            if keys:
                client.delete_objects(Bucket=name, Delete={"Objects": keys})
        client.delete_bucket(Bucket=name)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto server exited:\n{self.log_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        raise TimeoutError(f"moto server did not answer within {START_TIMEOUT_S} s")

    def _enable_auth(self) -> None:
        iam = self.client("iam")
        iam.create_user(UserName="tester")
        iam.put_user_policy(
            UserName="tester", PolicyName="everything",
            PolicyDocument=json.dumps({
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
            }),
        )
        key = iam.create_access_key(UserName="tester")["AccessKey"]
        self.access_key, self.secret_key = key["AccessKeyId"], key["SecretAccessKey"]
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth", data=b"0", method="POST",
            headers={"Content-Type": "text/plain"},
        )
        urllib.request.urlopen(request, timeout=10).close()
