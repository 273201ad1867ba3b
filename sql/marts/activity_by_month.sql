-- activity_by_month: The board's pulse: feedback, new ideas and new followers per month.
-- grain: one row per calendar month (UTC) from the first to the last month with any comment,
--   note, idea or follower created; months without any are rows of zeros. A month still
--   in progress when the data was loaded holds that month so far
-- key: month
-- columns:
--   month: first day of the month (UTC)
--   public_comments: public comments written in the month
--   private_notes: private notes written in the month
--   active_commenters: distinct followers who wrote a comment or note in the month (not
--     additive across months: a follower active in two months counts in both)
--   ideas_commented: distinct ideas that got a comment or note in the month (not additive
--     across months, as active_commenters)
--   new_ideas: ideas created in the month
--   new_followers: followers created in the month
-- tests:
--   not_null: public_comments, private_notes, active_commenters, ideas_commented
--   not_null: new_ideas, new_followers
--   expression: active_commenters <= public_comments + private_notes
--   expression: ideas_commented <= public_comments + private_notes
with events as (
    select
        cast(date_trunc('month', created_at at time zone 'UTC') as date) as month,
        'feedback' as kind,
        is_private,
        follower_idx,
        idea_idx
    from {{ ref('comments') }}
    union all
    select
        cast(date_trunc('month', created_at at time zone 'UTC') as date),
        'idea', null, null, idea_idx
    from {{ ref('ideas') }}
    union all
    select
        cast(date_trunc('month', created_at at time zone 'UTC') as date),
        'follower', null, follower_idx, null
    from {{ ref('followers') }}
),

bounds as (
    select min(month) as first_month, max(month) as last_month from events
),

months as (
    select cast(g.month as date) as month
    from bounds,
        generate_series(
            cast(first_month as timestamp), cast(last_month as timestamp), interval 1 month
        ) as g (month)
    where first_month is not null
),

per_month as (
    select
        month,
        count(*) filter (where kind = 'feedback' and not coalesce(is_private, false))
            as public_comments,
        count(*) filter (where kind = 'feedback' and coalesce(is_private, false))
            as private_notes,
        count(distinct follower_idx) filter (where kind = 'feedback') as active_commenters,
        count(distinct idea_idx) filter (where kind = 'feedback') as ideas_commented,
        count(*) filter (where kind = 'idea') as new_ideas,
        count(*) filter (where kind = 'follower') as new_followers
    from events
    where month is not null
    group by month
)

select
    months.month,
    coalesce(p.public_comments, 0) as public_comments,
    coalesce(p.private_notes, 0) as private_notes,
    coalesce(p.active_commenters, 0) as active_commenters,
    coalesce(p.ideas_commented, 0) as ideas_commented,
    coalesce(p.new_ideas, 0) as new_ideas,
    coalesce(p.new_followers, 0) as new_followers
from months
left join per_month as p using (month)
