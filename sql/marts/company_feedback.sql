-- company_feedback: What each customer company asks for, and what it is worth.
-- grain: one row per company that at least one loaded follower belongs to (a company the
--   service sends without an id is left out)
-- key: company_id
-- columns:
--   company_id: the company's id in the service (acct-...)
--   company_name: its name, from the copy of the most recently updated follower
--   monthly_spend: its monthly spend, same copy (NULL when the service sends none), in the
--     account's currency (the API names none); additive: its sum is the board's total
--   followers: followers who belong to it (not additive across companies: a follower in
--     two companies counts in both)
--   public_comments: public comments its followers wrote (not additive across companies,
--     as followers)
--   private_notes: private notes its followers wrote (not additive, as followers)
--   ideas_engaged: distinct ideas its followers commented or noted on (not additive)
--   first_activity_at: its followers' first comment or note (NULL if none)
--   last_activity_at: its followers' latest comment or note (NULL if none)
-- tests:
--   not_null: company_id, followers, public_comments, private_notes, ideas_engaged
--   relationships: company_id -> follower_companies.company_id
--   accepted_range: followers 1..
--   expression: first_activity_at <= last_activity_at
with copies as (
    select
        fc.company_id,
        fc.company_name,
        fc.monthly_spend,
        row_number() over (
            partition by fc.company_id
            order by f.updated_at desc nulls last, fc.follower_idx desc
        ) as newest
    from {{ ref('follower_companies') }} as fc
    left join {{ ref('followers') }} as f using (follower_idx)
    where fc.company_id is not null
),

members as (
    select distinct company_id, follower_idx
    from {{ ref('follower_companies') }}
    where company_id is not null
),

activity as (
    select
        m.company_id,
        sum(a.public_comments)::bigint as public_comments,
        sum(a.private_notes)::bigint as private_notes,
        count(distinct a.idea_idx) as ideas_engaged,
        min(a.first_activity_at) as first_activity_at,
        max(a.last_activity_at) as last_activity_at
    from members as m
    inner join {{ ref('idea_follower_activity') }} as a using (follower_idx)
    group by m.company_id
),

member_counts as (
    select company_id, count(*) as followers from members group by company_id
)

select
    copies.company_id,
    copies.company_name,
    copies.monthly_spend,
    member_counts.followers,
    coalesce(activity.public_comments, 0) as public_comments,
    coalesce(activity.private_notes, 0) as private_notes,
    coalesce(activity.ideas_engaged, 0) as ideas_engaged,
    activity.first_activity_at,
    activity.last_activity_at
from copies
inner join member_counts using (company_id)
left join activity using (company_id)
where copies.newest = 1
