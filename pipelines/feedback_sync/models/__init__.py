"""The SQL models of ``sql/``, built in the warehouse (``project``), the SQL engines they run
on (``engines``) and the data checks after a build (``checks``)."""
