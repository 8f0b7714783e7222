"""Small helpers over the operating system: processes, private directories, tokens, the log
tail and the local attempt directory's layout. Nothing here knows the journal."""
