"""The commands people run: the command line (``cli``), one sync (``sync``), ``status``,
the dashboard (``report``), the demo, and the one place that turns a failure into a line
and an exit code (``failures``)."""
