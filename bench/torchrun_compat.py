"""Runs Debian's torchrun (torch 1.13) on Python 3.11, where it crashes with its
default flags (`Std.from_str` returns None for digit strings, pytorch#92319,
fixed in torch 2.0 as `Std(int(v))`). The fix is applied in this process only;
the system file is not touched. Usage: python3 torchrun_compat.py <torchrun args>
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api

_original = api.Std.from_str


def _from_str(vm):
    if re.match(r"^\d+$", vm):
        return api.Std(int(vm))
    return _original(vm)


api.Std.from_str = staticmethod(_from_str)

from torch.distributed.run import main  # noqa: E402

if __name__ == "__main__":
    sys.argv[0] = "torchrun"
    main()
