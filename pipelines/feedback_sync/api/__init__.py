"""The Feedback API's client, shared by the source and the push: settings, authentication,
retries with backoff, the rate limit and the paging schemes."""
