#!/bin/sh
# Announces "<pid> <group rank> <restart count>" on $ANNOUNCE, then waits for
# a gate file the test creates: $GATES/fail makes group rank 1 exit 3 on its
# first attempt; $GATES/done makes every worker exit 0.
echo "$$ $GROUP_RANK $TORCHELASTIC_RESTART_COUNT" > "$ANNOUNCE"
while :; do
  if [ -e "$GATES/fail" ] && [ "$GROUP_RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then exit 3; fi
  if [ -e "$GATES/done" ]; then exit 0; fi
  sleep 0.05
done
