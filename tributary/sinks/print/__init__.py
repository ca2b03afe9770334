"""The print sink (``print://``): ``sink.PrintSink`` writes one line per row change and DDL."""
