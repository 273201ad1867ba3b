"""The reference server: a local, seeded, faithful implementation of the Feedback API v1.

Tests, benchmarks and the demo run against it, because the real service is not reachable
from here. Build one with :func:`feedback_sync.sandbox.app.create_app`; run it on loopback with
``feedback-sync sandbox``; control it through ``/_sandbox/...`` (tests and demos only).
"""
