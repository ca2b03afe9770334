"""The standalone TSO server: a TsoMember behind a gRPC ``binlogext.Tso`` endpoint."""
