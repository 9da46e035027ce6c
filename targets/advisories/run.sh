#!/usr/bin/env bash
# Prove the advisory cases on the releases the advisories name: each vulnerable release pinned
# here must reproduce its advisory and each first fixed release must not. Prints the table and
# fails when a row differs from what it should be. The peers' code is the same on both releases;
# only the pinned package differs (python-VERSION.txt, typescript-VERSION/package-lock.json,
# rust-VERSION/Cargo.lock).
#
#   targets/advisories/run.sh     # installs what is missing under target/peers/advisories/
#
# A registry that cannot be reached skips its rows, saying so.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/targets/advisories
out=$root/target/peers/advisories
mkdir -p "$out"
bin=${MCP_GAUNTLET:-$root/target/release/mcp-gauntlet}
[ -x "$bin" ] || cargo build --release --quiet
status=0
rows=()

. "$root/targets/ports.sh"

# row ADVISORY RELEASE WANT GOT NOTE: one line of the table; a row whose GOT is not WANT fails.
row() {
  local mark=ok
  [ "$3" = "$4" ] || { mark=WRONG; status=1; }
  rows+=("$(printf '%-16s %-22s %-14s %-14s %-5s %s' "$1" "$2" "$3" "$4" "$mark" "$5")")
}

# reproduced LOG ADVISORY: what the run's closing list says of ADVISORY.
reproduced() {
  if grep -q "^  REPRODUCED $2" "$1"; then echo reproduced
  elif grep -q "^  not reproduced: .*$2" "$1"; then echo clean
  else echo "not-tested"; fi
}

# python_venv VERSION: a venv with mcp==VERSION and what it pulls, pinned by python-VERSION.txt.
python_venv() {
  local venv=$out/python-$1
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import mcp" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet -r "$here/python-$1.txt"
  fi
  echo "$venv/bin/python"
}

# python_row ADVISORY VERSION WANT [auth]: the FastMCP peer on mcp==VERSION, the advisory's cases.
python_row() {
  local advisory=$1 version=$2 want=$3 auth=${4:-} py port url log pid args=()
  py=$(python_venv "$version")
  port=$(free_port); url=http://127.0.0.1:$port/mcp; log=$out/$advisory-$version
  if [ -n "$auth" ]; then
    [ -f "$out/issuer/jwks.json" ] || "$bin" auth-issuer --out "$out/issuer" --kid k1 > /dev/null
    args=(--jwks "$out/issuer/jwks.json" --issuer https://issuer.test --audience "$url")
  fi
  "$py" "$here/python_v1.py" http "$port" "${args[@]}" > "$log.server.log" 2>&1 &
  pid=$!
  if wait_port "$port"; then
    local run=(--http "$url" --advisory "$advisory")
    [ -n "$auth" ] && run+=(--auth-issuer-key "$out/issuer/issuer-key.pem" --auth-issuer https://issuer.test --auth-audience "$url" --auth-kid k1)
    "$bin" run "${run[@]}" > "$log.log" 2>&1 || true
    row "$advisory" "mcp $version" "$want" "$(reproduced "$log.log" "$advisory")" "run --advisory $advisory"
  else
    row "$advisory" "mcp $version" "$want" "no-server" "$log.server.log"
  fi
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
}

# served_row ADVISORY VERSION WANT: the FastMCP peer on mcp==VERSION, started by the runner
# itself (`run --serve`), so the series cases read its process: the advisories about what
# accumulates over many requests (sessions kept forever, refused opens that leave one behind).
served_row() {
  local advisory=$1 version=$2 want=$3 py log
  py=$(python_venv "$version")
  log=$out/$advisory-$version
  "$bin" run --serve "$py $here/python_v1.py http {port}" --advisory "$advisory" --report "$log.json" > "$log.log" 2>&1 || true
  row "$advisory" "mcp $version" "$want" "$(reproduced "$log.log" "$advisory")" "run --serve --advisory $advisory"
}

if python3 -m pip index versions mcp > /dev/null 2>&1; then
  python_row CVE-2025-66416 1.22.0 reproduced
  python_row CVE-2025-66416 1.23.0 clean
  python_row CVE-2026-52869 1.27.1 reproduced auth
  python_row CVE-2026-52869 1.27.2 clean auth
  served_row GHSA-84m7-p3x7-pcfv 1.29.1 reproduced
  served_row GHSA-84m7-p3x7-pcfv 1.30.0 clean
else
  echo "SKIP the Python SDK rows: the PyPI registry cannot be reached from here"
fi

# ts_row VERSION WANT_CASE WANT_LOAD: the shared-transport peer on the TypeScript SDK VERSION.
# First the advisory's case (eight clients, one request each, the same id, each its own text),
# on a fresh server; then `load`, eight clients whose request ids collide as SDK clients' do, 400
# requests: an answer that reaches the wrong client is the advisory (`load` counts it as wrong).
# The fixed release answers HTTP 500 to every request after a shared transport's first, so the
# case cannot be sent there (not-tested) and load loses every request but crosses none (clean).
ts_row() {
  local version=$1 want_case=$2 want_load=$3 dir=$out/typescript-$1 port pid got line url
  mkdir -p "$dir"
  cp "$here/typescript-$version/package.json" "$here/typescript-$version/package-lock.json" "$here/typescript_shared.mjs" "$dir/"
  [ -d "$dir/node_modules/@modelcontextprotocol/sdk" ] || (cd "$dir" && npm ci --silent --no-audit --no-fund)
  port=$(free_port); url=http://127.0.0.1:$port/mcp
  node "$dir/typescript_shared.mjs" http "$port" > "$dir/server.log" 2>&1 &
  pid=$!
  if wait_port "$port"; then
    "$bin" run --http "$url" --advisory CVE-2026-25536 > "$dir/case.log" 2>&1 || true
    row CVE-2026-25536 "sdk $version" "$want_case" "$(reproduced "$dir/case.log" CVE-2026-25536)" "run --advisory CVE-2026-25536"
    "$bin" load --http "$url" --concurrency 8 --requests 400 --request-timeout 3 --same-ids > "$dir/load.log" 2>&1 || true
    line=$(grep -o '[0-9]* wrong' "$dir/load.log" | head -1)
    if [ -z "$line" ]; then got=no-answer
    elif [ "${line%% *}" -gt 0 ]; then got=reproduced
    else got=clean; fi
    row CVE-2026-25536 "sdk $version" "$want_load" "$got" "load --same-ids: ${line:-?}"
  else
    row CVE-2026-25536 "sdk $version" "$want_case" "no-server" "$dir/server.log"
  fi
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
}

# ts_template_row VERSION WANT: a stateful peer with a resource template of an exploded variable
# (typescript_templates.mjs) on the TypeScript SDK VERSION, started by the runner (`--serve`, so
# the series reads its CPU), the CPU advisory's case: a URI of many commas against the template.
# 1.24.3 is the last release before the fix's line, 1.26.0 the first after it (1.25.x is kept
# for other checks).
ts_template_row() {
  local version=$1 want=$2 dir=$out/typescript-$1 log
  mkdir -p "$dir"
  cp "$here/typescript-$version/package.json" "$here/typescript-$version/package-lock.json" "$here/typescript_templates.mjs" "$dir/"
  [ -d "$dir/node_modules/@modelcontextprotocol/sdk" ] || (cd "$dir" && npm ci --silent --no-audit --no-fund)
  log=$out/CVE-2026-0621-$version
  "$bin" run --serve "node $dir/typescript_templates.mjs http {port}" --advisory CVE-2026-0621 --report "$log.json" > "$log.log" 2>&1 || true
  row CVE-2026-0621 "sdk $version" "$want" "$(reproduced "$log.log" CVE-2026-0621)" "run --serve --advisory CVE-2026-0621"
}

if command -v npm > /dev/null && npm view @modelcontextprotocol/sdk@1.26.0 version > /dev/null 2>&1; then
  ts_row 1.25.3 reproduced reproduced
  ts_row 1.26.0 not-tested clean
  ts_template_row 1.24.3 reproduced
  ts_template_row 1.26.0 clean
else
  echo "SKIP the TypeScript SDK rows: the npm registry cannot be reached from here (or npm is missing)"
fi

# rust_row ADVISORY VERSION WANT: the rmcp peer (rust_v1.rs) built on rmcp VERSION, pinned by
# rust-VERSION/Cargo.lock, the advisory's cases. Both releases share one target folder, so the
# second build compiles little more than rmcp itself.
rust_row() {
  local advisory=$1 version=$2 want=$3 manifest=$here/rust-$2/Cargo.toml peer port url log pid
  local target=$out/rust
  peer=$target/release/advisory-peer-rmcp-${version//./-}
  log=$out/$advisory-rmcp-$version
  if ! CARGO_TARGET_DIR=$target cargo build --locked --release --quiet --manifest-path "$manifest" > "$log.build.log" 2>&1; then
    row "$advisory" "rmcp $version" "$want" "no-build" "$log.build.log"
    return
  fi
  port=$(free_port); url=http://127.0.0.1:$port/mcp
  "$peer" http "$port" > "$log.server.log" 2>&1 &
  pid=$!
  if wait_port "$port"; then
    "$bin" run --http "$url" --advisory "$advisory" > "$log.log" 2>&1 || true
    row "$advisory" "rmcp $version" "$want" "$(reproduced "$log.log" "$advisory")" "run --advisory $advisory"
  else
    row "$advisory" "rmcp $version" "$want" "no-server" "$log.server.log"
  fi
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
}

if cargo fetch --locked --quiet --manifest-path "$here/rust-1.3.0/Cargo.toml" > /dev/null 2>&1 &&
   cargo fetch --locked --quiet --manifest-path "$here/rust-1.4.0/Cargo.toml" > /dev/null 2>&1; then
  rust_row CVE-2026-42559 1.3.0 reproduced
  rust_row CVE-2026-42559 1.4.0 clean
else
  echo "SKIP the Rust SDK rows: the crates registry cannot be reached from here (rmcp 1.3.0/1.4.0 are not cached)"
fi

printf '%-16s %-22s %-14s %-14s %-5s %s\n' advisory release should-be got "" how
for r in "${rows[@]}"; do echo "$r"; done
exit $status
