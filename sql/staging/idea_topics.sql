-- idea_topics: The topics an idea is filed under.
-- grain: one row per idea and topic
-- key: idea_idx, topic_idx
-- columns:
--   idea_idx: the idea (ideas.idea_idx)
--   topic_idx: the topic (topics.topic_idx)
--   position: place of the topic in the idea's list (0 first)
select
    cast(idea_idx as varchar) as idea_idx,
    cast(topic_idx as varchar) as topic_idx,
    cast(_dlt_list_idx as bigint) as position
from {{ source('ideas__topics') }}
