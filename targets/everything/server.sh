#!/usr/bin/env bash
# The MCP project's reference server (npm `@modelcontextprotocol/server-everything`, installed
# by the campaign from target.json's recipe into ENV), run as its documentation says.
#
#   server.sh ENV stdio
#   server.sh ENV http PORT        (its Streamable HTTP server: stateful only, on /mcp)
#
# Its tools take other names than our own peers': the allowed tool is `echo {message}`, and the
# tool the suite must never manage to run is `get-env`, which answers the process environment:
# the server runs with an environment of its own, PATH, HOME and GAUNTLET_CANARY only, so that
# answer holds the canary text (a run of it is seen by text as well as by the protocol) and
# nothing of the machine's environment.
set -euo pipefail
here=$1
shift
main=$here/node_modules/@modelcontextprotocol/server-everything/dist/index.js
run() { exec env -i PATH="$PATH" HOME="$HOME" GAUNTLET_CANARY=CANARY-EXECUTED "$@"; }
case "${1:-stdio}" in
  http) run PORT="$2" node "$main" streamableHttp ;;
  *) run node "$main" stdio ;;
esac
