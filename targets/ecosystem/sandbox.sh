#!/usr/bin/env bash
# Runs an ecosystem package's server as its README says, but in a room of its own:
#
#   sandbox.sh ENV [NAME=VALUE...] PROGRAM ARGS...
#
# ENV is the package's install (the campaign's `{env}`). The server starts in ENV/work with
# HOME=ENV/home and an environment of PATH, HOME and the NAME=VALUE pairs given, nothing of the
# machine's: whatever it writes (settings, databases, caches) stays in the campaign's cache, and
# no credential of the machine it runs on reaches it. GAUNTLET_CANARY is set to the canary text,
# so a tool that answers the environment shows it.
set -euo pipefail
env_dir=$1
shift
mkdir -p "$env_dir/home" "$env_dir/work"
cd "$env_dir/work"
vars=(PATH="$PATH" HOME="$env_dir/home" GAUNTLET_CANARY=CANARY-EXECUTED)
while [[ $# -gt 0 && $1 == *=* && $1 != -* ]]; do
  vars+=("$1")
  shift
done
exec env -i "${vars[@]}" "$@"
