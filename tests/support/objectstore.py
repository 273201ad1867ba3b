"""Throwaway object stores for the tests of Delta tables on object storage.

The sandbox stands in for the feedback service; these stand in for a team's bucket. Each
runs in its own process on a free loopback port, holds its data in memory, makes one
bucket (container), and is stopped afterwards:

- ``running()``: moto's S3 server (``moto[s3]``, a development dependency), for ``s3://``;
- ``running_azure()``: Azurite, Microsoft's Azure Storage emulator (npm, installed by
  ``./run test`` into ``tests/support/azurite/``), for ``az://``.

The code under test reaches them only through dlt's own settings
(``DESTINATION__FILESYSTEM__BUCKET_URL``, ``DESTINATION__FILESYSTEM__CREDENTIALS__*``), as
it would a real bucket. What an emulator needs beyond a real account is named where it is
set (``dlt_env``).

``python -m tests.support.objectstore [s3|az]`` starts one and prints those settings until
interrupted.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

START_TIMEOUT_S = 30
REGION = "us-east-1"


# Azurite's one account and its published key (the emulator's, not a secret anywhere)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
AZURITE_DIR = Path(__file__).parent / "azurite"


class ObjectStoreUnavailable(RuntimeError):
    """The store's server is not installed here, or did not start."""


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

    def storage_options(self) -> dict[str, str]:
        """delta-rs's options for reading the bucket, as a reader of it would give them."""
        return {
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
            "endpoint_url": self.endpoint,
            "region": REGION,
            "aws_allow_http": "true",
        }

    def reader_env(self) -> dict[str, str]:
        """Environment a delta-rs reader of this store needs besides its options."""
        return {}

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
    """A started S3-compatible store with one bucket, stopped on exit.

    Raises:
        ObjectStoreUnavailable: moto is not installed, or its server did not answer.
    """
    try:
        import moto.server  # noqa: F401  (only to say clearly what is missing)
    except ImportError as exc:
        raise ObjectStoreUnavailable(f"moto[s3] is not installed: {exc}") from exc
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with _serve(command, f"{endpoint}/moto-api/"):
        bucket = "feedback-" + secrets.token_hex(4)
        httpx.put(f"{endpoint}/{bucket}", timeout=30).raise_for_status()
        key_id = "AKIA" + secrets.token_hex(8).upper()
        yield Store(endpoint, bucket, key_id, secrets.token_hex(20))


@dataclass(frozen=True)
class AzureStore:
    """A running Azurite holding one empty container."""

    blob_url: str  # http://127.0.0.1:<port>, Azurite's blob service
    container: str

    @property
    def endpoint(self) -> str:
        return f"{self.blob_url}/{AZURITE_ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
            f"AccountKey={AZURITE_KEY};BlobEndpoint={self.endpoint};"
        )

    def bucket_url(self, prefix: str = "") -> str:
        return f"az://{self.container}/{prefix}".rstrip("/")

    def dlt_env(self, prefix: str = "") -> dict[str, str]:
        """dlt's settings for a filesystem destination in this container (under ``prefix``):
        the account's name and key, as for a real account, and what only an emulator
        needs: the blob endpoint for adlfs (dlt's ``kwargs``, given to fsspec), emulator
        mode for delta-rs (dlt's ``deltalake_storage_options``) and its address
        (``AZURITE_BLOB_STORAGE_URL``, read by delta-rs's object store in that mode)."""
        return {
            "DESTINATION__FILESYSTEM__BUCKET_URL": self.bucket_url(prefix),
            "DESTINATION__FILESYSTEM__CREDENTIALS__AZURE_STORAGE_ACCOUNT_NAME": AZURITE_ACCOUNT,
            "DESTINATION__FILESYSTEM__CREDENTIALS__AZURE_STORAGE_ACCOUNT_KEY": AZURITE_KEY,
            "DESTINATION__FILESYSTEM__KWARGS": json.dumps(
                {"connection_string": self.connection_string}
            ),
            "DESTINATION__FILESYSTEM__DELTALAKE_STORAGE_OPTIONS": json.dumps(
                {"azure_storage_use_emulator": "true"}
            ),
            **self.reader_env(),
        }

    def storage_options(self) -> dict[str, str]:
        return {
            "account_name": AZURITE_ACCOUNT,
            "account_key": AZURITE_KEY,
            "use_emulator": "true",
        }

    def reader_env(self) -> dict[str, str]:
        return {"AZURITE_BLOB_STORAGE_URL": self.blob_url}

    def _container(self) -> Any:
        from azure.storage.blob import BlobServiceClient

        service = BlobServiceClient.from_connection_string(self.connection_string)
        return service.get_container_client(self.container)

    def keys(self, prefix: str = "") -> list[str]:
        with self._container() as container:
            return [blob.name for blob in container.list_blobs(name_starts_with=prefix)]

    def read(self, key: str) -> bytes:
        with self._container() as container:
            data: bytes = container.download_blob(key).readall()
            return data


def azurite_command() -> Path:
    """Azurite's blob server: ``FEEDBACK_SYNC_AZURITE``, else the one ``./run test`` put
    in ``tests/support/azurite/``, else ``PATH``'s.

    Raises:
        ObjectStoreUnavailable: none is installed.
    """
    configured = os.environ.get("FEEDBACK_SYNC_AZURITE")
    candidates = [
        Path(configured) if configured else None,
        AZURITE_DIR / "node_modules" / ".bin" / "azurite-blob",
        Path(found) if (found := shutil.which("azurite-blob")) else None,
    ]
    for candidate in candidates:
        if candidate is not None and candidate.exists():
            return candidate
    raise ObjectStoreUnavailable(
        "Azurite is not installed (./run test installs it with npm into tests/support/azurite/, "
        "or set FEEDBACK_SYNC_AZURITE to an azurite-blob)"
    )


@contextlib.contextmanager
def running_azure() -> Iterator[AzureStore]:
    """A started Azurite with one container, stopped on exit.

    Raises:
        ObjectStoreUnavailable: Azurite is not installed, or did not answer.
    """
    command = azurite_command()
    port = _free_port()
    blob_url = f"http://127.0.0.1:{port}"
    argv = [str(command), "--blobHost", "127.0.0.1", "--blobPort", str(port)]
    # in memory; the Azure SDK in the lock may speak a newer API version than Azurite knows
    argv += ["--inMemoryPersistence", "--skipApiVersionCheck", "--loose", "--silent"]
    with _serve(argv, blob_url, graceful=False):
        store = AzureStore(blob_url, "feedback-" + secrets.token_hex(4))
        from azure.storage.blob import BlobServiceClient

        with BlobServiceClient.from_connection_string(store.connection_string) as service:
            service.create_container(store.container)
        yield store


@contextlib.contextmanager
def _serve(argv: list[str], ready_url: str, graceful: bool = True) -> Iterator[None]:
    """Runs ``argv`` until the block ends, once ``ready_url`` answers at all; then stops it
    (``graceful``: SIGTERM first, else SIGKILL at once, for a server whose data is only in
    memory anyway and that waits out idle connections on SIGTERM, as Azurite does)."""
    # its request log goes to a file: a pipe nobody reads would stall the server when full
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_until_up(process, ready_url, log)
            yield
        finally:
            if graceful:
                process.terminate()
            try:
                process.wait(timeout=10 if graceful else 0)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_up(process: subprocess.Popen[bytes], url: str, log: IO[str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            log.seek(0)
            raise ObjectStoreUnavailable(f"{process.args!r} exited: {log.read()[-2000:]}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise ObjectStoreUnavailable(
                    f"{process.args!r} did not answer on {url} within {START_TIMEOUT_S} s"
                ) from None
            time.sleep(0.1)


def main() -> None:
    """Starts a store (``s3``, the default, or ``az``) and prints dlt's settings for it
    until Ctrl-C."""
    kind = sys.argv[1] if len(sys.argv) > 1 else "s3"
    opened: contextlib.AbstractContextManager[Store | AzureStore]
    opened = running() if kind == "s3" else running_azure()
    with opened as store:
        print(f"{kind} store on {store.endpoint}, bucket {store.bucket_url()}")
        for name, value in store.dlt_env("feedback").items():
            print(f"{name}={value}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
