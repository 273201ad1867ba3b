-- integration_links: Records in external tools (helpdesk, tracker, CRM) linked to ideas.
-- grain: one row per link
-- key: link_idx
-- columns:
--   link_idx: the link's id (lnk_...)
--   idea_idx: the idea it is linked to (ideas.idea_idx)
--   integration_type: the tool (for example jira, zendesk)
--   link_ref: the record's reference in that tool
--   url: the record's address (meta.url)
--   meta_json: the link's extra data (JSON object)
--   created_at: when the link was made (UTC, microseconds)
--   updated_at: when it last changed (UTC, microseconds)
select
    cast(idx as varchar) as link_idx,
    cast(idea_idx as varchar) as idea_idx,
    cast(type as varchar) as integration_type,
    cast(link_ref as varchar) as link_ref,
    cast(meta as json) ->> 'url' as url,
    cast(meta as json) as meta_json,
    cast(created_at as timestamptz) as created_at,
    cast(updated_at as timestamptz) as updated_at
from {{ source('integration_links') }}
