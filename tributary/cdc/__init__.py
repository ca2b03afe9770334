"""TiCDC's etcd layout and records, shared by the capture cluster and the operator: the key
builders (``keys``), the JSON records (``model``) and the capture cluster's error root with the
error for a record that cannot be read (``errors``)."""
