-- integration_coverage: How much of the board each external tool covers.
-- grain: one row per integration type that has at least one link
-- key: integration_type
-- columns:
--   integration_type: the tool (for example jira, zendesk)
--   links: links of this type
--   ideas_linked: distinct loaded ideas with at least one link of this type
--   ideas_total: loaded ideas on the board
--   share_of_ideas: ideas_linked / ideas_total, to 4 decimals (0 when there are no ideas)
--   demand_linked_monthly_spend: commenter_monthly_spend summed over the linked ideas
--   share_of_demand: that demand over all ideas' commenter_monthly_spend, to 4 decimals
--     (0 when there is none)
--   first_linked_at: the type's first link (UTC)
--   last_linked_at: the type's latest link (UTC)
with board as (
    select
        count(*) as ideas_total,
        coalesce(sum(commenter_monthly_spend), 0) as demand_total
    from {{ ref('idea_engagement') }}
),

per_type as (
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
    select distinct l.integration_type, ie.idea_idx, ie.commenter_monthly_spend
    from {{ ref('integration_links') }} as l
    inner join {{ ref('idea_engagement') }} as ie using (idea_idx)
),

per_type_ideas as (
    select
        integration_type,
        count(*) as ideas_linked,
        coalesce(sum(commenter_monthly_spend), 0) as demand_linked_monthly_spend
    from linked
    group by integration_type
)

select
    p.integration_type,
    p.links,
    coalesce(i.ideas_linked, 0) as ideas_linked,
    board.ideas_total,
    round(case when board.ideas_total = 0 then 0.0
        else coalesce(i.ideas_linked, 0) / board.ideas_total end, 4) as share_of_ideas,
    round(coalesce(i.demand_linked_monthly_spend, 0), 2)::double as demand_linked_monthly_spend,
    round(case when board.demand_total = 0 then 0.0
        else coalesce(i.demand_linked_monthly_spend, 0) / board.demand_total end, 4)
        as share_of_demand,
    p.first_linked_at,
    p.last_linked_at
from per_type as p
cross join board
left join per_type_ideas as i using (integration_type)
