-- history_checks: In which month each history table was last compared with the service.
-- grain: one row per history table
-- key: table_name
-- columns:
--   table_name: the history table (ideas_history, companies_history, announcements_history)
--   checked_month: the first day of the month (UTC) of the last sync that compared it (a
--     month, not a time: it changes once a month, so the models are not rebuilt by every
--     sync for it)
select
    cast(table_name as varchar) as table_name,
    cast(checked_month as date) as checked_month
from {{ source('history_checks') }}
