// Written by packaging/sync-version.mjs from package.json's "version" (the one source); do not edit.
export const LOGD_VERSION = '0.1.0';
