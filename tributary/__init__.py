"""Tributary's shared libraries: everything the services, tools and operator build on."""
