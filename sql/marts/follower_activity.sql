-- follower_activity: What each follower has said, where, and how much their companies spend.
-- grain: one row per follower
-- key: follower_idx
-- columns:
--   follower_idx: the follower's id (flw_...)
--   follower_name: display name
--   email: email address
--   created_at: when the follower was created (UTC)
--   companies: companies the follower belongs to
--   company_monthly_spend: the monthly spend of those companies, rounded to cents (0 if
--     none); not additive across followers: two followers of one company both carry its
--     spend (company_feedback holds each company once)
--   public_comments: public comments written
--   private_notes: private notes written
--   ideas_engaged: distinct ideas commented or noted on (not additive across followers:
--     an idea two followers wrote on counts for both)
--   first_activity_at: first comment or note (NULL if none)
--   last_activity_at: latest comment or note (NULL if none)
-- tests:
--   not_null: follower_idx, companies, company_monthly_spend, public_comments
--   not_null: private_notes, ideas_engaged
--   relationships: follower_idx -> followers.follower_idx
--   accepted_range: companies 0..
--   expression: ideas_engaged <= public_comments + private_notes
--   expression: first_activity_at <= last_activity_at
with memberships as (
    select
        fc.follower_idx,
        count(distinct fc.company_id) as companies,
        round(coalesce(sum(cf.monthly_spend), 0), 2) as company_monthly_spend
    from (select distinct follower_idx, company_id from {{ ref('follower_companies') }}) as fc
    inner join {{ ref('company_feedback') }} as cf using (company_id)
    group by fc.follower_idx
),

activity as (
    select
        follower_idx,
        sum(public_comments)::bigint as public_comments,
        sum(private_notes)::bigint as private_notes,
        count(*) as ideas_engaged,
        min(first_activity_at) as first_activity_at,
        max(last_activity_at) as last_activity_at
    from {{ ref('idea_follower_activity') }}
    group by follower_idx
)

select
    f.follower_idx,
    f.follower_name,
    f.email,
    f.created_at,
    coalesce(m.companies, 0) as companies,
    coalesce(m.company_monthly_spend, 0)::double as company_monthly_spend,
    coalesce(a.public_comments, 0) as public_comments,
    coalesce(a.private_notes, 0) as private_notes,
    coalesce(a.ideas_engaged, 0) as ideas_engaged,
    a.first_activity_at,
    a.last_activity_at
from {{ ref('followers') }} as f
left join memberships as m using (follower_idx)
left join activity as a using (follower_idx)
