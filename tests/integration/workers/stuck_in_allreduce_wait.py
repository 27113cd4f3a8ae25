"""Touches its heartbeat file once, then blocks for ever in a function with
a name to find in its saved stacks (hang forensics, issue 19 item 4)."""
import os
import pathlib
import time


def stuck_in_allreduce_wait():
    while True:
        time.sleep(3600)


pathlib.Path(os.environ["CTRUN_HEARTBEAT_FILE"]).touch()
stuck_in_allreduce_wait()
