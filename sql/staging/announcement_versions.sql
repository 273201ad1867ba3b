-- announcement_versions: Each version of a post's publication state, as the syncs saw it
--   change (announcements_history; kept when history_announcements is on).
-- grain: one row per announcement and version
-- key: announcement_idx, valid_from
-- columns:
--   announcement_idx: the post (ann_...)
--   is_published: whether it was published in this version
--   published_at: its publication time in this version (NULL for a draft; UTC)
--   valid_from: when this version began: the updated_at the post carried when a sync first
--     read it, else that sync's time (a scheduled post going live moves no updated_at; UTC)
--   valid_to: when the next version began, or the full sync that found the post deleted;
--     NULL while current (UTC)
--   is_current: whether this is the post's version now
select
    cast(announcement_idx as varchar) as announcement_idx,
    cast(is_published as boolean) as is_published,
    cast(published_at as timestamptz) as published_at,
    cast(valid_from as timestamptz) as valid_from,
    cast(valid_to as timestamptz) as valid_to,
    cast(is_current as boolean) as is_current
from {{ source('announcements_history') }}
