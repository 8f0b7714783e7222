"""Slurm adapters: pure render (script.py) and parse (parse.py); execution lives beside them."""
