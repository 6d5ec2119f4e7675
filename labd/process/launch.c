/* labd's launcher: forks the measured program and reports the program's own resource usage.
 *
 * Why it exists: Linux folds the memory image a process had before exec into its peak
 * resident set (ru_maxrss), so a program forked straight from labd reports labd's own memory.
 * This launcher is exec'd first (its image is about a megabyte), forks the program from there,
 * and reports what wait4 says about the program alone.
 *
 * Usage: labd-launch --result-fd N [--cpus 0,2] [--no-aslr] [--user UID:GID[:G1,G2...]]
 *                    [--cwd DIR] [--nofile N] [--timeout-ms MS] -- PROGRAM [ARG...]
 * One line goes to fd N:
 *   ok <wait status> <wall ns> <user us> <system us> <max rss KiB> <timed out 0|1> <strays>
 *   error <stage> <errno> <message>
 * SIGTERM to the launcher kills the program (and its process group) and still reports.
 * Signals other processes send it with kill(2) are ignored: the program can reach its parent
 * (kill -SEGV $PPID would have blamed the device, kill -ALRM $PPID faked a time-out); only
 * labd, its parent, may send SIGTERM. SIGKILL and SIGSTOP cannot be refused; labd judges those.
 * Nothing the program started outlives it: the launcher is a child subreaper, so descendants
 * that detach (setsid, double fork) stay below it; once the program's own figures are taken,
 * every descendant still running gets SIGTERM, then SIGKILL after a short grace, and is
 * reaped. <strays> is how many there were.
 * Asked to drop to a user, it refuses to exec the program as root, and enters --cwd only after
 * the drop: the program's account must be able to reach it, not labd's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ctype.h>
#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_GROUPS 64
#define STRAY_GRACE_MS 1000  /* after SIGTERM, before SIGKILL */
#define MAX_PROCS 65536

static volatile sig_atomic_t timed_out = 0, stopped = 0;
static pid_t labd_pid;  /* our parent, the one process whose SIGTERM stops us */

/* Sent with kill(2), sigqueue or tgkill (si_code <= 0), not raised by the kernel. */
static int sent(const siginfo_t *info) { return info->si_code <= 0; }

static void on_alarm(int sig, siginfo_t *info, void *ctx) {
    (void)sig; (void)ctx;
    if (!sent(info)) timed_out = 1;  /* our timer's, not kill -ALRM's */
}
static void on_term(int sig, siginfo_t *info, void *ctx) {
    (void)sig; (void)ctx;
    if (!sent(info) || info->si_pid == labd_pid) stopped = 1;
}
/* A fault of our own (or our own abort) ends us as it would have; one sent by another
 * process is ignored. */
static void on_crash(int sig, siginfo_t *info, void *ctx) {
    (void)ctx;
    if (sent(info) && info->si_pid != getpid()) return;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void report_error(int fd, const char *stage, int err, const char *message) {
    dprintf(fd, "error %s %d %s\n", stage, err, message);
}

/* In the child: report why it could not become the program, through the error pipe. */
static void child_fail(int pipe_fd, const char *stage) {
    int err = errno;
    char buf[256];
    int n = snprintf(buf, sizeof buf, "%s %d %s", stage, err, strerror(err));
    if (n > 0 && write(pipe_fd, buf, (size_t)n) < 0) { /* nothing more to do */ }
    _exit(127);
}

static int parse_ints(char *text, long *out, int max) {
    int n = 0;
    for (char *part = strtok(text, ","); part && n < max; part = strtok(NULL, ",")) {
        char *end;
        out[n++] = strtol(part, &end, 10);
        if (*end) return -1;
    }
    return n;
}

/* Every live (not zombie) descendant of `root` into out[], from one pass over /proc.
 * Returns how many; a process forked during the pass is found by the next one. */
static int descendants(pid_t root, pid_t *out, int max) {
    static pid_t pids[MAX_PROCS], parents[MAX_PROCS];
    static char zombie[MAX_PROCS];
    int n = 0, found = 0;
    DIR *proc = opendir("/proc");
    if (!proc) return 0;
    struct dirent *entry;
    while ((entry = readdir(proc)) && n < MAX_PROCS) {
        if (!isdigit((unsigned char)entry->d_name[0])) continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", entry->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0) continue;
        buf[len] = 0;
        char *after = strrchr(buf, ')');  /* the name may hold spaces and parentheses */
        char state;
        int ppid;
        if (!after || sscanf(after + 1, " %c %d", &state, &ppid) != 2) continue;
        pids[n] = (pid_t)atoi(entry->d_name);
        parents[n] = (pid_t)ppid;
        zombie[n] = state == 'Z' || state == 'X';
        n++;
    }
    closedir(proc);
    /* The tree below root, breadth first: queue[] holds the parents still to look under. */
    static pid_t queue[MAX_PROCS];
    int head = 0, tail = 0;
    queue[tail++] = root;
    while (head < tail) {
        pid_t parent = queue[head++];
        for (int k = 0; k < n; k++) {
            if (parents[k] != parent || tail >= MAX_PROCS) continue;
            queue[tail++] = pids[k];
            if (!zombie[k] && found < max) out[found++] = pids[k];
        }
    }
    return found;
}

/* Reaps what has exited; returns whether any child is left. With none, nothing is below us
 * (every descendant's chain of parents leads here), and /proc need not be read. */
static int reap_zombies(void) {
    pid_t got;
    while ((got = waitpid(-1, NULL, WNOHANG)) > 0) {}
    return !(got < 0 && errno == ECHILD);
}

/* End everything below the launcher: SIGTERM, a grace, then SIGKILL until nothing is left.
 * Returns how many distinct processes were still running. */
static int end_strays(void) {
    static pid_t live[MAX_PROCS], seen[MAX_PROCS];
    int nseen = 0;
    pid_t self = getpid();
    struct timespec start, now, pause = {0, 10 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (!reap_zombies()) break;
        int n = descendants(self, live, MAX_PROCS);
        if (n == 0) break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed_ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        int sig = elapsed_ms < STRAY_GRACE_MS ? SIGTERM : SIGKILL;
        for (int k = 0; k < n; k++) {
            int known = 0;
            for (int j = 0; j < nseen && !known; j++) known = seen[j] == live[k];
            if (known && sig == SIGTERM) continue;  /* asked once; it has the grace */
            if (!known && nseen < MAX_PROCS) seen[nseen++] = live[k];
            kill(live[k], sig);
        }
        nanosleep(&pause, NULL);
    }
    reap_zombies();
    return nseen;
}

int main(int argc, char **argv) {
    int result_fd = -1, no_aslr = 0, drop = 0, ngroups = 0, ncpus = 0;
    long cpus[1024], groups_l[MAX_GROUPS], timeout_ms = 0;
    uid_t uid = 0; gid_t gid = 0; gid_t groups[MAX_GROUPS];
    const char *cwd = NULL;
    long nofile = 0;  /* the program's soft RLIMIT_NOFILE, when labd raised its own */
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--")) { i++; break; }
        if (!strcmp(argv[i], "--result-fd") && i + 1 < argc) result_fd = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-aslr")) no_aslr = 1;
        else if (!strcmp(argv[i], "--timeout-ms") && i + 1 < argc) timeout_ms = atol(argv[++i]);
        else if (!strcmp(argv[i], "--cwd") && i + 1 < argc) cwd = argv[++i];
        else if (!strcmp(argv[i], "--nofile") && i + 1 < argc) nofile = atol(argv[++i]);
        else if (!strcmp(argv[i], "--cpus") && i + 1 < argc) {
            ncpus = parse_ints(argv[++i], cpus, 1024);
            if (ncpus <= 0) { fprintf(stderr, "labd-launch: bad --cpus\n"); return 126; }
        } else if (!strcmp(argv[i], "--user") && i + 1 < argc) {
            char *spec = argv[++i], *rest;
            uid = (uid_t)strtoul(spec, &rest, 10);
            if (*rest != ':') { fprintf(stderr, "labd-launch: bad --user\n"); return 126; }
            gid = (gid_t)strtoul(rest + 1, &rest, 10);
            if (*rest == ':' && rest[1]) {
                ngroups = parse_ints(rest + 1, groups_l, MAX_GROUPS);
                if (ngroups < 0) { fprintf(stderr, "labd-launch: bad --user groups\n"); return 126; }
                for (int g = 0; g < ngroups; g++) groups[g] = (gid_t)groups_l[g];
            }
            drop = 1;
        } else { fprintf(stderr, "labd-launch: unknown option %s\n", argv[i]); return 126; }
    }
    if (result_fd < 0 || i >= argc) {
        fprintf(stderr, "usage: labd-launch --result-fd N [options] -- PROGRAM [ARG...]\n");
        return 126;
    }
    if (drop && uid == 0) {
        report_error(result_fd, "user", EPERM, "refusing to run the program as root");
        return 126;
    }
    /* Die with labd: a restarted labd must not find the last run's program still running. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* Orphans below us are reparented to us, not to init: we can find and end them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    pid_t launcher = getpid();

    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) < 0) {
        report_error(result_fd, "pipe", errno, strerror(errno));
        return 126;
    }
    labd_pid = getppid();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_flags = SA_SIGINFO;  /* no SA_RESTART: wait4 returns EINTR */
    sa.sa_sigaction = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    sa.sa_sigaction = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    int crashes[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGSYS};
    for (size_t c = 0; c < sizeof crashes / sizeof *crashes; c++) sigaction(crashes[c], &sa, NULL);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        report_error(result_fd, "fork", errno, strerror(errno));
        return 126;
    }
    if (pid == 0) {
        close(errpipe[0]);
        close(result_fd);
        signal(SIGALRM, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        setpgid(0, 0);  /* its own group: a time-out kills what it started too */
        if (ncpus > 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            for (int c = 0; c < ncpus; c++) CPU_SET((int)cpus[c], &set);
            if (sched_setaffinity(0, sizeof set, &set) < 0) child_fail(errpipe[1], "cpus");
        }
        if (no_aslr) {
            int current = personality(0xffffffff);
            if (current < 0 || personality((unsigned long)current | ADDR_NO_RANDOMIZE) < 0)
                child_fail(errpipe[1], "aslr");
        }
        if (drop) {
            if (setgroups((size_t)ngroups, groups) < 0) child_fail(errpipe[1], "user");
            if (setresgid(gid, gid, gid) < 0) child_fail(errpipe[1], "user");
            if (setresuid(uid, uid, uid) < 0) child_fail(errpipe[1], "user");
            /* Never as root: the drop must have taken and must not be undoable. */
            if (getuid() == 0 || geteuid() == 0 || setuid(0) == 0) {
                errno = EPERM;
                child_fail(errpipe[1], "user");
            }
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        }
        if (cwd && chdir(cwd) < 0) child_fail(errpipe[1], "cwd");
        struct rlimit files;
        if (nofile > 0 && getrlimit(RLIMIT_NOFILE, &files) == 0 && (rlim_t)nofile < files.rlim_cur) {
            files.rlim_cur = (rlim_t)nofile;
            if (setrlimit(RLIMIT_NOFILE, &files) < 0) child_fail(errpipe[1], "nofile");
        }
        /* After the drop: a change of credentials clears the parent-death signal. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != launcher) _exit(127);
        execvp(argv[i], argv + i);
        child_fail(errpipe[1], "exec");
    }
    close(errpipe[1]);
    if (timeout_ms > 0) {
        /* Then every 50 ms: a signal that lands just before wait4 blocks is not lost. */
        struct itimerval timer = {{0, 50000}, {timeout_ms / 1000, (timeout_ms % 1000) * 1000}};
        setitimer(ITIMER_REAL, &timer, NULL);
    }
    char failure[256];
    ssize_t n;
    do n = read(errpipe[0], failure, sizeof failure - 1); while (n < 0 && errno == EINTR);
    close(errpipe[0]);

    int status = 0;
    struct rusage usage;
    int killed = 0;
    for (;;) {
        if ((timed_out || stopped) && !killed) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            killed = 1;
        }
        pid_t got = wait4(pid, &status, 0, &usage);
        if (got == pid) break;
        if (got < 0 && errno != EINTR) {
            report_error(result_fd, "wait", errno, strerror(errno));
            return 126;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* The program is done: a time-out falling in the strays' grace is not its time-out. */
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    int program_timed_out = timed_out;
    /* After wait4: what the strays did is in none of the program's figures. */
    int strays = end_strays();
    if (n > 0) {  /* the child never became the program */
        failure[n] = 0;
        char stage[32] = "exec";
        int err = 0, used = 0;
        sscanf(failure, "%31s %d %n", stage, &err, &used);
        report_error(result_fd, stage, err, failure + used);
        return 126;
    }
    long long wall = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
    dprintf(result_fd, "ok %d %lld %lld %lld %ld %d %d\n", status, wall,
            (long long)usage.ru_utime.tv_sec * 1000000 + usage.ru_utime.tv_usec,
            (long long)usage.ru_stime.tv_sec * 1000000 + usage.ru_stime.tv_usec,
            usage.ru_maxrss, program_timed_out ? 1 : 0, strays);
    return 0;
}
