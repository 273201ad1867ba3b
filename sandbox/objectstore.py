"""A throwaway S3-compatible object store for the tests of Delta tables on object storage.

The sandbox stands in for the feedback service; this stands in for a team's bucket.
``running()`` starts moto's S3 server (``moto[s3]``, a development dependency) in its own
process on a free loopback port, makes one bucket, yields its address and a key pair, and
stops the server afterwards (its data lives in memory only).

It is what ``s3://`` means to the code under test only through dlt's own settings
(``DESTINATION__FILESYSTEM__BUCKET_URL`` and ``DESTINATION__FILESYSTEM__CREDENTIALS__*``,
with ``ENDPOINT_URL`` pointing here), as MinIO or any other S3-compatible store would be.

``python -m sandbox.objectstore`` starts one and prints those settings until interrupted.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import httpx

START_TIMEOUT_S = 30
REGION = "us-east-1"


class ObjectStoreUnavailable(RuntimeError):
    """The S3-compatible server is not installed here, or did not start."""


@dataclass(frozen=True)
class Store:
    """A running store holding one empty bucket."""

    endpoint: str
    bucket: str
    access_key: str
    secret_key: str

    def bucket_url(self, prefix: str = "") -> str:
        return f"s3://{self.bucket}/{prefix}".rstrip("/")

    def dlt_env(self, prefix: str = "") -> dict[str, str]:
        """dlt's settings for a filesystem destination in this bucket (under ``prefix``)."""
        return {
            "DESTINATION__FILESYSTEM__BUCKET_URL": self.bucket_url(prefix),
            "DESTINATION__FILESYSTEM__CREDENTIALS__AWS_ACCESS_KEY_ID": self.access_key,
            "DESTINATION__FILESYSTEM__CREDENTIALS__AWS_SECRET_ACCESS_KEY": self.secret_key,
            "DESTINATION__FILESYSTEM__CREDENTIALS__ENDPOINT_URL": self.endpoint,
            "DESTINATION__FILESYSTEM__CREDENTIALS__REGION_NAME": REGION,
        }

    def read(self, key: str) -> bytes:
        """One object's bytes (a signed GetObject, through botocore)."""
        import botocore.session

        client = botocore.session.get_session().create_client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
        )
        body = client.get_object(Bucket=self.bucket, Key=key)["Body"]
        try:
            data: bytes = body.read()
        finally:
            body.close()
            client.close()
        return data

    def keys(self, prefix: str = "") -> list[str]:
        """The object keys under ``prefix`` (S3's ListObjectsV2, unsigned: moto allows it)."""
        keys: list[str] = []
        token: str | None = None
        while True:
            params = {"list-type": "2", "prefix": prefix}
            if token:
                params["continuation-token"] = token
            response = httpx.get(f"{self.endpoint}/{self.bucket}", params=params, timeout=30)
            response.raise_for_status()
            text = response.text
            keys += [part.split("</Key>")[0] for part in text.split("<Key>")[1:]]
            if "<IsTruncated>true</IsTruncated>" not in text:
                return keys
            token = text.split("<NextContinuationToken>")[1].split("</NextContinuationToken>")[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def running() -> Iterator[Store]:
    """A started store with one bucket, stopped on exit.

    Raises:
        ObjectStoreUnavailable: moto is not installed, or its server did not answer.
    """
    try:
        import moto.server  # noqa: F401  (only to say clearly what is missing)
    except ImportError as exc:
        raise ObjectStoreUnavailable(f"moto[s3] is not installed: {exc}") from exc
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    # its request log goes to a file: a pipe nobody reads would stall the server when full
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_until_up(process, endpoint, log)
            bucket = "feedback-" + secrets.token_hex(4)
            httpx.put(f"{endpoint}/{bucket}", timeout=30).raise_for_status()
            key_id = "AKIA" + secrets.token_hex(8).upper()
            yield Store(endpoint, bucket, key_id, secrets.token_hex(20))
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_up(process: subprocess.Popen[bytes], endpoint: str, log: IO[str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            log.seek(0)
            raise ObjectStoreUnavailable(f"moto's server exited: {log.read()[-2000:]}")
        try:
            httpx.get(f"{endpoint}/moto-api/", timeout=1)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise ObjectStoreUnavailable(
                    f"moto's server did not answer on {endpoint} within {START_TIMEOUT_S} s"
                ) from None
            time.sleep(0.1)


def main() -> None:
    """Starts a store and prints dlt's settings for it until Ctrl-C."""
    with running() as store:
        print(f"S3-compatible store on {store.endpoint}, bucket {store.bucket}")
        for name, value in store.dlt_env("feedback").items():
            print(f"{name}={value}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
