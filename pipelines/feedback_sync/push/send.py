"""Sending one target's planned writes (``Sender``), each journaled twice: its intent,
committed before the request leaves, and then its outcome.

The first write goes alone, one that carries custom attributes if there is one: a 403 for
custom attributes is learned from it, once (``CustomAttributes``), and the writes after it
go without them. The rest go ``max_concurrency`` at a time.

A write whose outcome is unknown (a timeout, a dropped connection, an unreadable answer) is
never sent again blindly: a create is looked for at the service first, and an update or a
delete that got no answer at all is left for the next run, which reads the record and
sends only what is still missing.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from feedback_sync.errors import ApiError, NotFound, OutcomeUnknown
from feedback_sync.push.journal import Journal
from feedback_sync.push.kinds.base import Context, Parents, Request
from feedback_sync.push.plan import Step, TargetPlan

NOTHING_LEFT = "custom attributes are disabled at the service; nothing else to send"


class CustomAttributes:
    """Whether the service refuses custom attributes, as the threads sending one target's
    writes learned it (a 403), and from which write."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.disabled = False
        self.learned: str | None = None  # from which write, and what the service said

    def learn(self, why: str) -> None:
        with self._lock:
            if not self.disabled:
                self.disabled = True
                self.learned = why


@dataclass
class Sender:
    """Sends a plan's writes and journals what came of each: confirmed, rejected, held,
    unknown (looked for first, on a later run), or sent again while retries allow. What
    landed and what failed is told to ``parents``, when the plan's kind provides them."""

    plan: TargetPlan
    ctx: Context
    journal: Journal
    parents: Parents
    custom: CustomAttributes = field(default_factory=CustomAttributes)

    def send(self) -> None:
        steps = self.plan.writes()
        if not steps:
            return
        kind = self.plan.kind
        first = next(
            (s for s in steps if s.request is not None and kind.carries_custom(s.request)),
            steps[0],
        )
        self._write(first)
        with ThreadPoolExecutor(
            max_workers=self.ctx.client.settings.max_concurrency,
            thread_name_prefix="feedback-push",
        ) as pool:
            list(pool.map(self._write, [s for s in steps if s is not first]))

    def _write(self, step: Step) -> None:
        """Sends one step's write, again while ``_again`` allows, and journals its outcome."""
        kind = self.plan.kind
        if self._held(step):
            return
        request = step.request
        assert request is not None
        stripped = False
        if self.custom.disabled:
            request, stripped = kind.strip_custom(request)
            if request is None:
                self._rejected(step, 403, NOTHING_LEFT)
                return
        attempts = 0
        while True:
            attempts += 1
            seq = self.journal.next_seq()
            self.journal.row(seq, step, "intent", idx=step.idx, payload=request.body)
            try:
                body = self.ctx.client.send_json(
                    request.method,
                    request.path,
                    request.body,
                    params=request.params,
                    resource=f"write:{kind.resource}",
                    # never sent again blindly: an update that timed out may still land, and
                    # sending it again would apply it twice. What to do is decided below
                    idempotent=False,
                )
            except OutcomeUnknown as exc:
                if self._unknown(step, seq, exc, request, attempts):
                    continue
                return
            except NotFound as exc:
                if step.action == "delete":
                    self._confirmed(step, seq, step.idx, request, "already gone")
                else:
                    self._rejected(step, exc.status, exc.detail, seq)
                return
            except ApiError as exc:
                if exc.status == 403 and kind.sends_custom_attributes and not stripped:
                    self._refused_custom(step, seq, exc)
                    request, stripped = kind.strip_custom(request)
                    if request is None:
                        self._rejected(step, 403, NOTHING_LEFT)
                        return
                    continue
                self._rejected(step, exc.status, exc.detail, seq)
                return
            self._landed(step, seq, request, body, stripped=stripped)
            return

    def _held(self, step: Step) -> bool:
        """Whether a create is held back because its parent failed to land; a create whose
        parent landed gets its request made anew (it names the parent's idx)."""
        kind, record = self.plan.kind, step.record
        if step.action != "create" or record is None or kind.parent(record) is None:
            return False
        why = kind.held(record, self.parents)
        if why is not None:
            step.outcome, step.message = "held", why
            self.journal.row(self.journal.next_seq(), step, "held", message=step.message)
            return True
        step.request = kind.create(record, self.ctx)
        return False

    def _refused_custom(self, step: Step, seq: int, exc: ApiError) -> None:
        """A 403 for custom attributes: learned (once), and this attempt journaled rejected."""
        self.custom.learn(f"learned from {step.label}: {exc.detail}")
        self.journal.row(seq, step, "rejected", status=403, message=exc.detail)

    def _landed(
        self, step: Step, seq: int, request: Request, body: dict[str, Any], *, stripped: bool
    ) -> None:
        """The service accepted the write; ``stripped``: without its custom attributes, so
        the step is reported rejected although what was left of it landed."""
        kind = self.plan.kind
        idx = kind.created_idx(body) if step.action == "create" else step.idx
        note = (
            f"sent without {kind.custom_fields} (custom attributes are disabled)"
            if stripped
            else None
        )
        self._confirmed(step, seq, idx, request, note, whole=not stripped)
        if stripped:
            step.outcome, step.status, step.message = (
                "rejected",
                403,
                f"landed without {kind.custom_fields}: "
                "custom attributes are disabled at the service",
            )

    def _unknown(
        self, step: Step, seq: int, exc: OutcomeUnknown, request: Request, attempts: int
    ) -> bool:
        """A write whose outcome is unknown: True when it is to be sent again."""
        if step.action == "create":
            return self._unknown_create(step, seq, exc, request, attempts)
        settled = self._settle_unknown_change(step, seq, exc, request)
        return not settled and self._again(step, exc, attempts)

    def _unknown_create(
        self, step: Step, seq: int, exc: OutcomeUnknown, request: Request, attempts: int
    ) -> bool:
        """A create whose outcome is unknown: looked for at the service, and confirmed if it
        landed; with no answer at all it stays unknown for the next run to look for; when the
        service answered and it is absent, True if it may be sent again."""
        try:
            found = self.plan.kind.lookup(self.ctx, step.key, request.body)
        except ApiError as lookup_failed:
            found = None
            exc = OutcomeUnknown(
                exc.resource,
                exc.method,
                exc.url,
                exc.status,
                f"{exc.detail}; the lookup failed too: {lookup_failed.detail}",
            )
        if found is not None:
            landed = "landed (found after an unknown outcome)"
            self._confirmed(step, seq, found, request, landed)
            return False
        if exc.status is None:
            # no answer at all (a timeout, a dropped connection): the service may still be
            # making it. Not sent again now; the next run looks for it first
            self._unanswered(step, seq, exc, "not found yet, the next run looks for it again")
            return False
        self.journal.row(seq, step, "absent", status=exc.status, message=exc.detail)
        return self._again(step, exc, attempts)

    def _again(self, step: Step, exc: OutcomeUnknown, attempts: int) -> bool:
        """After a write that did not land: True once it has waited to send it again; False
        when the attempts are used up (the step is then reported as unknown)."""
        client = self.ctx.client
        if attempts <= client.settings.max_retries:
            client.wait_before_retry(attempts)
            return True
        step.outcome, step.status, step.message = "unknown", exc.status, exc.detail
        self._failed(step)
        return False

    def _settle_unknown_change(
        self, step: Step, seq: int, exc: OutcomeUnknown, request: Request
    ) -> bool:
        """An update or delete whose outcome is unknown: settled (True), or to be sent again.

        A 2xx whose body was unreadable landed. No answer at all (a timeout, a dropped
        connection) may still land: it is not sent again in this run, and the next run reads
        the record and sends only what is still missing. An error answer (5xx) is sent again.
        """
        if exc.status is not None and 200 <= exc.status < 300:
            note = f"landed (the service answered {exc.status}; its answer was unreadable)"
            self._confirmed(step, seq, step.idx, request, note)
            return True
        if exc.status is None:
            self._unanswered(
                step, seq, exc, "not sent again now, the next run reads it and decides"
            )
            return True
        self.journal.row(seq, step, "unknown", status=exc.status, message=exc.detail)
        return False

    def _unanswered(self, step: Step, seq: int, exc: OutcomeUnknown, note: str) -> None:
        """A write that got no answer at all: its outcome is unknown, journaled as such."""
        step.outcome, step.status = "unknown", None
        step.message = f"{exc.detail}; {note}"
        self.journal.row(seq, step, "unknown", message=step.message)
        self._failed(step)

    def _confirmed(
        self,
        step: Step,
        seq: int,
        idx: str | None,
        request: Request,
        note: str | None,
        *,
        whole: bool = True,
    ) -> None:
        """The server confirmed the write: its outcome and the snapshot move together.
        ``whole``: all the record's fields landed (not so when custom fields were dropped)."""
        step.outcome, step.idx, step.message = "confirmed", idx or step.idx, note
        desired = step.record.fields if step.record is not None and whole else None
        self.journal.confirm(
            seq, step, idx=step.idx, payload=request.body, desired=desired, message=note
        )
        if self.plan.kind.provides_parents and step.record is not None and step.idx:
            self.parents.landed(step.key, step.idx)

    def _rejected(
        self, step: Step, status: int | None, message: str, seq: int | None = None
    ) -> None:
        step.outcome, step.status, step.message = "rejected", status, message
        self.journal.row(
            seq if seq is not None else self.journal.next_seq(),
            step,
            "rejected",
            idx=step.idx,
            status=status,
            message=message,
        )
        self._failed(step)

    def _failed(self, step: Step) -> None:
        """A parent that did not land: the records waiting for it are held back."""
        if self.plan.kind.provides_parents and step.record is not None:
            self.parents.fail(step.key, step.message or "failed")
