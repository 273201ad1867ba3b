-- topic_summary: Feedback, demand and shipping per topic.
-- grain: one row per topic
-- key: topic_idx
-- columns:
--   topic_idx: the topic's id (top_...)
--   topic_name: its name
--   sort_order: its position on the board (1 first)
--   ideas: loaded ideas filed under it
--   public_comments: public comments on those ideas
--   private_notes: private notes on those ideas
--   demand_monthly_spend: sum of those ideas' commenter_monthly_spend (a company behind
--     two of the ideas counts twice)
--   linked_records: external records linked to those ideas
--   shipped_ideas: those ideas announced by at least one published post
select
    t.topic_idx,
    t.topic_name,
    t.sort_order,
    count(ie.idea_idx) as ideas,
    coalesce(sum(ie.public_comments), 0)::bigint as public_comments,
    coalesce(sum(ie.private_notes), 0)::bigint as private_notes,
    round(coalesce(sum(ie.commenter_monthly_spend), 0), 2)::double as demand_monthly_spend,
    coalesce(sum(ie.linked_records), 0)::bigint as linked_records,
    count(ie.idea_idx) filter (where ie.shipped_in_announcements > 0) as shipped_ideas
from {{ ref('topics') }} as t
left join (select distinct idea_idx, topic_idx from {{ ref('idea_topics') }}) as it using (topic_idx)
left join {{ ref('idea_engagement') }} as ie using (idea_idx)
group by t.topic_idx, t.topic_name, t.sort_order
