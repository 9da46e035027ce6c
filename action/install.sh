#!/usr/bin/env bash
# The action's build steps. `key`: where the suite built from these sources lives, and the cache
# key naming it (a hash of every file the build reads), as step outputs. `install`: build it
# there with `cargo install --locked` unless the cache already brought it, and put it on PATH.
set -euo pipefail
src="${GITHUB_ACTION_PATH:?not run by GitHub Actions: GITHUB_ACTION_PATH is unset}"
case "${1:-}" in
  key)
    # Every file cargo reads to build the binary, in a fixed order, hashed with its path.
    if command -v sha256sum > /dev/null; then sum=(sha256sum); else sum=(shasum -a 256); fi
    hash=$(cd "$src" \
      && find Cargo.toml Cargo.lock build.rs src cases reference-gate/Cargo.toml reference-gate/src \
           fixtures/gate -type f -print0 2> /dev/null \
      | LC_ALL=C sort -z | xargs -0 "${sum[@]}" | "${sum[@]}" | cut -c1-32)
    base="${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:?RUNNER_TEMP is unset}}"
    {
      echo "key=mcp-gauntlet-${RUNNER_OS:-os}-${RUNNER_ARCH:-arch}-${ImageOS:-image}-$hash"
      echo "dir=$base/mcp-gauntlet/$hash"
    } >> "${GITHUB_OUTPUT:?GITHUB_OUTPUT is unset}"
    ;;
  install)
    dir="${GAUNTLET_DIR:?GAUNTLET_DIR is unset (the key step did not run)}"
    if "$dir/bin/mcp-gauntlet" --version > /dev/null 2>&1; then
      echo "mcp-gauntlet: built from these sources already ($dir)"
    else
      echo "mcp-gauntlet: building from $src"
      cargo install --locked --path "$src" --root "$dir" --bin mcp-gauntlet
    fi
    echo "$dir/bin" >> "${GITHUB_PATH:?GITHUB_PATH is unset}"
    ;;
  *)
    echo "usage: install.sh key|install" >&2
    exit 2
    ;;
esac
