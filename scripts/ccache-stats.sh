#!/usr/bin/env bash
# scripts/ccache-stats.sh snapshot FILE | report FILE LABEL
# The compiler cache's counters around one build: `snapshot` saves ccache's
# counters, `report` prints the hits and misses since that snapshot, e.g.
# "build: ccache 412/418 compiles cached (98.6 %), 6 compiled". Quiet when
# ccache is not installed.
set -euo pipefail
command -v ccache >/dev/null 2>&1 || exit 0
case "${1:-}" in
  snapshot) ccache --print-stats > "$2" 2>/dev/null || true ;;
  report)
    now=$(mktemp); trap 'rm -f "$now"' EXIT
    ccache --print-stats > "$now" 2>/dev/null || exit 0
    awk -v label="$3" '
      FNR == NR { before[$1] = $2; next }
      { d = $2 - before[$1] }
      $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { hit += d }
      $1 == "cache_miss" { miss += d }
      $1 ~ /^(could_not_use_precompiled_header|unsupported_|compiler_produced|multiple_source|output_to_stdout|preprocessor_error|no_input_file|bad_)/ { other += d }
      END {
        n = hit + miss
        if (n == 0) { printf "%s: ccache: nothing compiled\n", label; exit }
        printf "%s: ccache %d/%d compiles cached (%.1f %%), %d compiled", label, hit, n, 100 * hit / n, miss
        if (other > 0) printf ", %d not cacheable", other
        printf "\n"
      }' "$2" "$now"
    ;;
  *) echo "usage: $0 snapshot FILE | report FILE LABEL" >&2; exit 2 ;;
esac
