#!/usr/bin/env bash
# Runs the whole agentd test suite. Installs what the tests need when it is missing
# (redis-server, from Debian's packages, for the Redis tests; chromium and the npm packages of
# tests/browser for the dashboard test; the Claude Code CLI of tests/claude for the process
# backend's claude-code test; the MCP servers of tests/mcp and a pinned Python mcp for the MCP
# tests; a pinned schemathesis for the OpenAPI conformance test; a pinned opentelemetry-proto
# for the OTLP receiver of the telemetry tests), then runs the cargo tests, and the Redis suites
# once more on a Redis Cluster. Clippy lints the workspace while the tests' build compiles it
# (one build, see below).
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
# The real Claude Code CLI for tests/tests/suite/claude_code/, pinned (with its platform binary
# package, e.g. linux-x64) by tests/claude/package-lock.json.
if [ ! -d tests/claude/node_modules ]; then
  npm ci --prefix tests/claude --no-audit --no-fund
fi

# The MCP reference servers (server-everything, server-filesystem) for the MCP tests
# (tests/tests/suite/mcp_tools/), pinned by tests/mcp/package-lock.json.
if [ ! -d tests/mcp/node_modules ]; then
  npm ci --prefix tests/mcp --no-audit --no-fund
fi

# Python test dependencies, each pinned in a virtualenv of its own under target/ (git-ignored),
# made afresh when it is missing or a pinned version differs: `pinned_venv DIR NAME==VERSION…`.
pinned_venv() {
  local venv=$1
  shift
  if "$venv/bin/python" - "$@" 2>/dev/null <<'PY'
import importlib.metadata as m, sys
pins = [a.split("==") for a in sys.argv[1:]]
sys.exit(any(m.version(name.split("[")[0]) != version for name, version in pins))
PY
  then
    return
  fi
  echo "installing $* into $venv" >&2
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  fi
  rm -rf "$venv"
  mkdir -p target
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "$@"
}

# The Python MCP SDK, for the MCP server the MCP tests write in Python
# (tests/mcp/exiting_server.py).
pinned_venv target/.venv-mcp "mcp==2.3.0"
# schemathesis, for the OpenAPI conformance test (tests/tests/suite/openapi_conformance.rs).
pinned_venv target/.venv-schemathesis "schemathesis==4.32.5"
# The official A2A SDK with its HTTP server extra, and uvicorn, for the A2A tests
# (tests/tests/suite/a2a.rs and a2a_client.rs drive tests/a2a/*.py).
pinned_venv target/.venv-a2a "a2a-sdk[http-server]==1.3.0" "uvicorn==0.54.0"
# The official OpenTelemetry protobuf bindings, for the OTLP receiver the telemetry tests run
# (tests/otlp/receiver.py, tests/tests/suite/telemetry.rs).
pinned_venv target/.venv-otlp "opentelemetry-proto==1.45.2" "protobuf==7.36.2"

cargo fmt --all -- --check

# One build serves clippy and the tests. clippy-driver compiles the workspace's own crates as
# rustc would, after linting them (warnings are errors, as `cargo clippy -- -D warnings` makes
# them), so `cargo clippy` and `cargo test` do not each build the workspace; every target is
# built, benches included, as `cargo clippy --all-targets` checks them. A fresh build is not
# incremental: incremental compilation only pays when the same crates are rebuilt.
export RUSTC_WORKSPACE_WRAPPER="${RUSTC_WORKSPACE_WRAPPER:-$(command -v clippy-driver)}"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
cargo test --workspace --all-targets --no-run --quiet
# Four tests at a time (libtest's default is one per core): most of a test's time is waiting —
# for the processes and servers it starts, for timers, for Redis failovers —, so two cores run
# four of them with room to spare.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}"
status=0
cargo test --workspace --no-fail-fast || status=$?
# The Redis suites once more on a Redis Cluster (three masters and three replicas started per
# test): the cross-process suite, the Redis store's suite, and the A2A and event-resume tests
# across two processes. Run even when the first run failed, so that both are reported.
AGENTD_TEST_REDIS=cluster cargo test --workspace --test suite --no-fail-fast -- \
  redis_cluster:: redis_store:: a2a::sdk::every_method_works_on_a_process_that_does_not_own \
  a2a::push::push_notifications_survive_the_death a2a::sdk::the_sdk_client_works_across_two \
  a2a::contexts::a_context_the_client_chose_is_one_context \
  a2a::push::push_notifications_leave_as_the_state_changes_when \
  event_resume::with_redis idempotent_messages::a_keyed_message_is_queued_once \
  exactly_once::a_sync_manage_wait_cut_by_kill_9_on_redis || status=$?
exit "$status"
