-- status_flow: Flow metrics per status: how many ideas passed through it, how long they
--   stayed, and which are there now (from idea_status_history).
-- grain: one row per status an idea has stayed in, and per loaded status
-- key: status_idx
-- columns:
--   status_idx: the status (sts_...)
--   status_name: its name now (NULL when the status is no longer loaded)
--   ideas_entered: distinct ideas that have stayed in it (now or before)
--   stays_completed: stays that ended (the idea moved on, or was deleted)
--   median_days_completed: the median of those stays' days_in_status (NULL when none
--     ended), to 2 decimals (a half up)
--   p90_days_completed: their 90th percentile (interpolated), to 2 decimals
--   ideas_now: ideas in it now
--   waiting_since: when the idea there longest entered it (NULL when none is there; the
--     longest wait so far is the time since, UTC)
-- tests:
--   not_null: ideas_entered, stays_completed, ideas_now
--   accepted_range: ideas_entered 0..
--   expression: median_days_completed <= p90_days_completed
--   expression: ideas_now <= ideas_entered
with stays as (
    select status_idx, idea_idx, entered_at, left_at, days_in_status
    from {{ ref('idea_status_history') }}
),

entered as (
    select status_idx, count(distinct idea_idx) as ideas_entered
    from stays
    group by status_idx
),

completed as (
    select
        status_idx,
        count(*) as stays_completed,
        cast(round(cast(median(days_in_status) as decimal(18, 3)), 2) as double)
            as median_days_completed,
        cast(round(cast(quantile_cont(days_in_status, 0.9) as decimal(18, 3)), 2) as double)
            as p90_days_completed
    from stays
    where left_at is not null
    group by status_idx
),

open_now as (
    select
        status_idx,
        count(*) as ideas_now,
        min(entered_at) as waiting_since
    from stays
    where left_at is null
    group by status_idx
),

known as (
    select status_idx from entered
    union
    select status_idx from {{ ref('statuses') }}
)

select
    k.status_idx,
    st.status_name,
    coalesce(e.ideas_entered, 0) as ideas_entered,
    coalesce(c.stays_completed, 0) as stays_completed,
    c.median_days_completed,
    c.p90_days_completed,
    coalesce(o.ideas_now, 0) as ideas_now,
    o.waiting_since
from known as k
left join {{ ref('statuses') }} as st using (status_idx)
left join entered as e using (status_idx)
left join completed as c using (status_idx)
left join open_now as o using (status_idx)
where k.status_idx is not null
