-- status_funnel_counts_each_idea_once: the statuses' ideas, comments and notes add up to those of the ideas that have a loaded status
-- mart: status_summary
with funnel as (
    select
        coalesce(sum(ideas), 0) as ideas,
        coalesce(sum(public_comments), 0) as public_comments,
        coalesce(sum(private_notes), 0) as private_notes
    from {{ ref('status_summary') }}
),

ideas as (
    select
        count(*) as ideas,
        coalesce(sum(public_comments), 0) as public_comments,
        coalesce(sum(private_notes), 0) as private_notes
    from {{ ref('idea_engagement') }}
    where status_idx in (select status_idx from {{ ref('statuses') }})
)

select *
from funnel, ideas
where funnel.ideas <> ideas.ideas
    or funnel.public_comments <> ideas.public_comments
    or funnel.private_notes <> ideas.private_notes
