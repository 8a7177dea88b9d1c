# Generated from proto/logd/v1/logd.proto by protoc (see python/README.md,
# "Regenerating the wire code"); test/python/proto-current.test.ts checks it
# is current.
