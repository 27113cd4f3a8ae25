"""The worker side of ctrun's heartbeat (--heartbeat-timeout): touch the file
ctrun names in CTRUN_HEARTBEAT_FILE once per training step. A no-op when ctrun
runs without a heartbeat. Copy these few lines into a training script."""
import os

_PATH = os.environ.get("CTRUN_HEARTBEAT_FILE")


def beat():
    """Marks this worker alive (creates the file on the first call)."""
    if not _PATH:
        return
    try:
        os.utime(_PATH)
    except FileNotFoundError:
        with open(_PATH, "a"):
            pass
