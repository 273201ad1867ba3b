-- announcements: Release notes from curated.releases, as announcements: drafts until a publish date is set.
-- kind: announcements
-- key: release_key
-- mode: upsert
-- delete: no
-- nulls: published_at
-- grain: one row per release
-- columns:
--   release_key: the release's own name, e.g. "2026.11" (the key; written into the post as
--     its marker)
--   name: the post's title
--   content: the post's Markdown (the push appends its marker line)
--   published_at: when it is published (ISO 8601); NULL keeps or makes it a draft
--   author_idx: the team member who authors it (usr_...)
--   idea_idxs: ideas it announces (a list, JSON text or comma-separated idxs)
--   category_idxs: its categories (same forms)
select release_key, name, content, published_at, author_idx, idea_idxs, category_idxs
from {{ curated('releases') }}
