-- company_versions: Each version of a customer company's name, spend and custom fields, as
--   the syncs saw them change (companies_history).
-- grain: one row per company and version
-- key: company_id, valid_from
-- columns:
--   company_id: the company's id in the service (acct-...)
--   company_name: its name in this version
--   monthly_spend: its monthly spend in this version (NULL when not sent or not a number)
--   monthly_spend_as_sent: the spend exactly as sent when it came as something other than a
--     number, else NULL
--   company_attributes: its custom fields in this version (JSON object: plan, ...)
--   valid_from: when this version began: the updated_at of the follower whose copy a sync
--     read it from, the most recently updated one (the latest moment the change can have
--     happened), else that sync's time (UTC)
--   valid_to: when the next version began, or the full sync that found no follower listing
--     it; NULL while current (UTC)
--   is_current: whether this is the company's version now
select
    cast(company_id as varchar) as company_id,
    cast(name as varchar) as company_name,
    cast(monthly_spend as double) as monthly_spend,
    cast(monthly_spend__as_sent as varchar) as monthly_spend_as_sent,
    cast(attributes as json) as company_attributes,
    cast(valid_from as timestamptz) as valid_from,
    cast(valid_to as timestamptz) as valid_to,
    cast(is_current as boolean) as is_current
from {{ source('companies_history') }}
