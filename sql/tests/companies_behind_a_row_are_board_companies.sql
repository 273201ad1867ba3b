-- companies_behind_a_row_are_board_companies: no status, topic or tool has more companies behind it than the board has
-- mart: company_feedback
with board as (
    select count(*) as companies from {{ ref('company_feedback') }}
),

behind as (
    select 'status_summary' as mart, status_idx as row_key, commenter_companies
    from {{ ref('status_summary') }}
    union all
    select 'topic_summary', topic_idx, commenter_companies from {{ ref('topic_summary') }}
    union all
    select 'integration_coverage', integration_type, commenter_companies
    from {{ ref('integration_coverage') }}
    union all
    select 'idea_engagement', idea_idx, commenter_companies from {{ ref('idea_engagement') }}
)

select behind.*
from behind, board
where behind.commenter_companies > board.companies
