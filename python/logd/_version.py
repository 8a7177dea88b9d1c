# Written by packaging/sync-version.mjs from package.json's "version" (the one source); do not edit.
__version__ = "0.1.0"
# The wire protocol this client speaks (src/config.ts PROTOCOL_VERSION); sent with every call as x-logd-protocol.
PROTOCOL_VERSION = 1
