"""An attempt's run directory: its file names, the claim and marker shell, and the reader of
run directories that live where a job ran (a cluster reached through a transport)."""
