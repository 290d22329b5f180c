//@file full
// cli_spawn.c - running another program (a rival benchmark) without a shell.
//
// A command string read by /bin/sh (the C library's pipe-to-a-command call) lets a file name with
// a quote and $(...) in it run whatever it says. Here the program gets an
// argv array (posix_spawn: no shell reads it), its stdout comes back through
// a pipe, its stdin and stderr are /dev/null, and it runs in a process group
// of its own, which is killed whole (grandchildren too) when the time is up.
#define _POSIX_C_SOURCE 200809L   // posix_spawn, kill, clock_gettime
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char ** environ;

// The file actions of the child: stdout into the pipe, stdin and stderr from
// and to /dev/null (a rival's progress lines would garble our table), the
// read end closed.
static int child_files(posix_spawn_file_actions_t * fa, const int pipe_fd[2]) {
    int rc = posix_spawn_file_actions_init(fa);
    if (rc == 0) rc = posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(fa, pipe_fd[1], 1);
    if (rc == 0) rc = posix_spawn_file_actions_addopen(fa, 2, "/dev/null", O_WRONLY, 0);
    if (rc == 0) rc = posix_spawn_file_actions_addclose(fa, pipe_fd[0]);
    if (rc == 0) rc = posix_spawn_file_actions_addclose(fa, pipe_fd[1]);
    return rc;
}

static bool append(struct cli_child * c, const char * bytes, size_t n, size_t max_out) {
    if (c->len + n > max_out) {
        c->too_big = true;
        n          = max_out - c->len;
    }
    if (c->len + n + 1 > c->cap) {
        size_t cap  = c->cap ? c->cap : 4096;
        while (cap < c->len + n + 1) cap *= 2;
        char * bigger = realloc(c->out, cap);
        if (bigger == NULL) return false;
        c->out = bigger;
        c->cap = cap;
    }
    memcpy(c->out + c->len, bytes, n);
    c->len += n;
    c->out[c->len] = '\0';
    return !c->too_big;
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

// Read the child's stdout until it closes it, the deadline passes or max_out
// bytes came. False when the child must be killed (time, size, memory).
static bool read_until_eof(int fd, double deadline, size_t max_out, struct cli_child * c) {
    char buf[4096];
    for (;;) {
        const double left = deadline - seconds_now();
        if (left <= 0) {
            c->timed_out = true;
            return false;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        const int ready = poll(&p, 1, left > 1.0 ? 1000 : (int) (left * 1000) + 1);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) continue;   // the next turn checks the deadline
        const ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return true;   // EOF (or an error: treated as the end of its output)
        if (!append(c, buf, (size_t) n, max_out)) return false;
    }
}

// Wait for the child to exit, at most until the deadline; true if it did.
static bool wait_until(pid_t pid, double deadline, int * status) {
    for (;;) {
        const pid_t got = waitpid(pid, status, WNOHANG);
        if (got == pid) return true;
        if (got < 0 && errno != EINTR) return true;   // nothing left to wait for
        if (seconds_now() >= deadline) return false;
        nanosleep(&(struct timespec) {0, 10 * 1000 * 1000}, NULL);
    }
}

bool cli_run_child(const char * cmd, char * const * argv, double timeout_s, size_t max_out, struct cli_child * c) {
    memset(c, 0, sizeof(*c));
    c->status = -1;
    int pipe_fd[2];
    if (pipe(pipe_fd) != 0) {
        fprintf(stderr, "mg %s: cannot run %s: pipe: %s\n", cmd, mg_quote(argv[0]), strerror(errno));
        return false;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t          attr;
    int rc = child_files(&fa, pipe_fd);
    if (rc == 0) rc = posix_spawnattr_init(&attr);
    if (rc == 0) rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);   // its own group: killed whole
    if (rc == 0) rc = posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid = -1;
    // A bare name that is a file here is that file (the option named a file,
    // and cli_parse checked this one), not a program of the same name in PATH.
    char here[4096];
    const bool local = strchr(argv[0], '/') == NULL && access(argv[0], F_OK) == 0 &&
                       snprintf(here, sizeof(here), "./%s", argv[0]) < (int) sizeof(here);
    if (rc == 0) rc = local ? posix_spawn(&pid, here, &fa, &attr, argv, environ)
                            : posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(pipe_fd[1]);
    if (rc != 0) {
        close(pipe_fd[0]);
        fprintf(stderr, "mg %s: cannot run %s: %s\n", cmd, mg_quote(argv[0]), strerror(rc));
        return false;
    }
    const double deadline = seconds_now() + timeout_s;
    const bool   complete = read_until_eof(pipe_fd[0], deadline, max_out, c);
    close(pipe_fd[0]);
    int status = 0;
    if (!complete || !wait_until(pid, deadline, &status)) {
        c->timed_out = c->timed_out || complete;   // it closed stdout but did not exit in time
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    c->status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (c->timed_out) {
        fprintf(stderr, "mg %s: %s did not finish within %g s (--rival-timeout): killed\n", cmd, mg_quote(argv[0]),
                timeout_s);
        return false;
    }
    if (c->too_big) {
        fprintf(stderr, "mg %s: %s printed more than %zu bytes: killed\n", cmd, mg_quote(argv[0]), max_out);
        return false;
    }
    if (!complete) {
        fprintf(stderr, "mg %s: out of memory reading the output of %s\n", cmd, mg_quote(argv[0]));
        return false;
    }
    if (c->out == NULL && !append(c, "", 0, max_out)) return false;   // an empty string, never NULL
    return true;
}

void cli_child_free(struct cli_child * c) {
    free(c->out);
    memset(c, 0, sizeof(*c));
}
