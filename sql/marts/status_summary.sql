-- status_summary: The status funnel: ideas, feedback and demand per status.
-- grain: one row per status (ideas without a status are not counted)
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
--   demand_monthly_spend: sum of those ideas' commenter_monthly_spend
--   shipped_ideas: those ideas announced by at least one published post
select
    s.status_idx,
    s.status_name,
    s.color,
    row_number() over (order by s.created_at, s.status_idx) as funnel_position,
    count(ie.idea_idx) as ideas,
    coalesce(sum(ie.public_comments), 0)::bigint as public_comments,
    coalesce(sum(ie.private_notes), 0)::bigint as private_notes,
    round(coalesce(sum(ie.commenter_monthly_spend), 0), 2)::double as demand_monthly_spend,
    count(ie.idea_idx) filter (where ie.shipped_in_announcements > 0) as shipped_ideas
from {{ ref('statuses') }} as s
left join {{ ref('idea_engagement') }} as ie using (status_idx)
group by s.status_idx, s.status_name, s.color, s.created_at
