"""The BinlogCluster operator: kopf handlers (``handlers``) over pure manifest building
(``spec``, ``configs``, ``manifests``, ``crd``), a small Kubernetes API client (``kube``) and the
graceful pump scale-down (``scaledown``, ``pumps``)."""

GROUP = "binlog.io"
VERSION = "v1alpha1"
KIND = "BinlogCluster"
PLURAL = "binlogclusters"
MANAGER = "binlog-operator"
PUMP_KIND = "Pump"
PUMP_PLURAL = "pumps"
DRAINER_KIND = "Drainer"
DRAINER_PLURAL = "drainers"
