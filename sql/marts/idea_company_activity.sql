-- idea_company_activity: Which customer companies stand behind which idea: the one place companies are tied to ideas.
-- grain: one row per idea and company at least one of whose followers wrote a comment or
--   note on it (a follower in two companies ties the idea to both; a company the service
--   sends without an id is left out)
-- key: idea_idx, company_id
-- columns:
--   idea_idx: the idea (ideas.idea_idx)
--   company_id: the company (company_feedback.company_id)
--   commenters: the company's followers who wrote on the idea
--   public_comments: public comments those followers wrote on the idea (not additive
--     across companies: a follower in two companies counts in both)
--   private_notes: private notes those followers wrote on the idea (not additive across
--     companies, as public_comments)
--   first_activity_at: the first comment or note of those followers on the idea
--   last_activity_at: the latest comment or note of those followers on the idea
-- tests:
--   not_null: idea_idx, company_id, commenters, public_comments, private_notes
--   relationships: idea_idx -> ideas.idea_idx
--   relationships: company_id -> company_feedback.company_id
--   expression: commenters >= 1 and public_comments + private_notes >= commenters
with members as (
    select distinct company_id, follower_idx
    from {{ ref('follower_companies') }}
    where company_id is not null
)

select
    a.idea_idx,
    m.company_id,
    count(*) as commenters,
    sum(a.public_comments)::bigint as public_comments,
    sum(a.private_notes)::bigint as private_notes,
    min(a.first_activity_at) as first_activity_at,
    max(a.last_activity_at) as last_activity_at
from {{ ref('idea_follower_activity') }} as a
inner join members as m using (follower_idx)
inner join {{ ref('ideas') }} as i using (idea_idx)
group by a.idea_idx, m.company_id
