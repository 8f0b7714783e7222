"""The `vibesys` command line. Empty on purpose: the entry point (`main.py`) must load
nothing it does not need, and a package's `__init__` runs before any of its modules."""
