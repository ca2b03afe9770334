"""Change sources: readers of an upstream's change log into whole transactions."""
