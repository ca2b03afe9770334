"""The MySQL/MariaDB/TiDB sink (``mysql://``): ``sink`` (``MysqlSink``, ``open_url``), its URL
(``config``), connections and error codes (``conn``), consistent-mode apply (``apply``,
``statements``) and parallel apply with conflict detection (``parallel``, ``causality``)."""
