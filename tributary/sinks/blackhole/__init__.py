"""The blackhole sink (``blackhole://``): ``sink.BlackholeSink`` counts and drops."""
