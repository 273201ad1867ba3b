import os

# dlt's anonymous telemetry stays off in tests (and in the subprocesses they start)
os.environ["RUNTIME__DLTHUB_TELEMETRY"] = "false"

pytest_plugins = ["sandbox.testing"]
