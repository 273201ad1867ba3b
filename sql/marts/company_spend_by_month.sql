-- company_spend_by_month: Each customer company's monthly spend month by month, as the
--   history the syncs kept says it was at the end of each month (companies_history).
-- grain: one row per company and calendar month (UTC), from the month its history begins
--   to the month of the last sync that checked it (history_checks), for the months it
--   existed at the end of (for that last month: now, as that sync left it). Spend changes
--   are seen by full syncs (a normal one reads new followers only)
-- key: month, company_id
-- columns:
--   month: the month's first day
--   company_id: the company's id in the service (acct-...)
--   company_name: its name at the end of the month
--   monthly_spend: its monthly spend at the end of the month (NULL when not sent)
--   is_month_complete: whether the month had ended by the last sync that checked the
--     history; false for that sync's own month, whose figures are the current versions
-- tests:
--   not_null: is_month_complete
--   relationships: company_id -> company_versions.company_id
with versions as (
    select company_id, company_name, monthly_spend, valid_from, valid_to, is_current
    from {{ ref('company_versions') }}
),

checked as (
    select max(checked_month) as last_month
    from {{ ref('history_checks') }}
    where table_name = 'companies_history'
),

bounds as (
    select
        cast(date_trunc('month', min(v.valid_from) at time zone 'UTC') as date) as first_month,
        max(c.last_month) as last_month
    from versions as v
    cross join checked as c
),

months as (
    select
        cast(g.month as date) as month,
        -- the month's end as an instant (its next month's start, UTC)
        cast(g.month + interval 1 month as timestamp) at time zone 'UTC' as month_end,
        cast(g.month as date) < bounds.last_month as is_month_complete
    from bounds,
        generate_series(
            cast(first_month as timestamp), cast(last_month as timestamp), interval 1 month
        ) as g (month)
    where first_month is not null and last_month is not null
)

select
    m.month,
    v.company_id,
    v.company_name,
    v.monthly_spend,
    m.is_month_complete
from months as m
inner join versions as v
    on (
        m.is_month_complete
        and v.valid_from < m.month_end
        and (v.valid_to is null or v.valid_to >= m.month_end)
    )
    or (not m.is_month_complete and v.is_current)
