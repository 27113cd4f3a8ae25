/* A native worker for hang forensics (issue 19 item 4), built by the test
 * with `cc -g -O0`. Local rank 0 ignores SIGTERM, says so by creating the
 * file argv[1], and blocks for ever in stuck_in_native_wait; local rank 1
 * waits for that file (30 s at most), then fails, which stops the group:
 * rank 0 outlives the shutdown grace, and ctrun saves its stacks before
 * SIGKILL. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void stuck_in_native_wait(void) {
  for (;;) pause();
}

int main(int argc, char** argv) {
  const char* rank = getenv("LOCAL_RANK");
  if (argc < 2 || rank == NULL) return 2;
  if (strcmp(rank, "0") == 0) {
    signal(SIGTERM, SIG_IGN);
    int fd = open(argv[1], O_WRONLY | O_CREAT, 0644);
    if (fd < 0) return 2;
    close(fd);
    stuck_in_native_wait();
  }
  const struct timespec tick = {0, 10 * 1000 * 1000};
  for (int i = 0; i < 3000; ++i) {
    if (access(argv[1], F_OK) == 0) return 1;
    nanosleep(&tick, NULL);
  }
  return 2;
}
