#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build: every cargo-fuzz target of fuzz/ into $OUT, each with
#   $OUT/<target>                     the libFuzzer binary (address sanitizer, as the image asks)
#   $OUT/<target>_seed_corpus.zip     fuzz/seeds/<target> and fuzz/regressions/<target>
#   $OUT/<target>.dict                fuzz/json.dict (JSON tokens and MCP method names)
#   $OUT/<target>.options             the same libFuzzer limits fuzz/run.sh uses
#
# The image sets $SRC, $OUT and $SANITIZER; its `cargo` wrapper adds the coverage flags for
# coverage builds. To try it outside the image (stable Rust, cargo-fuzz installed):
#   SRC=/path/holding/mcp-gauntlet OUT=/tmp/out RUSTC_BOOTSTRAP=1 .clusterfuzzlite/build.sh
# (fuzz/clusterfuzzlite-check.sh does that and runs each built target on its seed corpus.)
project=${PROJECT_DIR:-$SRC/mcp-gauntlet}
cd "$project"

# Rust has no sanitizer flags through CFLAGS; the address sanitizer is the only one ClusterFuzzLite
# supports for Rust. A coverage build is instrumented by the image's cargo wrapper instead.
case "${SANITIZER:-address}" in
  address) sanitizer=address ;;
  *) sanitizer=none ;;
esac

cargo fuzz build --sanitizer "$sanitizer" -O --debug-assertions

triple=$(rustc -vV | sed -n 's/^host: //p')
built=fuzz/target/$triple/release
for target in $(cargo fuzz list); do
  cp "$built/$target" "$OUT/$target"
  corpus=$(mktemp -d)
  for dir in "fuzz/seeds/$target" "fuzz/regressions/$target"; do
    if [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
      cp "$dir"/* "$corpus/"
    fi
  done
  rm -f "$OUT/${target}_seed_corpus.zip"
  # A target without seeds gets no zip (libFuzzer starts from an empty input).
  if [ -n "$(ls -A "$corpus")" ]; then
    (cd "$corpus" && zip -q -j "$OUT/${target}_seed_corpus.zip" ./*)
  fi
  rm -rf "$corpus"
  cp fuzz/json.dict "$OUT/$target.dict"
  printf '[libfuzzer]\nmax_len = 4096\ntimeout = 10\nrss_limit_mb = 1024\n' > "$OUT/$target.options"
done
