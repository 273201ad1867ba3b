-- comments_count_once_per_month: the months' comments and notes add up to the comments loaded, and no month between the first and the last is missing
-- mart: activity_by_month
with months as (
    select
        coalesce(sum(public_comments + private_notes), 0) as written,
        count(*) as months,
        max(extract(year from month) * 12 + extract(month from month))
        - min(extract(year from month) * 12 + extract(month from month)) + 1 as span
    from {{ ref('activity_by_month') }}
),

loaded as (
    select count(*) as written from {{ ref('comments') }} where created_at is not null
)

select *
from months, loaded
where months.written <> loaded.written or months.months <> coalesce(months.span, 0)
