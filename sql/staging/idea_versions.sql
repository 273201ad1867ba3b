-- idea_versions: Each version of an idea's status, name and topics, as the syncs saw them
--   change (ideas_history).
-- grain: one row per idea and version
-- key: idea_idx, valid_from
-- columns:
--   idea_idx: the idea (ide_...)
--   idea_name: its title in this version
--   status_idx: its status in this version (NULL: none, or an idea known without /ideas)
--   topic_idxs: its topics in this version (JSON array of topic idxs, in the API's order)
--   valid_from: when this version began: the updated_at the idea carried when a sync first
--     read it (the latest moment the change can have happened), else that sync's time (UTC)
--   valid_to: when the next version began, or the sync that found the idea deleted; NULL
--     while current (UTC)
--   is_current: whether this is the idea's version now
select
    cast(idea_idx as varchar) as idea_idx,
    cast(name as varchar) as idea_name,
    cast(status_idx as varchar) as status_idx,
    cast(topic_idxs as json) as topic_idxs,
    cast(valid_from as timestamptz) as valid_from,
    cast(valid_to as timestamptz) as valid_to,
    cast(is_current as boolean) as is_current
from {{ source('ideas_history') }}
