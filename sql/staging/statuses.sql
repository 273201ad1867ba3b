-- statuses: The states an idea moves through (the board's columns).
-- grain: one row per status
-- key: status_idx
-- columns:
--   status_idx: the status's id (sts_...)
--   status_name: its name
--   color: its colour (#rrggbb)
--   created_at: when it was created (UTC)
--   updated_at: when it last changed (UTC)
select
    cast(idx as varchar) as status_idx,
    cast(name as varchar) as status_name,
    cast(color as varchar) as color,
    cast(created_at as timestamptz) as created_at,
    cast(updated_at as timestamptz) as updated_at
from {{ source('statuses') }}
