"""The capture cluster (TiCDC-style owner, changefeeds, processors).

Not built yet; see docs/roadmap.md.
"""
