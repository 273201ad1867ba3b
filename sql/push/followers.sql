-- followers: Followers upserted by email, with their companies and custom attributes, from curated.accounts.
-- kind: followers
-- key: email
-- mode: upsert
-- delete: no
-- grain: one row per follower and company (a follower without a company: one row, company_id NULL)
-- columns:
--   email: the follower's email (the key; matched case-insensitively)
--   name: display name (required to create a follower)
--   company_id: the company's id at the service
--   company_name: its name (required with company_id: the API needs both)
--   monthly_spend: the company's monthly spend, a number
--   plan: the company's plan, sent as the custom company field "plan"
--   attributes: custom follower attributes, a JSON object (the attr__<key> columns)
--   company_fields: further custom company fields, a JSON object (the company__<key> columns)
select
    trim(cast(email as varchar)) as email,
    name,
    company_id,
    company_name,
    monthly_spend,
    plan,
    attributes,
    company_fields
from {{ curated('accounts') }}
