"""The job's attempt directory (the one its wrapper writes to: the local attempt directory for
the local adapter, the remote one on a cluster): its file names, the claim and marker shell, and
the reader of remote attempt directories (a cluster reached through a transport)."""
