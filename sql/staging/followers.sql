-- followers: People who follow the board (customers, prospects), as loaded.
-- grain: one row per follower
-- key: follower_idx
-- columns:
--   follower_idx: the follower's id (flw_...)
--   follower_name: display name
--   email: email address (unique per company, any case)
--   avatar_url: address of the avatar image
--   created_at: when the follower was created (UTC)
--   updated_at: when the follower last changed (UTC)
select
    cast(idx as varchar) as follower_idx,
    cast(name as varchar) as follower_name,
    cast(email as varchar) as email,
    cast(avatar as varchar) as avatar_url,
    cast(created_at as timestamptz) as created_at,
    cast(updated_at as timestamptz) as updated_at
from {{ source('followers') }}
