-- follower_companies: The companies a follower belongs to, as that follower's copy says.
-- grain: one row per follower and company
-- key: follower_idx, company_id
-- columns:
--   follower_idx: the follower (followers.follower_idx)
--   company_id: the company's id in the service (acct-...)
--   position: place of the company in the follower's list (0 first)
--   company_name: the company's name in this copy
--   monthly_spend: the company's monthly spend in this copy (NULL when not sent or not a
--     number; a number sent as text, "2500", reads as that number)
--   monthly_spend_as_sent: the spend exactly as sent when it came as something other than
--     a number ("2500", "unlimited"), else NULL; staging.type_drift lists every such value
--   company_attributes: the company's custom attributes (JSON object)
select
    cast(follower_idx as varchar) as follower_idx,
    cast(id as varchar) as company_id,
    cast(_dlt_list_idx as bigint) as position,
    cast(name as varchar) as company_name,
    cast(monthly_spend as double) as monthly_spend,
    cast(monthly_spend__as_sent as varchar) as monthly_spend_as_sent,
    cast(attributes as json) as company_attributes
from {{ source('followers__companies') }}
