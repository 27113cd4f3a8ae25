"""Local rank 1 raises on the first attempt only; every attempt dumps its env."""
import os
import runpy

from torch.distributed.elastic.multiprocessing.errors import record

runpy.run_path(os.path.join(os.path.dirname(__file__), "dump_env.py"))


@record
def main():
    if os.environ["LOCAL_RANK"] == "1" and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
        raise RuntimeError("crash on the first attempt")


main()
