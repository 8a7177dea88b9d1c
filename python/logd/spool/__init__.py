"""What the client keeps on disk for the daemon, in its spool: the crash journal and the segments that feed it, spill and overflow files, the journal's SIGBUS guard."""
