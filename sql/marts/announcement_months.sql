-- announcement_months: The changelog's cadence: posts, reactions and announced ideas per month, each post counted once.
-- grain: one row per calendar month (UTC) from the first to the last month with a post
--   (published, scheduled or draft); months without any are rows of zeros. A month still
--   in progress when the data was loaded holds that month so far
-- key: month
-- columns:
--   month: first day of the month (UTC): of published_at for published and scheduled posts,
--     of created_at for drafts
--   posts_published: posts published in the month; additive: the sum is every published
--     post
--   scheduled_posts: posts scheduled for the month (published_at in the future)
--   drafts: drafts created in the month (no published_at)
--   reactions_total: emoji reactions on the month's published posts
--   ideas_announced: distinct ideas the month's published posts name (not additive across
--     months: an idea named in two months counts in both)
-- tests:
--   not_null: posts_published, scheduled_posts, drafts, reactions_total, ideas_announced
--   accepted_range: posts_published 0..
--   expression: posts_published > 0 or reactions_total + ideas_announced = 0
with posts as (
    select
        announcement_idx,
        case
            when is_published then 'published'
            when published_at is not null then 'scheduled'
            else 'draft'
        end as post_state,
        cast(date_trunc('month', coalesce(published_at, created_at) at time zone 'UTC') as date)
            as month
    from {{ ref('announcements') }}
),

bounds as (
    select min(month) as first_month, max(month) as last_month from posts
),

months as (
    select cast(g.month as date) as month
    from bounds,
        generate_series(
            cast(first_month as timestamp), cast(last_month as timestamp), interval 1 month
        ) as g (month)
    where first_month is not null
),

counts as (
    select
        month,
        count(*) filter (where post_state = 'published') as posts_published,
        count(*) filter (where post_state = 'scheduled') as scheduled_posts,
        count(*) filter (where post_state = 'draft') as drafts
    from posts
    group by month
),

reactions as (
    select p.month, sum(r.reaction_count)::bigint as reactions_total
    from posts as p
    inner join {{ ref('announcement_reactions') }} as r using (announcement_idx)
    where p.post_state = 'published'
    group by p.month
),

announced as (
    select p.month, count(distinct ai.idea_idx) as ideas_announced
    from posts as p
    inner join {{ ref('announcement_ideas') }} as ai using (announcement_idx)
    where p.post_state = 'published'
    group by p.month
)

select
    months.month,
    coalesce(counts.posts_published, 0) as posts_published,
    coalesce(counts.scheduled_posts, 0) as scheduled_posts,
    coalesce(counts.drafts, 0) as drafts,
    coalesce(reactions.reactions_total, 0) as reactions_total,
    coalesce(announced.ideas_announced, 0) as ideas_announced
from months
left join counts using (month)
left join reactions using (month)
left join announced using (month)
