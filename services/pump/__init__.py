"""Pump: durable binlog store serving tipb WriteBinlog/PullBinlogs."""
