-- idea_notes: One private note per idea with revenue behind it, stating its revenue-weighted demand (marts.idea_engagement).
-- kind: idea_notes
-- key: idea_idx
-- mode: upsert
-- delete: no
-- grain: one row per idea whose commenters belong to at least one company
-- columns:
--   idea_idx: the idea the note is on (the key)
--   author_email: the follower who writes the note (the setting push.note_author_email;
--     give it no company, or its own notes would count in the figures)
--   message: the note's text (the push appends its marker line)
select
    idea_idx,
    {{ var('note_author_email') }} as author_email,
    -- the figure rounded half away from zero from its shortest decimal form, as PostgreSQL's
    -- numeric does (DuckDB's format alone rounds the binary double half to even: 0.125 -> 0.12);
    -- format reads the rounded decimal as a double again, exact below about 45 trillion
    'Revenue-weighted demand: '
    || format('{:,.2f}', round(cast(cast(commenter_monthly_spend as varchar) as decimal(38, 10)), 2))
    || ' per month from ' || commenter_companies
    || (case when commenter_companies = 1 then ' company' else ' companies' end)
    || ' (' || public_comments || ' public comments).' as message
from {{ ref('idea_engagement') }}
where commenter_companies > 0
