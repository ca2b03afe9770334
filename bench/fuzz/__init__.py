"""Bounded mutational fuzzing of the parsers that take bytes from outside (``targets``)."""
