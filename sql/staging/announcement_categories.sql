-- announcement_categories: The categories a post is filed under.
-- grain: one row per announcement and category
-- key: announcement_idx, category_idx
-- columns:
--   announcement_idx: the post (announcements.announcement_idx)
--   category_idx: the category's id (cat_...)
--   position: place of the category in the post's list (0 first)
--   category_name: the category's name
--   category_color: the category's colour (#rrggbb)
select
    cast(announcement_idx as varchar) as announcement_idx,
    cast(idx as varchar) as category_idx,
    cast(_dlt_list_idx as bigint) as position,
    cast(name as varchar) as category_name,
    cast(color as varchar) as category_color
from {{ source('announcements__categories') }}
