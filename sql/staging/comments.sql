-- comments: Public comments and private notes on ideas.
-- grain: one row per comment or note
-- key: comment_idx
-- columns:
--   comment_idx: the comment's id (cmt_...)
--   idea_idx: the idea it is on (ideas.idea_idx)
--   idea_id: that idea's integer id
--   follower_idx: the author (followers.follower_idx)
--   follower_name: the author's name as the comment shows it
--   follower_avatar_url: the author's avatar as the comment shows it
--   message: the text as written
--   content_json: the rich-text document (JSON)
--   content_html: the text as HTML
--   content_markdown: the text as Markdown
--   is_private: true for a private note, false for a public comment
--   comment_type: 'comment' or 'note'
--   created_at: when it was written (UTC)
--   updated_at: when it last changed (UTC)
select
    cast(idx as varchar) as comment_idx,
    cast(idea_idx as varchar) as idea_idx,
    cast(idea_id as bigint) as idea_id,
    cast(follower__idx as varchar) as follower_idx,
    cast(follower__name as varchar) as follower_name,
    cast(follower__avatar as varchar) as follower_avatar_url,
    cast(message as varchar) as message,
    cast(content as json) as content_json,
    cast(content_html as varchar) as content_html,
    cast(content_markdown as varchar) as content_markdown,
    cast(is_private as boolean) as is_private,
    cast(type as varchar) as comment_type,
    cast(created_at as timestamptz) as created_at,
    cast(updated_at as timestamptz) as updated_at
from {{ source('comments') }}
