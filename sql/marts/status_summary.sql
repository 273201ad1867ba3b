-- status_summary: The status funnel: ideas, feedback, announcements and the companies behind each status.
-- grain: one row per status (ideas without a status, or with one not loaded, are not
--   counted)
-- key: status_idx
-- columns:
--   status_idx: the status's id (sts_...)
--   status_name: its name
--   color: its colour (#rrggbb)
--   funnel_position: the status's place in the funnel (1 first; the service's order of
--     creation, which is the board's column order)
--   ideas: loaded ideas in this status
--   public_comments: public comments on those ideas
--   private_notes: private notes on those ideas
--   announced_ideas: those ideas named in at least one published post (a post naming an
--     idea says nothing of its status; was shipped_ideas)
--   commenter_companies: distinct companies whose followers commented or noted on those
--     ideas (not additive across statuses: a company behind ideas in two statuses counts
--     in both)
--   commenter_monthly_spend: those companies' monthly spend, each company counted once,
--     rounded to cents (not additive across statuses, as commenter_companies; replaces
--     demand_monthly_spend, which counted a company once per idea)
--   share_of_spend: commenter_monthly_spend over the monthly spend of every company
--     (company_feedback), to 4 decimals (0 when that total is 0 or no company is behind
--     the status; NULL when a company's spend is negative)
-- tests:
--   not_null: funnel_position, ideas, public_comments, private_notes, announced_ideas
--   not_null: commenter_companies, commenter_monthly_spend
--   relationships: status_idx -> statuses.status_idx
--   accepted_range: share_of_spend 0..1
--   expression: announced_ideas <= ideas
--   expression: ideas > 0 or commenter_companies = 0
--   expression: commenter_companies <= (select count(*) from {{ ref('company_feedback') }})
with ideas as (
    select
        ie.idea_idx,
        ie.status_idx,
        ie.public_comments,
        ie.private_notes,
        ie.shipped_in_announcements
    from {{ ref('idea_engagement') }} as ie
),

per_status as (
    select
        status_idx,
        count(*) as ideas,
        sum(public_comments)::bigint as public_comments,
        sum(private_notes)::bigint as private_notes,
        count(*) filter (where shipped_in_announcements > 0) as announced_ideas
    from ideas
    group by status_idx
),

demand as (
    select group_key as status_idx, commenter_companies, commenter_monthly_spend, share_of_spend
    from {{ ref('demand_by_group') }}
    where group_kind = 'status'
)

select
    s.status_idx,
    s.status_name,
    s.color,
    row_number() over (order by s.created_at, s.status_idx) as funnel_position,
    coalesce(p.ideas, 0) as ideas,
    coalesce(p.public_comments, 0) as public_comments,
    coalesce(p.private_notes, 0) as private_notes,
    coalesce(p.announced_ideas, 0) as announced_ideas,
    coalesce(d.commenter_companies, 0) as commenter_companies,
    coalesce(d.commenter_monthly_spend, 0.0) as commenter_monthly_spend,
    case when d.status_idx is null then 0.0 else d.share_of_spend end as share_of_spend
from {{ ref('statuses') }} as s
left join per_status as p using (status_idx)
left join demand as d using (status_idx)
