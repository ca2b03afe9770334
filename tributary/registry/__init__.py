"""The node registry: pump and drainer status records kept in etcd.

Keys are ``/tidb-binlog/v1/pumps/<nodeID>`` and ``/tidb-binlog/v1/drainers/<nodeID>``;
values are the JSON ``node.Status`` of tidb-binlog, so Go tools and ours read
each other's records.
"""
