-- comment_attachments: Files attached to comments.
-- grain: one row per comment and attachment
-- key: comment_idx, position
-- columns:
--   comment_idx: the comment (comments.comment_idx)
--   position: place of the attachment in the comment's list (0 first)
--   attachment_idx: the attachment's id
--   file_name: the file's name
--   url: where the file is
--   attachment_type: the file's kind
--   created_at: when it was attached (UTC)
--   updated_at: when it last changed (UTC)
select
    cast(comment_idx as varchar) as comment_idx,
    cast(_dlt_list_idx as bigint) as position,
    cast(idx as varchar) as attachment_idx,
    cast(name as varchar) as file_name,
    cast(url as varchar) as url,
    cast(type as varchar) as attachment_type,
    cast(created_at as timestamptz) as created_at,
    cast(updated_at as timestamptz) as updated_at
from {{ source('comments__attachments') }}
