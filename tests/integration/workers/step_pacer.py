"""A worker that touches its heartbeat file (CTRUN_HEARTBEAT_FILE) once per
step: STEP_S seconds a step, SLOW_STEP_S for rank SLOW_RANK. It stops when
STOP_FILE exists, or after MAX_STEPS steps (a bound, should the test die)."""
import os
import time

rank = int(os.environ["RANK"])
slow = rank == int(os.environ["SLOW_RANK"])
step = float(os.environ["SLOW_STEP_S" if slow else "STEP_S"])
heartbeat = os.environ["CTRUN_HEARTBEAT_FILE"]
stop = os.environ["STOP_FILE"]
for _ in range(int(os.environ.get("MAX_STEPS", "600"))):
    if os.path.exists(stop):
        break
    with open(heartbeat, "a"):
        pass
    os.utime(heartbeat)
    time.sleep(step)  # the step's work
