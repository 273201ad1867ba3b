-- announcement_reactions: Emoji reactions to a post.
-- grain: one row per announcement and emoji
-- key: announcement_idx, emoji
-- columns:
--   announcement_idx: the post (announcements.announcement_idx)
--   emoji: the reaction
--   reaction_count: how many people reacted with it
select
    cast(announcement_idx as varchar) as announcement_idx,
    cast(reaction as varchar) as emoji,
    cast(count as bigint) as reaction_count
from {{ source('announcements__reactions') }}
