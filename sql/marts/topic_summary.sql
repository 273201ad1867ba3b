-- topic_summary: Feedback, links, announcements and the companies behind each topic.
-- grain: one row per topic
-- key: topic_idx
-- columns:
--   topic_idx: the topic's id (top_...)
--   topic_name: its name
--   sort_order: its position on the board (1 first)
--   ideas: loaded ideas filed under it (not additive across topics: an idea under two
--     topics counts in both)
--   public_comments: public comments on those ideas (not additive across topics, as ideas)
--   private_notes: private notes on those ideas (not additive across topics, as ideas)
--   linked_records: external records linked to those ideas (not additive across topics)
--   announced_ideas: those ideas named in at least one published post (was shipped_ideas;
--     not additive across topics, as ideas)
--   commenter_companies: distinct companies whose followers commented or noted on those
--     ideas (not additive across topics)
--   commenter_monthly_spend: those companies' monthly spend, each company counted once,
--     rounded to cents (not additive across topics; replaces demand_monthly_spend, which
--     counted a company once per idea)
--   share_of_spend: commenter_monthly_spend over the monthly spend of every company
--     (company_feedback), to 4 decimals (0 when that total is 0 or no company is behind
--     the topic; NULL when a company's spend is negative)
-- tests:
--   not_null: ideas, public_comments, private_notes, linked_records, announced_ideas
--   not_null: commenter_companies, commenter_monthly_spend
--   relationships: topic_idx -> topics.topic_idx
--   accepted_range: share_of_spend 0..1
--   expression: announced_ideas <= ideas
--   expression: ideas > 0 or commenter_companies = 0
--   expression: commenter_companies <= (select count(*) from {{ ref('company_feedback') }})
with filed as (
    select distinct it.topic_idx, ie.idea_idx, ie.public_comments, ie.private_notes,
        ie.linked_records, ie.shipped_in_announcements
    from {{ ref('idea_topics') }} as it
    inner join {{ ref('idea_engagement') }} as ie using (idea_idx)
),

per_topic as (
    select
        topic_idx,
        count(*) as ideas,
        sum(public_comments)::bigint as public_comments,
        sum(private_notes)::bigint as private_notes,
        sum(linked_records)::bigint as linked_records,
        count(*) filter (where shipped_in_announcements > 0) as announced_ideas
    from filed
    group by topic_idx
),

demand as (
    select group_key as topic_idx, commenter_companies, commenter_monthly_spend, share_of_spend
    from {{ ref('demand_by_group') }}
    where group_kind = 'topic'
)

select
    t.topic_idx,
    t.topic_name,
    t.sort_order,
    coalesce(p.ideas, 0) as ideas,
    coalesce(p.public_comments, 0) as public_comments,
    coalesce(p.private_notes, 0) as private_notes,
    coalesce(p.linked_records, 0) as linked_records,
    coalesce(p.announced_ideas, 0) as announced_ideas,
    coalesce(d.commenter_companies, 0) as commenter_companies,
    coalesce(d.commenter_monthly_spend, 0.0) as commenter_monthly_spend,
    case when d.topic_idx is null then 0.0 else d.share_of_spend end as share_of_spend
from {{ ref('topics') }} as t
left join per_topic as p using (topic_idx)
left join demand as d using (topic_idx)
