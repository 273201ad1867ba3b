-- announcement_calendar: The changelog per category: posts, reactions and announced ideas per month and category.
-- grain: one row per calendar month (UTC) and category that has at least one post; a post
--   filed under two categories counts in both, so no count here adds up across categories
--   (announcement_months counts each post once); posts without a category under '(none)'
-- key: month, category_idx
-- columns:
--   month: first day of the month (UTC): of published_at for published and scheduled posts,
--     of created_at for drafts
--   category_idx: the category's id, or '(none)'
--   category_name: the category's name, or '(uncategorized)'
--   posts_published: posts of the category published in the month (not additive across
--     categories)
--   scheduled_posts: posts of the category scheduled for the month (published_at in the
--     future; not additive across categories)
--   drafts: drafts of the category created in the month (no published_at; not additive
--     across categories)
--   reactions_total: emoji reactions on those published posts (not additive across
--     categories)
--   reactions_by_emoji: those reactions per emoji (MAP emoji -> count; empty if none)
--   ideas_announced: distinct ideas those published posts name (was ideas_shipped; not
--     additive across months or categories: an idea named twice counts in both)
-- tests:
--   not_null: category_idx, category_name, posts_published, scheduled_posts, drafts
--   not_null: reactions_total, ideas_announced
--   expression: posts_published + scheduled_posts + drafts >= 1
--   expression: posts_published > 0 or reactions_total + ideas_announced = 0
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

announced as (
    select f.month, f.category_idx, count(distinct ai.idea_idx) as ideas_announced
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
    coalesce(announced.ideas_announced, 0) as ideas_announced
from counts
left join reactions using (month, category_idx)
left join announced using (month, category_idx)
