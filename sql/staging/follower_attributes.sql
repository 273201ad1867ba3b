-- follower_attributes: A follower's custom attributes, one per row.
-- grain: one row per follower and attribute key
-- key: follower_idx, attribute_key
-- columns:
--   follower_idx: the follower (followers.follower_idx)
--   attribute_key: the attribute's name
--   position: place of the attribute in the follower's object (0 first)
--   attribute_value: the value as text (numbers and booleans written out, objects as JSON)
--   value_type: the value's JSON type (string, number, boolean, null, object, array)
select
    cast(follower_idx as varchar) as follower_idx,
    cast(key as varchar) as attribute_key,
    cast(_dlt_list_idx as bigint) as position,
    cast(value as varchar) as attribute_value,
    cast(value_type as varchar) as value_type
from {{ source('followers__attributes') }}
