"""The push's kinds: one module per API resource it writes (``followers``, ``notes``,
``announcements``, ``taxonomy``), each a ``Kind`` (``base``) that says how rows become
records, how the service's copy is read (warehouse, then the API), and which requests
create, update and delete. ``KINDS`` names them for the targets' headers."""

from __future__ import annotations

from feedback_sync.push.kinds.announcements import Announcements
from feedback_sync.push.kinds.base import Kind
from feedback_sync.push.kinds.followers import Followers
from feedback_sync.push.kinds.notes import IdeaNotes
from feedback_sync.push.kinds.taxonomy import Statuses, Topics

# every kind by the name a target's header gives (``kind: followers``)
KINDS: dict[str, Kind] = {
    k.name: k for k in (Topics(), Statuses(), Followers(), IdeaNotes(), Announcements())
}
