-- rejected_rows: API items that could not land as rows (no idx, an idx that is not text, or keys that become one column), each kept whole. Empty when every item landed.
-- grain: one row per resource and distinct item as sent
-- key: resource, record_sha256
-- columns:
--   resource: the resource whose list sent it (followers, comments, ...)
--   record_sha256: SHA-256 of the item's JSON text (a later run that meets it again keeps one row)
--   idx: the item's idx when it had a text one (its earlier row, if any, is kept)
--   reason: why it could not land, naming the keys
--   record: the item as sent (JSON)
select
    cast(resource as varchar) as resource,
    cast(record_sha256 as varchar) as record_sha256,
    cast(idx as varchar) as idx,
    cast(reason as varchar) as reason,
    cast(record as json) as record
from {{ source('rejected_rows') }}
