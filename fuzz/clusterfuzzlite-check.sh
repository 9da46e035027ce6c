#!/usr/bin/env bash
# Try .clusterfuzzlite/build.sh as the ClusterFuzzLite base image runs it, on this machine:
# a copy of the committed tree under a temporary $SRC, $OUT beside it, SANITIZER=address (the
# stable toolchain with RUSTC_BOOTSTRAP=1, as the image's nightly would), then each built target
# run for SECONDS (default 5) on its unzipped seed corpus with its dictionary and options.
#
#   fuzz/clusterfuzzlite-check.sh [SECONDS]
set -euo pipefail
secs=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v cargo-fuzz > /dev/null || cargo install cargo-fuzz --locked
mkdir -p "$work/src/mcp-gauntlet" "$work/out"
(cd "$root" && git ls-files -z | tar --null -T - -cf -) | (cd "$work/src/mcp-gauntlet" && tar xf -)
# The fuzz build's own target folder is kept between tries.
mkdir -p "$root/fuzz/target"
ln -s "$root/fuzz/target" "$work/src/mcp-gauntlet/fuzz/target"
(cd "$work/src/mcp-gauntlet" && SRC=$work/src OUT=$work/out SANITIZER=address \
  FUZZING_ENGINE=libfuzzer ARCHITECTURE=x86_64 RUSTC_BOOTSTRAP=1 bash .clusterfuzzlite/build.sh)
status=0
for bin in "$work"/out/*_seed_corpus.zip; do
  target=$(basename "$bin" _seed_corpus.zip)
  corpus=$work/corpus-$target
  mkdir -p "$corpus"
  unzip -q "$bin" -d "$corpus"
  max_len=$(sed -n 's/^max_len = //p' "$work/out/$target.options")
  if "$work/out/$target" -dict="$work/out/$target.dict" -max_len="$max_len" -timeout=10 \
      -rss_limit_mb=2048 -max_total_time="$secs" -print_final_stats=1 "$corpus" \
      > "$work/$target.log" 2>&1; then
    echo "$target: ok, $(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$target.log") exec/s with the address sanitizer"
  else
    echo "$target: FAILED"; tail -30 "$work/$target.log"; status=1
  fi
done
exit $status
