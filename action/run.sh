#!/usr/bin/env bash
# The action's run step: `mcp-gauntlet run` against the one target the inputs name, writing
# JUnit, SARIF and the JSON report into the output folder and a Markdown summary into the job's
# step summary. The exit code and what it means become step outputs; the step fails on a
# non-zero code when INPUT_FAIL is true. A run that could not start gets a summary saying why.
set -uo pipefail
dir="${GAUNTLET_DIR:?GAUNTLET_DIR is unset (the key step did not run)}"
export PATH="$dir/bin:$PATH"
out_dir="${INPUT_OUTPUT_DIR:-gauntlet-results}"
mkdir -p "$out_dir"
junit="$out_dir/gauntlet.xml" sarif="$out_dir/gauntlet.sarif" report="$out_dir/gauntlet.json"
rm -f "$junit" "$sarif" "$report"

args=(run)
targets=0 target="the embedded default"
for pair in "http:${INPUT_HTTP:-}" "stdio:${INPUT_STDIO:-}" "gate:${INPUT_GATE:-}" "gate-stdio:${INPUT_GATE_STDIO:-}"; do
  flag="${pair%%:*}" value="${pair#*:}"
  if [ -n "$value" ]; then
    args+=("--$flag" "$value")
    target="--$flag $value"
    targets=$((targets + 1))
  fi
done
# A folder of target files: a campaign over them instead of one run (the matrix is its report).
if [ -n "${INPUT_TARGETS:-}" ]; then
  targets=$((targets + 1))
  target="the targets in ${INPUT_TARGETS}"
  campaign_dir="$out_dir/campaign"
  # A folder left by an earlier step or job would be resumed, and its matrix taken for this one.
  rm -rf "$campaign_dir"
  args=(campaign "$INPUT_TARGETS" --out "$campaign_dir" --targets-at-once 2)
fi
if [ "$targets" -gt 1 ]; then
  echo "::error title=mcp-gauntlet::give one target of http, stdio, gate, gate-stdio and targets, not $targets"
  printf 'exit-code=2\noutcome=usage\njunit=\nsarif=\nreport=\n' >> "${GITHUB_OUTPUT:?GITHUB_OUTPUT is unset}"
  [ "${INPUT_FAIL:-true}" = true ] && exit 2
  exit 0
fi
if [ -n "${INPUT_TARGETS:-}" ]; then
  # A campaign writes each lane's report and JUnit and the matrix under its folder; the
  # matrix's JSON form is the step's report.
  report="$campaign_dir/matrix.json"
else
  [ -n "${INPUT_BASELINE:-}" ] && args+=(--baseline "$INPUT_BASELINE")
  [ "${INPUT_STRICT:-false}" = true ] && args+=(--strict)
  [ "${INPUT_QUIET:-true}" = true ] && args+=(--quiet)
  args+=(--junit "$junit" --sarif "$sarif" --report "$report")
  [ -n "${GITHUB_STEP_SUMMARY:-}" ] && args+=(--summary-md "$GITHUB_STEP_SUMMARY")
fi
# The extra arguments, one per line; those after a line `--` are libtest's and go last.
libtest=()
seen_separator=false
while IFS= read -r line; do
  [ -z "$line" ] && continue
  if [ "$seen_separator" = false ] && [ "$line" = "--" ]; then
    seen_separator=true
  elif [ "$seen_separator" = true ]; then
    libtest+=("$line")
  else
    args+=("$line")
  fi
done <<< "${INPUT_ARGS:-}"
[ "${#libtest[@]}" -gt 0 ] && args+=(-- "${libtest[@]}")

# The extra arguments may carry credentials (`--header`): only the target is echoed.
echo "mcp-gauntlet ${args[0]}: $target"
errors=$(mktemp) said=$(mktemp)
if [ -n "${INPUT_TARGETS:-}" ]; then
  # A campaign's lines (and its errors) are shown as they come and kept, for its summary.
  mcp-gauntlet "${args[@]}" 2>&1 | tee "$said"
  code=${PIPESTATUS[0]}
  cp "$said" "$errors"
else
  # stderr is shown as it comes and kept, for the summary of a run that could not start.
  { mcp-gauntlet "${args[@]}" 2>&1 1>&3 3>&- | tee "$errors" >&2 3>&-; } 3>&1
  code=${PIPESTATUS[0]}
fi
# A campaign's summary: what each lane came to, and where the matrix is.
if [ -n "${INPUT_TARGETS:-}" ] && [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  {
    echo "## mcp-gauntlet campaign over ${INPUT_TARGETS}"
    echo
    echo "<pre>"
    sed -n '/^campaign: /,$p' "$said" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'
    echo "</pre>"
    echo
  } >> "$GITHUB_STEP_SUMMARY"
fi
rm -f "$said"

case "$code" in
  0) outcome=passed ;;
  1) outcome=failed ;;
  2) outcome=usage ;;
  3) outcome=setup-failed ;;
  4) outcome=untestable ;;
  5) outcome=incomplete ;;
  *) outcome=crashed ;;
esac
{
  echo "exit-code=$code"
  echo "outcome=$outcome"
  for name in junit sarif report; do
    file="${!name}"
    if [ -f "$file" ]; then echo "$name=$file"; else echo "$name="; fi
  done
} >> "${GITHUB_OUTPUT:?GITHUB_OUTPUT is unset}"

# A run that never reached its trials wrote no summary: say why, with the end of its stderr.
if [ ! -f "$report" ] && [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  case "$outcome" in
    untestable) why="the target could not be tested (exit 4): it never started, accepted no connection, its command was not found, or it answered the version probe in no way MCP does, or no trial selected applies to it" ;;
    usage) why="the command line was not understood (exit 2)" ;;
    setup-failed) why="the suite's own inputs are wrong (exit 3): a case file, the baseline, or an output path" ;;
    *) why="the run ended with exit code $code before writing its reports" ;;
  esac
  {
    echo "## mcp-gauntlet"
    echo
    echo "**✗ not run:** $why."
    echo
    echo "<pre>"
    tail -n 20 "$errors" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'
    echo "</pre>"
    echo
  } >> "$GITHUB_STEP_SUMMARY"
fi
rm -f "$errors"

if [ "$code" -ne 0 ]; then
  echo "::error title=mcp-gauntlet::$outcome (exit $code); the job summary and $out_dir/ hold the details"
  [ "${INPUT_FAIL:-true}" = true ] && exit "$code"
fi
exit 0
