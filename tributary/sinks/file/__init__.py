"""The file sink (``file://``): ``sink`` (``FileSink``, ``open_url``) writes tidb-binlog's
binlog files (``binlogfile``) of ``pb_binlog`` records (``pbcodec``), which reparo reads."""
