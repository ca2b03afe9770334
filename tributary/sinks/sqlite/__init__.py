"""The SQLite sink (``sqlite://``): ``sink`` (``SqliteSink``) and the translation of MySQL DDL to
SQLite (``ddl``, ``ddl_alter``, ``columns``)."""
