/* The floor for bench/launch.sh: what any launcher of N processes must do at
 * least. Forks N children, each execs /bin/true, then reaps all N. Exit 0
 * when every child exited 0. Usage: launch_floor N */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  int n = argc == 2 ? atoi(argv[1]) : 0;
  if (n <= 0) {
    fprintf(stderr, "usage: launch_floor N (N >= 1)\n");
    return 2;
  }
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      execl("/bin/true", "true", (char*)NULL);
      _exit(127);
    }
  }
  int failed = 0;
  for (int i = 0; i < n; ++i) {
    int status;
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  return failed;
}
