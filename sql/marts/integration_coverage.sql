-- integration_coverage: How much of the board, and of its customers' spend, each external tool covers.
-- grain: one row per integration type that has at least one link
-- key: integration_type
-- columns:
--   integration_type: the tool (for example jira, zendesk)
--   links: links of this type
--   ideas_linked: distinct loaded ideas with at least one link of this type (not additive
--     across types: an idea linked in two tools counts in both)
--   ideas_total: loaded ideas on the board
--   share_of_ideas: ideas_linked / ideas_total, to 4 decimals (0 when there are no ideas;
--     not additive across types, as ideas_linked)
--   commenter_companies: distinct companies whose followers commented or noted on the
--     linked ideas (not additive across types: a company behind ideas linked in two tools
--     counts in both)
--   commenter_monthly_spend: those companies' monthly spend, each company counted once,
--     rounded to cents (not additive across types; replaces demand_linked_monthly_spend,
--     which counted a company once per idea)
--   share_of_spend: commenter_monthly_spend over the monthly spend of every company
--     (company_feedback), to 4 decimals (0 when that total is 0 or no company is behind
--     the type; NULL when a company's spend is negative; replaces share_of_demand)
--   first_linked_at: the type's first link (UTC)
--   last_linked_at: the type's latest link (UTC)
-- tests:
--   not_null: links, ideas_linked, ideas_total, share_of_ideas, commenter_companies
--   not_null: commenter_monthly_spend
--   relationships: integration_type -> integration_links.integration_type
--   accepted_range: share_of_ideas 0..1
--   accepted_range: share_of_spend 0..1
--   expression: ideas_linked <= ideas_total and ideas_linked <= links
--   expression: first_linked_at <= last_linked_at
--   expression: commenter_companies <= (select count(*) from {{ ref('company_feedback') }})
with per_type as (
    select
        integration_type,
        count(*) as links,
        min(created_at) as first_linked_at,
        max(created_at) as last_linked_at
    from {{ ref('integration_links') }}
    where integration_type is not null
    group by integration_type
),

linked as (
    select distinct l.integration_type, i.idea_idx
    from {{ ref('integration_links') }} as l
    inner join {{ ref('ideas') }} as i using (idea_idx)
    where l.integration_type is not null
),

per_type_ideas as (
    select integration_type, count(*) as ideas_linked from linked group by integration_type
),

demand as (
    select
        group_key as integration_type,
        commenter_companies,
        commenter_monthly_spend,
        share_of_spend
    from {{ ref('demand_by_group') }}
    where group_kind = 'integration_type'
),

board as (
    select count(*) as ideas_total from {{ ref('ideas') }}
)

select
    p.integration_type,
    p.links,
    coalesce(i.ideas_linked, 0) as ideas_linked,
    board.ideas_total,
    round(case when board.ideas_total = 0 then 0.0
        else coalesce(i.ideas_linked, 0) / board.ideas_total end, 4)::double
        as share_of_ideas,
    coalesce(d.commenter_companies, 0) as commenter_companies,
    coalesce(d.commenter_monthly_spend, 0.0) as commenter_monthly_spend,
    case when d.integration_type is null then 0.0 else d.share_of_spend end as share_of_spend,
    p.first_linked_at,
    p.last_linked_at
from per_type as p
cross join board
left join per_type_ideas as i using (integration_type)
left join demand as d using (integration_type)
