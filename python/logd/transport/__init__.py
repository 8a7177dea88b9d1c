"""How the client reaches the daemon: the gRPC channel, discovery and the sidecar start, reaching a restarted daemon, trust, the runtime dir, keepalive, a batch's bytes."""
