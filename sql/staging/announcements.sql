-- announcements: Changelog posts: published, scheduled and drafts.
-- grain: one row per announcement
-- key: announcement_idx
-- columns:
--   announcement_idx: the post's id (ann_...)
--   title: the post's title
--   slug: the post's URL slug
--   excerpt: the first 140 characters of its text
--   content_markdown: the body as Markdown
--   content_html: the body as HTML
--   is_published: true when published_at is set and not in the future
--   published_at: when it was (or is scheduled to be) published; NULL for drafts
--   created_at: when the post was created (UTC)
--   updated_at: when the post last changed (UTC)
--   author_idx: the team member who wrote it (usr_...)
--   author_name: that team member's name
--   author_avatar_url: that team member's avatar
select
    cast(idx as varchar) as announcement_idx,
    cast(name as varchar) as title,
    cast(slug as varchar) as slug,
    cast(excerpt as varchar) as excerpt,
    cast(content as varchar) as content_markdown,
    cast(content_html as varchar) as content_html,
    cast(is_published as boolean) as is_published,
    cast(published_at as timestamptz) as published_at,
    cast(created_at as timestamptz) as created_at,
    cast(updated_at as timestamptz) as updated_at,
    cast(author__idx as varchar) as author_idx,
    cast(author__name as varchar) as author_name,
    cast(author__avatar as varchar) as author_avatar_url
from {{ source('announcements') }}
