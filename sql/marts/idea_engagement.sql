-- idea_engagement: How much feedback each idea gets, from whom, what it is worth, and whether it shipped.
-- grain: one row per idea
-- key: idea_idx
-- columns:
--   idea_idx: the idea's id (ide_...)
--   idea_name: its title
--   status_idx: its status (NULL when it has none)
--   status_name: that status's name
--   public_comments: public comments on it (loaded rows, not the service's counter)
--   private_notes: private notes on it
--   distinct_commenters: distinct followers who wrote a comment or note on it (not
--     additive across ideas: a follower who wrote on two ideas counts in both)
--   first_activity_at: its first comment or note (NULL if none)
--   last_activity_at: its latest comment or note (NULL if none)
--   linked_records: records in external tools linked to it
--   links_by_type: linked records per integration type (MAP type -> count; empty if none;
--     links without a type count in linked_records only)
--   shipped_in_announcements: published posts that name it (a post naming an idea says
--     nothing of its status: compare status_name; not additive across ideas: a post
--     naming two ideas counts for both)
--   shipped_announcement_idxs: those posts' ids, oldest first
--   first_shipped_at: when the first of them was published (NULL if never)
--   commenter_companies: distinct companies its commenters belong to
--     (idea_company_activity); not additive across ideas: a company behind two ideas
--     counts in both
--   commenter_monthly_spend: the monthly spend of those companies, each counted once per
--     idea, rounded to cents (revenue-weighted demand; a company without a spend counts
--     0); not additive across ideas, as commenter_companies: status_summary,
--     topic_summary and integration_coverage count each company once per row
-- tests:
--   not_null: public_comments, private_notes, distinct_commenters, linked_records
--   not_null: shipped_in_announcements, commenter_companies, commenter_monthly_spend
--   relationships: idea_idx -> ideas.idea_idx
--   expression: distinct_commenters <= public_comments + private_notes
--   expression: first_activity_at <= last_activity_at
--   expression: commenter_companies <= (select count(*) from {{ ref('company_feedback') }})
with activity as (
    select
        idea_idx,
        sum(public_comments)::bigint as public_comments,
        sum(private_notes)::bigint as private_notes,
        count(follower_idx) as distinct_commenters,
        min(first_activity_at) as first_activity_at,
        max(last_activity_at) as last_activity_at
    from {{ ref('idea_follower_activity') }}
    group by idea_idx
),

links_per_type as (
    select idea_idx, integration_type, count(*) as links
    from {{ ref('integration_links') }}
    group by idea_idx, integration_type
),

links as (
    select
        idea_idx,
        sum(links)::bigint as linked_records,
        map_from_entries(
            list(struct_pack(k := integration_type, v := links) order by integration_type)
                filter (where integration_type is not null)
        ) as links_by_type
    from links_per_type
    group by idea_idx
),

shipping_posts as (
    select distinct ai.idea_idx, a.announcement_idx, a.published_at
    from {{ ref('announcement_ideas') }} as ai
    inner join {{ ref('announcements') }} as a using (announcement_idx)
    where a.is_published
),

shipped as (
    select
        idea_idx,
        count(*) as shipped_in_announcements,
        list(announcement_idx order by published_at, announcement_idx) as shipped_announcement_idxs,
        min(published_at) as first_shipped_at
    from shipping_posts
    group by idea_idx
),

demand as (
    select
        ic.idea_idx,
        count(*) as commenter_companies,
        round(coalesce(sum(cf.monthly_spend), 0), 2) as commenter_monthly_spend
    from {{ ref('idea_company_activity') }} as ic
    inner join {{ ref('company_feedback') }} as cf using (company_id)
    group by ic.idea_idx
)

select
    i.idea_idx,
    i.idea_name,
    i.status_idx,
    s.status_name,
    coalesce(activity.public_comments, 0) as public_comments,
    coalesce(activity.private_notes, 0) as private_notes,
    coalesce(activity.distinct_commenters, 0) as distinct_commenters,
    activity.first_activity_at,
    activity.last_activity_at,
    coalesce(links.linked_records, 0) as linked_records,
    coalesce(links.links_by_type, map()::map(varchar, bigint)) as links_by_type,
    coalesce(shipped.shipped_in_announcements, 0) as shipped_in_announcements,
    coalesce(shipped.shipped_announcement_idxs, []::varchar[]) as shipped_announcement_idxs,
    shipped.first_shipped_at,
    coalesce(demand.commenter_companies, 0) as commenter_companies,
    coalesce(demand.commenter_monthly_spend, 0)::double as commenter_monthly_spend
from {{ ref('ideas') }} as i
left join {{ ref('statuses') }} as s using (status_idx)
left join activity using (idea_idx)
left join links using (idea_idx)
left join shipped using (idea_idx)
left join demand using (idea_idx)
