-- announcement_calendar: The changelog's cadence: posts, reactions and shipped ideas per month and category.
-- grain: one row per calendar month (UTC) and category that has at least one post; a post
--   filed under two categories counts in both; posts without a category under '(none)'
-- key: month, category_idx
-- columns:
--   month: first day of the month (UTC): of published_at for published and scheduled posts,
--     of created_at for drafts
--   category_idx: the category's id, or '(none)'
--   category_name: the category's name, or '(uncategorized)'
--   posts_published: posts published in the month
--   scheduled_posts: posts scheduled for the month (published_at in the future)
--   drafts: drafts created in the month (no published_at)
--   reactions_total: emoji reactions on the month's published posts
--   reactions_by_emoji: those reactions per emoji (MAP emoji -> count; empty if none)
--   ideas_shipped: distinct ideas the month's published posts announce
with posts as (
    select
        announcement_idx,
        is_published,
        case
            when is_published then 'published'
            when published_at is not null then 'scheduled'
            else 'draft'
        end as post_state,
        cast(date_trunc('month', coalesce(published_at, created_at) at time zone 'UTC') as date)
            as month
    from {{ ref('announcements') }}
),

filed as (
    select distinct
        p.*,
        coalesce(c.category_idx, '(none)') as category_idx,
        coalesce(c.category_name, '(uncategorized)') as category_name
    from posts as p
    left join {{ ref('announcement_categories') }} as c using (announcement_idx)
),

counts as (
    select
        month,
        category_idx,
        max(category_name) as category_name,
        count(distinct announcement_idx) filter (where post_state = 'published') as posts_published,
        count(distinct announcement_idx) filter (where post_state = 'scheduled') as scheduled_posts,
        count(distinct announcement_idx) filter (where post_state = 'draft') as drafts
    from filed
    group by month, category_idx
),

reactions_per_emoji as (
    select f.month, f.category_idx, r.emoji, sum(r.reaction_count)::bigint as reactions
    from filed as f
    inner join {{ ref('announcement_reactions') }} as r using (announcement_idx)
    where f.post_state = 'published'
    group by f.month, f.category_idx, r.emoji
),

reactions as (
    select
        month,
        category_idx,
        sum(reactions)::bigint as reactions_total,
        map_from_entries(list(struct_pack(k := emoji, v := reactions) order by emoji))
            as reactions_by_emoji
    from reactions_per_emoji
    group by month, category_idx
),

shipped as (
    select f.month, f.category_idx, count(distinct ai.idea_idx) as ideas_shipped
    from filed as f
    inner join {{ ref('announcement_ideas') }} as ai using (announcement_idx)
    where f.post_state = 'published'
    group by f.month, f.category_idx
)

select
    counts.month,
    counts.category_idx,
    counts.category_name,
    counts.posts_published,
    counts.scheduled_posts,
    counts.drafts,
    coalesce(reactions.reactions_total, 0) as reactions_total,
    coalesce(reactions.reactions_by_emoji, map()::map(varchar, bigint)) as reactions_by_emoji,
    coalesce(shipped.ideas_shipped, 0) as ideas_shipped
from counts
left join reactions using (month, category_idx)
left join shipped using (month, category_idx)
