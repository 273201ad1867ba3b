-- announcement_ideas: The ideas a post announces (ships).
-- grain: one row per announcement and idea
-- key: announcement_idx, idea_idx
-- columns:
--   announcement_idx: the post (announcements.announcement_idx)
--   idea_idx: the idea (ideas.idea_idx)
--   position: place of the idea in the post's list (0 first)
--   idea_name: the idea's name as the post shows it
select
    cast(announcement_idx as varchar) as announcement_idx,
    cast(idx as varchar) as idea_idx,
    cast(_dlt_list_idx as bigint) as position,
    cast(name as varchar) as idea_name
from {{ source('announcements__ideas') }}
