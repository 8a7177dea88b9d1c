"""How a forked child logs without touching gRPC: its relay process, and init()/attach() in a forked child."""
