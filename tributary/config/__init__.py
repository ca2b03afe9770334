"""The settings schemas of the services whose TOML others render too: ``pump.toml`` (``pump``)
and ``drainer.toml`` (``drainer``). The pump and drainer load their settings with them; the
operator checks the ConfigMaps it renders with them. Only the schema lives here (keys, defaults,
validation), not what a service does with it."""
