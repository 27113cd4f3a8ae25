/* Times one run of a command for bench/launch.sh, without the Python
 * driver's own start-up cost in the figure: the clock starts just before
 * posix_spawn and stops when waitpid returns. The command's stdout goes to
 * /dev/null; its stderr is inherited. Prints "<seconds> <exit code>" on
 * stdout. Usage: launch_timer COMMAND [ARG...] */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: launch_timer COMMAND [ARG...]\n");
    return 2;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid;
  if (posix_spawn(&pid, argv[1], &actions, NULL, argv + 1, environ) != 0) {
    perror(argv[1]);
    return 2;
  }
  int status;
  if (waitpid(pid, &status, 0) < 0) return 2;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  printf("%.9f %d\n", s, code);
  return 0;
}
