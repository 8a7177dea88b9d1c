"""Random ids and tokens from os.urandom: what `secrets` and `uuid` would give, without importing them (with
hmac, OpenSSL's hashlib and platform they cost `import logd` about 10 ms)."""
import binascii
import os

_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def run_id() -> str:
    """12 characters of a-z 0-9, uniform (bytes of 252 and more are drawn again): about 62 random bits."""
    out = []
    while len(out) < 12:
        for b in os.urandom(16):
            if b < 252 and len(out) < 12:
                out.append(_ALPHABET[b % 36])
    return "".join(out)


def token_urlsafe(nbytes: int) -> str:
    """secrets.token_urlsafe: base64url of nbytes random bytes, without padding."""
    return binascii.b2a_base64(os.urandom(nbytes), newline=False).decode("ascii").rstrip("=").replace("+", "-").replace("/", "_")


def token_hex(nbytes: int) -> str:
    return os.urandom(nbytes).hex()


try:  # SHA-256 without OpenSSL's hashlib (its import costs `import logd` about 4 ms); the same digest
    from _sha256 import sha256  # noqa: F401 - CPython up to 3.11
except ImportError:
    try:
        from _sha2 import sha256  # noqa: F401 - CPython 3.12 and later
    except ImportError:
        from hashlib import sha256  # noqa: F401
