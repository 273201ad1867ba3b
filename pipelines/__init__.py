"""feedback-sync: the dlt source, the reverse sync and the command line."""
