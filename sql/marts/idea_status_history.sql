-- idea_status_history: How long each idea stayed in each status, from the history the
--   syncs kept (ideas_history): the board's flow, which the API does not record.
-- grain: one row per idea and stay in a status: the versions in a row with the same
--   status make one stay (a rename or a topic change does not end it; a move, or the idea
--   being deleted, does). Ideas without a status (known without /ideas) have no stays.
--   Two moves between two syncs are seen as one
-- key: idea_idx, stay_number
-- columns:
--   idea_idx: the idea (ide_...)
--   stay_number: the stay's place among the idea's stays (1 first)
--   status_idx: the status (sts_...)
--   status_name: its name now (NULL when the status is no longer loaded)
--   entered_at: when the idea entered it: the updated_at it carried when a sync first saw
--     it there (the latest possible moment; the sync before is the earliest), or the
--     first sync's reading for ideas already there (UTC)
--   left_at: when it left (the next stay's entered_at, or the sync that found the idea
--     deleted); NULL while the idea is still there (UTC)
--   days_in_status: days from entered_at to left_at, to 2 decimals; NULL while the idea is
--     still there (its time so far is the time since entered_at: a figure that changes
--     with the clock, which the mart does not read)
-- tests:
--   not_null: status_idx, entered_at
--   expression: (left_at is null) = (days_in_status is null)
--   relationships: idea_idx -> idea_versions.idea_idx
--   accepted_range: stay_number 1..
--   accepted_range: days_in_status 0..
--   expression: left_at is null or left_at >= entered_at
with versions as (
    select
        idea_idx,
        status_idx,
        valid_from,
        valid_to,
        -- a version starts a stay unless the one before has the same status and ends
        -- where it begins (a deleted idea that comes back starts a new stay)
        case
            when
                lag(status_idx) over (partition by idea_idx order by valid_from, valid_to)
                is not distinct from status_idx
                and lag(valid_to) over (partition by idea_idx order by valid_from, valid_to)
                = valid_from
                then 0
            else 1
        end as starts_stay
    from {{ ref('idea_versions') }}
),

grouped as (
    select
        idea_idx,
        status_idx,
        valid_from,
        valid_to,
        sum(starts_stay) over (
            partition by idea_idx order by valid_from, valid_to rows unbounded preceding
        ) as stay
    from versions
),

stays as (
    select
        idea_idx,
        stay,
        min(status_idx) as status_idx,
        min(valid_from) as entered_at,
        -- open while its last version is
        case when count(*) = count(valid_to) then max(valid_to) end as left_at
    from grouped
    group by idea_idx, stay
)

select
    s.idea_idx,
    row_number() over (partition by s.idea_idx order by s.entered_at) as stay_number,
    s.status_idx,
    st.status_name,
    s.entered_at,
    s.left_at,
    -- through a decimal, so a half rounds up whatever the double's last bits say
    cast(
        round(cast((epoch(s.left_at) - epoch(s.entered_at)) / 86400.0 as decimal(18, 6)), 2)
        as double
    ) as days_in_status
from stays as s
left join {{ ref('statuses') }} as st using (status_idx)
where s.status_idx is not null
