"""Entry point of the relay process of a forked child (see relay.py)."""
from logd.relay import main

main()
