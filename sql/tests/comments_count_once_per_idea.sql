-- comments_count_once_per_idea: the ideas' comments and notes add up to the comments loaded on those ideas
-- mart: idea_engagement
with per_idea as (
    select coalesce(sum(public_comments + private_notes), 0) as written
    from {{ ref('idea_engagement') }}
),

loaded as (
    select count(*) as written
    from {{ ref('comments') }}
    where idea_idx in (select idea_idx from {{ ref('ideas') }})
)

select *
from per_idea, loaded
where per_idea.written <> loaded.written
