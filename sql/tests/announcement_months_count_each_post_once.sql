-- announcement_months_count_each_post_once: the months' published, scheduled and draft posts add up to the posts loaded, each counted once
-- mart: announcement_months
with months as (
    select
        coalesce(sum(posts_published), 0) as published,
        coalesce(sum(scheduled_posts), 0) as scheduled,
        coalesce(sum(drafts), 0) as drafts
    from {{ ref('announcement_months') }}
),

posts as (
    select
        count(*) filter (where is_published) as published,
        count(*) filter (where not coalesce(is_published, false) and published_at is not null)
            as scheduled,
        count(*) filter (where not coalesce(is_published, false) and published_at is null)
            as drafts
    from {{ ref('announcements') }}
    where coalesce(published_at, created_at) is not null
)

select *
from months, posts
where months.published <> posts.published
    or months.scheduled <> posts.scheduled
    or months.drafts <> posts.drafts
