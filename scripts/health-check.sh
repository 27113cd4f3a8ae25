#!/bin/sh
# ctrun's default node health check (--health-check; docs/reliability.md).
#
# Exits 0 when this node looks healthy, else prints why and exits 1; ctrun
# then takes the node out of the job and shows these lines (the last 20) in
# its failure report, its events file and `ctrun status`.
#
#   the log directory ($CTRUN_LOG_DIR, set by ctrun; else $TMPDIR or /tmp)
#     is writable
#   the free space there is at least $CTRUN_HEALTH_MIN_FREE_MB (default 1024)
#   nvidia-smi -q, when present (skip with CTRUN_HEALTH_SKIP_GPU=1), shows no
#     GPU that is lost, in an unknown error state, with uncorrectable ECC
#     errors since boot, with pages or rows waiting to be retired/remapped
#     (or a remap that failed), with memory it cannot repair or a repair
#     pending (Hopper, driver 580), or past its SRAM error threshold
#
# Extend it: copy it and add tests where it says so, or run it from your own
# script: /usr/share/ctrun/health-check.sh && my-nic-check
set -u

fail() {
  echo "unhealthy: $*"
  exit 1
}

dir=${CTRUN_LOG_DIR:-${TMPDIR:-/tmp}}
probe="$dir/.ctrun_health_check.$$"
if ! (: > "$probe") 2>/dev/null; then
  fail "the log directory $dir is not writable"
fi
rm -f "$probe"

floor=${CTRUN_HEALTH_MIN_FREE_MB:-1024}
case $floor in
  ''|*[!0-9]*) fail "CTRUN_HEALTH_MIN_FREE_MB='$floor' must be a whole number of MB" ;;
esac
free=$(df -Pm "$dir" 2>/dev/null | awk 'NR == 2 { print $4 }')
if [ -z "$free" ]; then
  fail "cannot read the free space of $dir (df -Pm failed)"
fi
if [ "$free" -lt "$floor" ]; then
  fail "only $free MB free on $dir, below CTRUN_HEALTH_MIN_FREE_MB=$floor"
fi

if [ "${CTRUN_HEALTH_SKIP_GPU:-0}" != 1 ] && command -v nvidia-smi >/dev/null 2>&1; then
  if ! out=$(nvidia-smi -q 2>&1); then
    echo "$out" | tail -n 5
    fail "nvidia-smi -q failed (driver or GPU in an error state)"
  fi
  # One line per problem, naming the GPU (its PCI bus id) and the field.
  bad=$(echo "$out" | awk '
    /^GPU [0-9A-Fa-f:.]+$/ { gpu = $2; section = ""; next }
    /Unknown Error|GPU is lost|GPU requires reset/ { print gpu ": " $0; next }
    /^ *Volatile *$/ { section = "volatile"; next }
    /^ *Aggregate *$/ { section = "aggregate"; next }
    /^ *(Retired Pages|Remapped Rows)/ { section = "retire"; next }
    section == "volatile" && /Uncorrectable/ && /: *[1-9][0-9]* *$/ \
      { print gpu ": uncorrectable ECC errors since boot:" $0; next }
    /(Unrepairable Memory|Repair Pending|SRAM Threshold Exceeded)[^:]*: *Yes/ { print gpu ":" $0; next }
    section == "retire" && /(Pending|Remapping Failure Occurred)[^:]*: *Yes/ { print gpu ":" $0; next }
  ')
  if [ -n "$bad" ]; then
    echo "$bad" | sed 's/  */ /g'
    fail "nvidia-smi -q reports a GPU in an error state"
  fi
fi

# Add your own tests here (a NIC link, a mount, a daemon); call fail "why".

echo "healthy: $dir writable, $free MB free"
exit 0
