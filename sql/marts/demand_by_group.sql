-- demand_by_group: The customer companies behind each status, topic and tool: each company counted once per group.
-- grain: one row per group of ideas (a status, a topic, an integration type) whose ideas at
--   least one company's followers wrote on; status_summary, topic_summary and
--   integration_coverage read theirs from here
-- key: group_kind, group_key
-- columns:
--   group_kind: 'status', 'topic' or 'integration_type'
--   group_key: the status's idx, the topic's idx or the integration type
--   commenter_companies: distinct companies whose followers commented or noted on the
--     group's loaded ideas (not additive across groups: a company behind ideas in two
--     statuses counts in both)
--   commenter_monthly_spend: those companies' monthly spend, each company counted once,
--     rounded to cents (not additive across groups, as commenter_companies)
--   share_of_spend: commenter_monthly_spend over the monthly spend of every company
--     (company_feedback), to 4 decimals (0 when that total is 0; NULL when a company's
--     spend is negative, where a share of the total means nothing)
-- tests:
--   not_null: commenter_monthly_spend
--   accepted_range: commenter_companies 1..
--   accepted_range: share_of_spend 0..1
--   expression: group_kind in ('status', 'topic', 'integration_type')
--   expression: commenter_companies <= (select count(*) from {{ ref('company_feedback') }})
with loaded as (
    select idea_idx, status_idx from {{ ref('ideas') }}
),

members as (
    select 'status' as group_kind, l.status_idx as group_key, l.idea_idx
    from loaded as l
    where l.status_idx in (select status_idx from {{ ref('statuses') }})
    union
    select 'topic', it.topic_idx, it.idea_idx
    from {{ ref('idea_topics') }} as it
    inner join loaded as l using (idea_idx)
    union
    select 'integration_type', il.integration_type, il.idea_idx
    from {{ ref('integration_links') }} as il
    inner join loaded as l using (idea_idx)
    where il.integration_type is not null
),

companies as (
    select distinct m.group_kind, m.group_key, ica.company_id
    from members as m
    inner join {{ ref('idea_company_activity') }} as ica using (idea_idx)
),

board as (
    select
        coalesce(sum(monthly_spend), 0) as total_spend,
        coalesce(bool_or(monthly_spend < 0), false) as has_credit
    from {{ ref('company_feedback') }}
),

per_group as (
    select
        c.group_kind,
        c.group_key,
        count(*) as commenter_companies,
        coalesce(sum(cf.monthly_spend), 0) as spend
    from companies as c
    inner join {{ ref('company_feedback') }} as cf using (company_id)
    group by c.group_kind, c.group_key
)

select
    g.group_kind,
    g.group_key,
    g.commenter_companies,
    round(g.spend, 2)::double as commenter_monthly_spend,
    (case
        when board.has_credit then null
        when board.total_spend = 0 then 0.0
        else round(g.spend / board.total_spend, 4)
    end)::double as share_of_spend
from per_group as g
cross join board
