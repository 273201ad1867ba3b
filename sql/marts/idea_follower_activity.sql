-- idea_follower_activity: Who wrote on which idea: the one place comments and notes are counted.
-- grain: one row per idea and follower who wrote at least one comment or note on it
--   (follower_idx is NULL for comments the service sends without an author)
-- key: idea_idx, follower_idx
-- columns:
--   idea_idx: the idea (ideas.idea_idx)
--   follower_idx: the author (followers.follower_idx)
--   public_comments: public comments the follower wrote on the idea
--   private_notes: private notes the follower wrote on the idea
--   first_activity_at: the follower's first comment or note on the idea
--   last_activity_at: the follower's latest comment or note on the idea
-- tests:
--   not_null: idea_idx, public_comments, private_notes
--   expression: public_comments + private_notes >= 1
--   expression: first_activity_at <= last_activity_at
select
    idea_idx,
    follower_idx,
    count(*) filter (where not coalesce(is_private, false)) as public_comments,
    count(*) filter (where coalesce(is_private, false)) as private_notes,
    min(created_at) as first_activity_at,
    max(created_at) as last_activity_at
from {{ ref('comments') }}
group by idea_idx, follower_idx
