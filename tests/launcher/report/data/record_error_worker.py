# Regenerates record_error.json, the fixture error_file_test.cc and
# report_test.cc parse: a worker whose @record-decorated main raises, run by
# Debian's torch 1.13 with TORCHELASTIC_ERROR_FILE set. From the repo root:
#   TORCHELASTIC_ERROR_FILE=tests/launcher/report/data/record_error.json \
#     /usr/bin/python3 tests/launcher/report/data/record_error_worker.py
# (exits 1 with a traceback; that is expected). Tests that quote the file's
# timestamp or traceback must be updated after regenerating.
from torch.distributed.elastic.multiprocessing.errors import record


def load(step):
    raise ValueError(f"loss is nan at step {step}")


@record
def main():
    load(7)


if __name__ == "__main__":
    main()
