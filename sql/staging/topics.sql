-- topics: Topics that group ideas.
-- grain: one row per topic
-- key: topic_idx
-- columns:
--   topic_idx: the topic's id (top_...)
--   topic_name: its name
--   idea_count: ideas filed under it, as the service counts them (the spec's number: double)
--   sort_order: its position on the board (1 first; the spec's number: double)
--   created_at: when it was created (UTC)
--   updated_at: when it last changed (UTC)
select
    cast(idx as varchar) as topic_idx,
    cast(name as varchar) as topic_name,
    cast(idea_count as double) as idea_count,
    cast("order" as double) as sort_order,
    cast(created_at as timestamptz) as created_at,
    cast(updated_at as timestamptz) as updated_at
from {{ source('topics') }}
