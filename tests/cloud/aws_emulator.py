"""A local AWS for the tests: moto's server (EC2, SSM, ...) on 127.0.0.1, behind a front
door that adds what moto lacks, each in the real API's protocol and documented shape:

- the Price List API (``AWSPriceListService.GetProducts``, JSON 1.1), answered from a
  recorded response (``fixtures/aws_pricing_products.json``) with its TERM_MATCH filters;
- ``DescribeSpotPriceHistory`` (EC2 Query/XML), from a recorded history
  (``fixtures/aws_spot_price_history.json``): moto answers it with placeholder prices;
- EC2's capacity errors: ``refuse(instance_type, market)`` makes ``RunInstances`` of that
  type answer ``InsufficientInstanceCapacity`` (or another code), as AWS does when it has
  no room;
- a Price List outage: ``pricing_down = True`` makes ``GetProducts`` answer HTTP 500.

Everything else goes to moto unchanged. moto boots with the AMIs of
``fixtures/moto_amis.json`` (a current Canonical Ubuntu and a Deep Learning AMI), so the
provider's image lookup runs as against AWS. boto3 reaches it through
``AWS_ENDPOINT_URL`` (``env()``).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

FIXTURES = Path(__file__).parent / "fixtures"
START_TIMEOUT = 60.0
REGION = "us-east-1"
ENV_KEYS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AWSEmulator:
    """moto plus the front door; use as a context manager."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="skyward-aws-")
        self.moto_port = free_port()
        self._refusals: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()
        self.run_requests: list[dict[str, str]] = []
        self.pricing_down = False
        self._pricing = json.loads((FIXTURES / "aws_pricing_products.json").read_text())["PriceList"]
        self._spot = json.loads((FIXTURES / "aws_spot_price_history.json").read_text())["SpotPriceHistory"]
        self._moto: subprocess.Popen[bytes] | None = None
        self._front: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> AWSEmulator:
        log = open(os.path.join(self.root, "moto.log"), "wb")
        env = {**os.environ, "MOTO_AMIS_PATH": str(FIXTURES / "moto_amis.json")}
        self._moto = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.moto_port)],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.moto_port), timeout=1).close()
                break
            except OSError:
                if self._moto.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto did not start; see {self.root}/moto.log") from None
                time.sleep(0.1)
        emulator = self

        class Handler(_FrontDoor):
            owner = emulator

        self._front = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._front.daemon_threads = True
        threading.Thread(target=self._front.serve_forever, name="aws-front-door", daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self._front is not None
        return f"http://127.0.0.1:{self._front.server_address[1]}"

    @property
    def moto_url(self) -> str:
        return f"http://127.0.0.1:{self.moto_port}"

    def env(self) -> dict[str, str]:
        """The environment that points boto3 (and so ``sky.AWS``) here."""
        return dict(zip(ENV_KEYS, (self.url, "testing", "testing", REGION, "true")))

    def client(self, service: str) -> Any:
        """A boto3 client straight to moto (what the harness sees as the cloud)."""
        import boto3

        return boto3.client(
            service, region_name=REGION, endpoint_url=self.moto_url,
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )

    def refuse(self, instance_type: str, market: str = "any", code: str = "InsufficientInstanceCapacity") -> None:
        """Make RunInstances of ``instance_type`` in ``market`` ("spot", "on-demand",
        "any") fail with ``code``."""
        with self._lock:
            self._refusals[(instance_type, market)] = code

    def stop(self) -> None:
        if self._front is not None:
            self._front.shutdown()
            self._front.server_close()
        if self._moto is not None:
            self._moto.terminate()
            try:
                self._moto.wait(10)
            except subprocess.TimeoutExpired:
                self._moto.kill()
                self._moto.wait(10)
        import shutil

        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> AWSEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ answers

    def refusal(self, form: dict[str, str]) -> str | None:
        market = "spot" if form.get("InstanceMarketOptions.MarketType") == "spot" else "on-demand"
        with self._lock:
            self.run_requests.append(form)
            kind = form.get("InstanceType", "")
            return self._refusals.get((kind, market)) or self._refusals.get((kind, "any"))

    def products(self, request: dict[str, Any]) -> dict[str, Any]:
        wanted = {f["Field"]: f["Value"] for f in request.get("Filters", []) if f.get("Type") == "TERM_MATCH"}
        found = [
            json.dumps(item) for item in self._pricing
            if all(item["product"]["attributes"].get(field) == value for field, value in wanted.items())
        ]
        start = int(request.get("NextToken") or 0)
        end = start + int(request.get("MaxResults", 100))
        page: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": found[start:end]}
        if end < len(found):
            page["NextToken"] = str(end)
        return page

    def spot_history(self, form: dict[str, str]) -> str:
        types = {value for key, value in form.items() if key.startswith("InstanceType.")}
        rows = [row for row in self._spot if not types or row["InstanceType"] in types]
        items = "".join(
            f"<item><instanceType>{escape(r['InstanceType'])}</instanceType>"
            f"<productDescription>{escape(r['ProductDescription'])}</productDescription>"
            f"<spotPrice>{r['SpotPrice']}</spotPrice><timestamp>{r['Timestamp']}</timestamp>"
            f"<availabilityZone>{r['AvailabilityZone']}</availabilityZone></item>"
            for r in rows
        )
        return (
            '<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            f"<requestId>spot-history</requestId><spotPriceHistorySet>{items}</spotPriceHistorySet>"
            "<nextToken></nextToken></DescribeSpotPriceHistoryResponse>"
        )


class _FrontDoor(BaseHTTPRequestHandler):
    owner: AWSEmulator
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._forward(b"")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        target = self.headers.get("X-Amz-Target", "")
        if target.startswith("AWSPriceListService."):
            if self.owner.pricing_down:
                self._reply(500, b"<html><body>Internal Server Error</body></html>", "text/html")
            elif target.endswith(".GetProducts"):
                self._reply(200, json.dumps(self.owner.products(json.loads(body or b"{}"))).encode(), "application/x-amz-json-1.1")
            else:
                self._reply(400, json.dumps({"__type": "InvalidParameterException", "message": target}).encode(), "application/x-amz-json-1.1")
            return
        if "x-www-form-urlencoded" in self.headers.get("Content-Type", ""):
            form = dict(urllib.parse.parse_qsl(body.decode()))
            action = form.get("Action")
            if action == "DescribeSpotPriceHistory":
                self._reply(200, self.owner.spot_history(form).encode(), "text/xml")
                return
            if action == "RunInstances":
                code = self.owner.refusal(form)
                if code is not None:
                    message = f"We currently do not have sufficient {form.get('InstanceType')} capacity in the Availability Zone you requested."
                    error = (
                        f"<Response><Errors><Error><Code>{code}</Code><Message>{escape(message)}</Message></Error>"
                        "</Errors><RequestID>refused</RequestID></Response>"
                    )
                    self._reply(400, error.encode(), "text/xml")
                    return
        self._forward(body)

    def _forward(self, body: bytes) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.owner.moto_port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
        connection.request(self.command, self.path, body=body or None, headers=headers)
        response = connection.getresponse()
        data = response.read()
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in ("content-length", "connection", "transfer-encoding", "server", "date"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        connection.close()

    def _reply(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
