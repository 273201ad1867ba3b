-- ideas: Ideas on the board (feature requests).
-- grain: one row per idea
-- key: idea_idx
-- columns:
--   idea_idx: the idea's id (ide_...)
--   idea_id: the idea's integer id
--   idea_name: the idea's title
--   status_idx: its status (statuses.status_idx); NULL when it has none
--   comment_count: public comments, as the service counts them
--   note_count: private notes, as the service counts them
--   created_at: when the idea was created (UTC)
--   updated_at: when it last changed; a new comment or note moves it (UTC)
select
    cast(idx as varchar) as idea_idx,
    cast(id as bigint) as idea_id,
    cast(name as varchar) as idea_name,
    cast(status_idx as varchar) as status_idx,
    cast(comment_count as bigint) as comment_count,
    cast(note_count as bigint) as note_count,
    cast(created_at as timestamptz) as created_at,
    cast(updated_at as timestamptz) as updated_at
from {{ source('ideas') }}
