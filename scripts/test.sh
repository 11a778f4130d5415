#!/usr/bin/env bash
# Runs the whole agentd test suite. Installs what the tests need when it is missing
# (redis-server, from Debian's packages, for the Redis tests; chromium and the npm packages of
# tests/browser for the dashboard test; the Claude Code CLI of tests/claude for the process
# backend's claude-code test; the MCP servers of tests/mcp and a pinned Python mcp for the MCP
# tests; a pinned schemathesis for the OpenAPI conformance test; a pinned opentelemetry-proto
# for the OTLP receiver of the telemetry tests), then runs the cargo tests.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server is missing; installing it from Debian's packages" >&2
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi

# The Python example of docs/redis.md is run by tests/tests/suite/redis_example.rs with
# Debian's python3 and its redis and msgpack modules.
if ! /usr/bin/python3 -c 'import redis, msgpack' >/dev/null 2>&1; then
  echo "installing python3-redis and python3-msgpack from Debian's packages (docs example test)" >&2
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3 python3-redis python3-msgpack >/dev/null
fi

# The dashboard's browser test: Debian's chromium, node/npm and playwright-core (pinned by
# tests/browser/package-lock.json).
BROWSER_PKGS=""
if [ ! -x /usr/bin/chromium ]; then BROWSER_PKGS=" chromium"; fi
if ! command -v npm >/dev/null 2>&1; then BROWSER_PKGS="$BROWSER_PKGS nodejs npm"; fi
if [ -n "$BROWSER_PKGS" ]; then
  echo "installing${BROWSER_PKGS} from Debian's packages (dashboard browser test)" >&2
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086 # a list of package names
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $BROWSER_PKGS >/dev/null
fi
if [ ! -d tests/browser/node_modules ]; then
  npm ci --prefix tests/browser --no-audit --no-fund
fi
# The real Claude Code CLI for tests/tests/suite/claude_code.rs, pinned (with its platform binary
# package, e.g. linux-x64) by tests/claude/package-lock.json.
if [ ! -d tests/claude/node_modules ]; then
  npm ci --prefix tests/claude --no-audit --no-fund
fi

# The MCP reference servers (server-everything, server-filesystem) for the MCP tests
# (tests/tests/suite/mcp_tools.rs), pinned by tests/mcp/package-lock.json.
if [ ! -d tests/mcp/node_modules ]; then
  npm ci --prefix tests/mcp --no-audit --no-fund
fi

# The Python MCP SDK, pinned, for the MCP server the MCP tests write in Python
# (tests/mcp/exiting_server.py), in a virtualenv of its own under target/ (git-ignored).
MCP_PY_VERSION=2.3.0
MCP_VENV=target/.venv-mcp
if ! "$MCP_VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$MCP_PY_VERSION')" 2>/dev/null; then
  echo "installing the Python mcp package $MCP_PY_VERSION into $MCP_VENV" >&2
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  fi
  rm -rf "$MCP_VENV"
  mkdir -p target
  python3 -m venv "$MCP_VENV"
  "$MCP_VENV/bin/pip" install -q --disable-pip-version-check "mcp==$MCP_PY_VERSION"
fi

# schemathesis, pinned, for the OpenAPI conformance test
# (tests/tests/suite/openapi_conformance.rs), in a virtualenv of its own under target/
# (git-ignored).
SCHEMATHESIS_VERSION=4.32.5
ST_VENV=target/.venv-schemathesis
if ! "$ST_VENV/bin/st" --version 2>/dev/null | grep -qx "st, version $SCHEMATHESIS_VERSION"; then
  echo "installing schemathesis $SCHEMATHESIS_VERSION into $ST_VENV" >&2
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  fi
  rm -rf "$ST_VENV"
  mkdir -p target
  python3 -m venv "$ST_VENV"
  "$ST_VENV/bin/pip" install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

# The official A2A SDK, pinned, with its HTTP server extra and uvicorn, for the A2A tests
# (tests/tests/suite/a2a.rs drives tests/a2a/*.py), in a virtualenv of its own under target/.
A2A_SDK_VERSION=1.3.0
UVICORN_VERSION=0.54.0
A2A_VENV=target/.venv-a2a
if ! "$A2A_VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('a2a-sdk') != '$A2A_SDK_VERSION' or m.version('uvicorn') != '$UVICORN_VERSION')" 2>/dev/null; then
  echo "installing a2a-sdk $A2A_SDK_VERSION into $A2A_VENV" >&2
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  fi
  rm -rf "$A2A_VENV"
  mkdir -p target
  python3 -m venv "$A2A_VENV"
  "$A2A_VENV/bin/pip" install -q --disable-pip-version-check \
    "a2a-sdk[http-server]==$A2A_SDK_VERSION" "uvicorn==$UVICORN_VERSION"
fi

# The official OpenTelemetry protobuf bindings, pinned, for the OTLP receiver the telemetry
# tests run (tests/otlp/receiver.py, tests/tests/suite/telemetry.rs), in a virtualenv of its
# own under target/ (git-ignored).
OTLP_PROTO_VERSION=1.45.2
PROTOBUF_VERSION=7.36.2
OTLP_VENV=target/.venv-otlp
if ! "$OTLP_VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('opentelemetry-proto') != '$OTLP_PROTO_VERSION')" 2>/dev/null; then
  echo "installing opentelemetry-proto $OTLP_PROTO_VERSION into $OTLP_VENV" >&2
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  fi
  rm -rf "$OTLP_VENV"
  mkdir -p target
  python3 -m venv "$OTLP_VENV"
  "$OTLP_VENV/bin/pip" install -q --disable-pip-version-check \
    "opentelemetry-proto==$OTLP_PROTO_VERSION" "protobuf==$PROTOBUF_VERSION"
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace --no-fail-fast
