#!/usr/bin/env bash
# Run one fuzz target on the stable toolchain:
#
#   fuzz/run.sh TARGET [SECONDS]     # TARGET: canonical_bytes, smuggle, differential, proxy_roundtrip, binding
#
# Installs cargo-fuzz when it is missing. No sanitizer (`-s none`), so stable works with
# RUSTC_BOOTSTRAP=1 (libFuzzer's coverage instrumentation needs no nightly feature otherwise).
# The working corpus grows in fuzz/corpus/TARGET (not committed); the committed seeds in
# fuzz/seeds/TARGET are read too. A crash lands in fuzz/artifacts/TARGET/: fix it, then copy the
# input to fuzz/regressions/TARGET/ so `cargo test` replays it forever.
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?usage: fuzz/run.sh TARGET [SECONDS]}
secs=${2:-60}
command -v cargo-fuzz > /dev/null || cargo install cargo-fuzz --locked
mkdir -p "corpus/$target" "artifacts/$target" "seeds/$target"
export RUSTC_BOOTSTRAP=1
exec cargo fuzz run -s none --release "$target" "corpus/$target" "seeds/$target" -- \
  -max_total_time="$secs" -dict=json.dict -max_len=4096 -timeout=10 -rss_limit_mb=1024 \
  -artifact_prefix="artifacts/$target/" -print_final_stats=1
