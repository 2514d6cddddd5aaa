/* The pod sandbox's process (what registry.k8s.io/pause is; no registry can be reached here):
 * holds the pod's namespaces, reaps zombies as the pod's PID 1, ends on SIGINT or SIGTERM. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
  struct sigaction stop_action = {.sa_handler = stop}, reap_action = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &stop_action, NULL);
  sigaction(SIGTERM, &stop_action, NULL);
  sigaction(SIGCHLD, &reap_action, NULL);
  for (;;) pause();
  return 1;
}
