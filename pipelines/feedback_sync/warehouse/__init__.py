"""Where a sync lands: the dlt pipeline and destination, what a load leaves owing (first
loads that append, stale child rows, deletes), the Parquet export and the run lock."""
