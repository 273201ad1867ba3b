-- follower_companies: The companies a follower belongs to, as that follower's copy says.
-- grain: one row per follower and company
-- key: follower_idx, company_id
-- columns:
--   follower_idx: the follower (followers.follower_idx)
--   company_id: the company's id in the service (acct-...)
--   position: place of the company in the follower's list (0 first)
--   company_name: the company's name in this copy
--   monthly_spend: the company's monthly spend in this copy (NULL when not sent)
--   company_attributes: the company's custom attributes (JSON object)
select
    cast(follower_idx as varchar) as follower_idx,
    cast(id as varchar) as company_id,
    cast(_dlt_list_idx as bigint) as position,
    cast(name as varchar) as company_name,
    cast(monthly_spend as double) as monthly_spend,
    cast(attributes as json) as company_attributes
from {{ source('followers__companies') }}
