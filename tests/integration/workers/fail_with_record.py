"""Local rank $FAIL_RANK raises ValueError under @record (writing its error file);
the others wait for a signal. With FAIL_EXIT=N it calls sys.exit(N) instead."""
import os
import signal
import sys

from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    if os.environ["LOCAL_RANK"] == os.environ.get("FAIL_RANK", "1"):
        if "FAIL_EXIT" in os.environ:
            sys.exit(int(os.environ["FAIL_EXIT"]))
        raise ValueError("worker says the input is bad")
    signal.pause()


main()
