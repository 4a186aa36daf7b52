/* The `bar` command, compiled (bar.cli.launcher builds it; docs/performance.md).

   Python's start is most of what a served command costs (~15 ms of a `bar show` whose
   work takes a few) and all of what `bar hook` costs inside a step, before every shell
   command an agent runs. This program does the two things those commands do before
   bar's code is needed, and hands everything else to bar's Python (`BAR_SCRIPT`, run by
   `BAR_PYTHON`, with the same arguments, environment and descriptors):

   - a command the resident may serve (bar.changes.fast.resident): the same checks, the
     same request, byte for byte, as the Python client would send (the fields that
     depend on how Python would have set up its streams are worked out as Python 3.11
     does for the locales it can be sure of: a UTF-8 locale, or the C locale that
     Python coerces; any other locale goes to Python), then the signals passed on and
     the fork's exit code returned;
   - `bar hook AGENT [--socket PATH]` inside a step: the agent's event handed to the
     running `bar run` over its channel (bar.step.channel) and its reply printed. No
     `bar run` there: the event goes to Python on a memory file as its standard input,
     which judges it (bar.cli.commands.hook). A `bar run` that took the event and did not
     answer: Python blocks the call (`--unanswered`), without sending it twice.

   Whatever this program is unsure of, Python does: the answer is always Python's. */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <limits.h>
#include <locale.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#if !defined(BAR_PYTHON) || !defined(BAR_SCRIPT) || !defined(BAR_PACKAGE) ||                  \
    !defined(BAR_SOURCE) || !defined(BAR_SOURCE_ID)
#error "built by bar.cli.launcher, which names the paths it is built for"
#endif

extern char **environ;

#define MAGIC "bar-resident/2"
#define SOCKET_NAME "resident.sock"
#define IDLE_S 900
#define TIMEOUT_S 2
#define HOOK_TIMEOUT_S 60
#define HOOK_MAGIC "bar1"
#define SHORT_ENOUGH 100

static int arg_count;
static char **arg_values;

/* --- bar's Python: everything this program does not do itself ------------------------ */

static void python(void) __attribute__((noreturn));
static void python(void) {
    char **argv = calloc((size_t)arg_count + 3, sizeof *argv); /* (argc may be 0) */
    if (argv != NULL) {
        argv[0] = BAR_PYTHON;
        argv[1] = BAR_SCRIPT;
        for (int i = 1; i < arg_count; i++)
            argv[i + 1] = arg_values[i];
        execv(BAR_PYTHON, argv);
    }
    fprintf(stderr,
            "bar: cannot start bar's Python (%s: %s); this bar was built for an install "
            "that has moved: build it again with `python -m bar.cli.launcher`\n",
            BAR_PYTHON, strerror(errno));
    _exit(127);
}

/* --- a growing buffer ------------------------------------------------------------------ */

struct buffer {
    char *data;
    size_t size, room;
};

static void add(struct buffer *b, const void *data, size_t size) {
    if (b->size + size + 1 > b->room) {
        size_t room = b->room ? b->room : 4096;
        while (room < b->size + size + 1)
            room *= 2;
        char *grown = realloc(b->data, room);
        if (grown == NULL)
            python();
        b->data = grown;
        b->room = room;
    }
    memcpy(b->data + b->size, data, size);
    b->size += size;
    b->data[b->size] = '\0';
}

static void add_text(struct buffer *b, const char *text) { add(b, text, strlen(text)); }

static void add_field(struct buffer *b, const char *text) {
    if (b->size)
        add(b, "", 1); /* (the NUL between fields) */
    add_text(b, text);
}

static void add_number(struct buffer *b, long long n) {
    char text[32];
    snprintf(text, sizeof text, "%lld", n);
    add_field(b, text);
}

/* A whole number as Python's int() reads the plain ones (an optional sign, ASCII digits,
   nothing else), reduced as `& 0xFF` reduces it: 1 and *value, else 0. */
static int exit_number(const char *text, size_t length, int *value) {
    size_t i = length && (text[0] == '-' || text[0] == '+');
    if (i == length)
        return 0;
    unsigned mod = 0;
    for (size_t j = i; j < length; j++) {
        if (text[j] < '0' || text[j] > '9')
            return 0;
        mod = (mod * 10 + (unsigned)(text[j] - '0')) & 0xFF;
    }
    *value = (int)((text[0] == '-' ? 256 - mod : mod) & 0xFF);
    return 1;
}

/* plain ASCII digits, as many as there are (Python's bytes.isdigit) */
static int all_digits(const char *text, size_t length) {
    for (size_t j = 0; j < length; j++)
        if (text[j] < '0' || text[j] > '9')
            return 0;
    return length > 0;
}

/* all of `data` to `fd`; to a socket with `send`, where a peer gone is an error (EPIPE),
   never SIGPIPE (a hook killed by it is one an agent takes as a go-ahead) */
static int write_all(int fd, const char *data, size_t size) {
    struct stat st;
    int sock = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
    while (size) {
        ssize_t n = sock ? send(fd, data, size, MSG_NOSIGNAL) : write(fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        size -= (size_t)n;
    }
    return 0;
}

/* --- what `bar.cli.entry` does before anything else ------------------------------------ */

/* the standard descriptors the caller had closed (bit 1 << fd) */
static int closed_streams;

/* Descriptors 0, 1 and 2 open (on /dev/null where the caller closed them). */
static void standard_descriptors(void) {
    for (int fd = 0; fd < 3; fd++) {
        struct stat st;
        if (fstat(fd, &st) == 0)
            continue;
        closed_streams |= 1 << fd;
        int null = open("/dev/null", O_RDWR);
        if (null >= 0 && null != fd) {
            dup2(null, fd);
            close(null);
        }
    }
}

/* `BAR_DIE_WITH`: this process is sent SIGTERM when that parent dies (as
   bar.cli.entry.die_with_parent), and the variable leaves the environment. */
static void die_with_parent(void) {
    const char *wanted = getenv("BAR_DIE_WITH");
    if (wanted == NULL)
        return;
    int digits = *wanted != '\0';
    for (const char *c = wanted; *c; c++)
        digits &= *c >= '0' && *c <= '9';
    long parent = digits ? strtol(wanted, NULL, 10) : -1;
    unsetenv("BAR_DIE_WITH");
    if (parent < 0)
        return;
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        kill(getpid(), SIGTERM);
}

static int is_digits(const char *text) {
    if (text == NULL || *text == '\0')
        return 0;
    for (; *text; text++)
        if (*text < '0' || *text > '9')
            return 0;
    return 1;
}

static const char *env(const char *name) {
    const char *value = getenv(name);
    return value ? value : "";
}

/* Python's str.isspace, for the ASCII that an environment variable holds */
static int blank(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

/* `BAR_FAST` says off (bar.changes.fast.resident._speed_off) */
static int is_off(const char *value) {
    while (blank(*value))
        value++;
    size_t n = strlen(value);
    while (n && blank(value[n - 1]))
        n--;
    if (n > 5)
        return 0;
    char low[8];
    for (size_t i = 0; i < n; i++)
        low[i] = (char)((value[i] >= 'A' && value[i] <= 'Z') ? value[i] + 32 : value[i]);
    low[n] = '\0';
    return !strcmp(low, "0") || !strcmp(low, "false") || !strcmp(low, "no") ||
           !strcmp(low, "off");
}

/* --- may the resident serve this command line? (bar.changes.fast.resident.may_serve) --- */

static const char *const SERVED[] = {"run", "apply", "rollback", "undo", "redo", NULL};
static const char *const QUIET[] = {"status", "log",  "show", "diff",  "blame", "task",
                                    "init",   "doctor", "trash", "verify", NULL};
static const char *const HARMLESS_PYTHON[] = {"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED",
                                              NULL};

static int among(const char *word, const char *const *words) {
    for (; *words; words++)
        if (!strcmp(word, *words))
            return 1;
    return 0;
}

static int has_terminal(void) {
    int fd = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

/* an option that makes `bar run` with a terminal the caller's own: `--no-pty`, `--json`,
   or what argparse reads as one of them (an abbreviation) */
static int run_here(const char *option) {
    size_t n = strcspn(option, "=");
    return n > 2 && ((n <= 8 && !strncmp("--no-pty", option, n)) ||
                     (n <= 6 && !strncmp("--json", option, n)));
}

/* a value beyond ASCII: Python reads it as text (str.strip, str.isdigit know more
   spaces and digits than this program), so Python decides */
static int beyond_ascii(const char *value) {
    for (; value && *value; value++)
        if ((unsigned char)*value >= 0x80)
            return 1;
    return 0;
}

static int may_serve(void) {
    const char *command = arg_values[1];
    if (getenv("BAR_SERVE_TRIED") || beyond_ascii(getenv("BAR_FAST")) ||
        beyond_ascii(getenv("BAR_RESIDENT_IDLE")))
        python(); /* (Python takes the first out of the environment and asks nothing) */
    const char *idle = getenv("BAR_RESIDENT_IDLE");
    if (idle != NULL && is_digits(idle) && strtol(idle, NULL, 10) == 0)
        return 0;
    if (*env("BAR_STEP_ID"))
        return 0;
    if (among(command, QUIET)) {
        if (isatty(0) || isatty(1))
            return 0;
    } else if (!among(command, SERVED))
        return 0;
    if (is_off(env("BAR_FAST")))
        return 0;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "PYTHON", 6))
            continue;
        size_t n = strcspn(*e, "=");
        int harmless = 0;
        for (const char *const *h = HARMLESS_PYTHON; *h; h++)
            harmless |= strlen(*h) == n && !strncmp(*e, *h, n);
        if (!harmless)
            return 0;
    }
    if (!strcmp(command, "run") && has_terminal()) {
        if (!(isatty(0) && isatty(1)))
            return 0;
        for (int i = 2; i < arg_count && strcmp(arg_values[i], "--"); i++)
            if (run_here(arg_values[i]))
                return 0;
        pid_t group = tcgetpgrp(0);
        if (group < 0 || group != getpgrp())
            return 0;
    }
    return 1;
}

/* --- what Python's streams would be (the request's encoding fields) ------------------- */

struct streams {
    int utf8_mode;
    const char *coerced; /* the LC_CTYPE Python would set (PEP 538), or NULL */
    const char *errors[3];
};

/* How Python 3.11 would set up its streams here: 1, or 0 for a locale this program is
   not sure of (Python then starts, and works it out itself). */
static int python_streams(struct streams *s) {
    const char *found = setlocale(LC_CTYPE, "");
    if (found == NULL)
        found = setlocale(LC_CTYPE, NULL); /* (a locale not installed: still "C") */
    if (found == NULL)
        return 0;
    char name[128];
    snprintf(name, sizeof name, "%s", found); /* (the next setlocale may reuse its buffer) */
    s->coerced = NULL;
    if (!strcmp(name, "C") || !strcmp(name, "POSIX")) {
        /* the C locale: UTF-8 mode (PEP 540), and unless LC_ALL is set, LC_CTYPE set to
           the first of C.UTF-8, C.utf8 and UTF-8 that is installed (PEP 538) */
        if (*env("LC_ALL") == '\0' && !strcmp(name, "C")) {
            static const char *const targets[] = {"C.UTF-8", "C.utf8", "UTF-8", NULL};
            for (const char *const *t = targets; *t && s->coerced == NULL; t++) {
                if (setlocale(LC_CTYPE, *t) == NULL)
                    continue;
                const char *codeset = nl_langinfo(CODESET);
                if (codeset != NULL && *codeset != '\0')
                    s->coerced = *t;
            }
            if (s->coerced == NULL)
                return 0;
        }
        s->utf8_mode = 1;
        s->errors[0] = s->errors[1] = "surrogateescape";
    } else {
        const char *codeset = nl_langinfo(CODESET);
        if (codeset == NULL || strcmp(codeset, "UTF-8"))
            return 0;
        s->utf8_mode = 0;
        /* (a locale Python would coerce to keeps the C locale's errors) */
        int target = !strcmp(name, "C.UTF-8") || !strcmp(name, "C.utf8") || !strcmp(name, "UTF-8");
        s->errors[0] = s->errors[1] = target ? "surrogateescape" : "strict";
    }
    s->errors[2] = "backslashreplace";
    return 1;
}

/* --- the resident's socket (bar.changes.fast.resident.socket_path) -------------------- */

static char *joined(const char *folder, const char *name) {
    size_t n = strlen(folder);
    char *path = malloc(n + strlen(name) + 2);
    if (path == NULL)
        python();
    sprintf(path, "%s%s%s", folder, n && folder[n - 1] == '/' ? "" : "/", name);
    return path;
}

/* os.path.dirname */
static char *folder_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return strdup("");
    size_t n = (size_t)(slash - path) + 1;
    while (n > 1 && path[n - 1] == '/')
        n--;
    char *folder = strndup(path, n);
    if (folder == NULL)
        python();
    return folder;
}

static char *socket_path(void) {
    const char *shared = env("BAR_RESIDENT_SOCKET");
    if (*shared == '/') {
        char *folder = folder_of(shared);
        struct stat st;
        int usable = stat(folder, &st) == 0 && st.st_uid == getuid() && !(st.st_mode & 022);
        free(folder);
        if (usable)
            return strdup(shared);
    }
    const char *home = env("BAR_HOME");
    if (*home)
        return joined(home, SOCKET_NAME);
    const char *user = env("HOME");
    if (*user != '/') {
        struct passwd *pw = getpwuid(getuid());
        if (pw == NULL)
            python();
        user = pw->pw_dir;
    }
    char *bar = joined(user, ".bar");
    char *path = joined(bar, SOCKET_NAME);
    free(bar);
    return path;
}

/* a socket address for `path`, through /proc/self/fd where it is too long */
static int address(const char *path, struct sockaddr_un *to) {
    memset(to, 0, sizeof *to);
    to->sun_family = AF_UNIX;
    if (strlen(path) < SHORT_ENOUGH) {
        strcpy(to->sun_path, path);
        return 0;
    }
    const char *slash = strrchr(path, '/');
    char *folder = folder_of(path);
    int fd = open(folder, O_PATH | O_DIRECTORY | O_CLOEXEC);
    free(folder);
    if (fd < 0 || strlen(slash + 1) > 60)
        return -1;
    snprintf(to->sun_path, sizeof to->sun_path, "/proc/self/fd/%d/%s", fd, slash + 1);
    return 0; /* (the descriptor is left open: this process is short-lived) */
}

/* --- lines from the resident, and who sent the first ---------------------------------- */

struct lines {
    int sock;
    char held[512];
    size_t size;
    pid_t pid;
    uid_t uid;
    int said;
};

/* the next line (without its newline; "" at the end), or NULL on an error or timeout */
static const char *next_line(struct lines *l, char *line, size_t room) {
    for (;;) {
        char *end = memchr(l->held, '\n', l->size);
        if (end != NULL) {
            size_t n = (size_t)(end - l->held);
            if (n >= room)
                return NULL;
            memcpy(line, l->held, n);
            line[n] = '\0';
            memmove(l->held, end + 1, l->size - n - 1);
            l->size -= n + 1;
            return line;
        }
        if (l->size >= sizeof l->held - 1)
            return NULL;
        char control[CMSG_SPACE(sizeof(struct ucred))];
        struct iovec iov = {l->held + l->size, sizeof l->held - 1 - l->size};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = sizeof control};
        ssize_t n = recvmsg(l->sock, &msg, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return NULL;
        if (n == 0) {
            line[0] = '\0';
            return line;
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS && !l->said) {
                struct ucred cred;
                memcpy(&cred, CMSG_DATA(c), sizeof cred);
                l->pid = cred.pid;
                l->uid = cred.uid;
                l->said = 1;
            }
        }
        l->size += (size_t)n;
    }
}

/* the lines of /proc/PID/status that a resident must share with its caller */
static int shared_status(const char *pid, struct buffer *out) {
    char path[64], text[8192];
    snprintf(path, sizeof path, "/proc/%s/status", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    static const char *const keys[] = {"Uid:", "NoNewPrivs:", "Seccomp:", "Seccomp_filters:",
                                       NULL};
    for (char *line = text; line && *line;) {
        char *end = strchr(line, '\n');
        size_t size = end ? (size_t)(end - line) : strlen(line);
        for (const char *const *k = keys; *k; k++)
            if (!strncmp(line, *k, strlen(*k))) {
                add(out, line, size);
                add(out, "\n", 1);
            }
        line = end ? end + 1 : NULL;
    }
    return 0;
}

/* whether the process that answered could be this caller's resident
   (bar.changes.fast.resident._trusted): one that says hello and is not is warned of */
static int trusted(struct lines *l, const char *path) {
    char line[64];
    if (next_line(l, line, sizeof line) == NULL || strcmp(line, "hello"))
        return 0;
    int same = 0;
    char pid[24], where[64], theirs[128], mine[128];
    if (l->said && l->pid > 0 && l->uid == getuid()) {
        snprintf(pid, sizeof pid, "%d", (int)l->pid);
        snprintf(where, sizeof where, "/proc/%s/ns/pid", pid);
        ssize_t a = readlink(where, theirs, sizeof theirs - 1);
        ssize_t b = readlink("/proc/self/ns/pid", mine, sizeof mine - 1);
        struct buffer x = {0}, y = {0};
        same = a > 0 && a == b && !memcmp(theirs, mine, (size_t)a) &&
               shared_status(pid, &x) == 0 && shared_status("self", &y) == 0 &&
               x.size == y.size && !memcmp(x.data, y.data, x.size);
        free(x.data);
        free(y.data);
    }
    if (!same) {
        if (l->said)
            snprintf(pid, sizeof pid, "%d", (int)l->pid);
        else
            strcpy(pid, "?");
        fprintf(stderr,
                "bar: warning: the process listening on %s is not a resident of yours (pid "
                "%s: a confined step's, or another user's); not used\n",
                path, pid);
    }
    return same;
}

/* --- the request (bar.changes.fast.resident.request) ---------------------------------- */

static void signal_list(struct buffer *b, int ignored) {
    sigset_t blocked;
    sigprocmask(SIG_BLOCK, NULL, &blocked);
    char text[512] = "";
    size_t n = 0;
    for (int s = 1; s < NSIG; s++) {
        int listed;
        if (ignored) {
            struct sigaction now;
            /* Python ignores SIGPIPE and SIGXFSZ itself, and says so */
            listed = s == SIGPIPE || s == SIGXFSZ ||
                     (sigaction(s, NULL, &now) == 0 && now.sa_handler == SIG_IGN &&
                      !(now.sa_flags & SA_SIGINFO));
        } else
            listed = sigismember(&blocked, s) == 1;
        if (listed)
            n += (size_t)snprintf(text + n, sizeof text - n, n ? ",%d" : "%d", s);
    }
    add_field(b, text);
}

static int request(struct buffer *b, const struct streams *s) {
    mode_t mask = umask(022);
    umask(mask);
    add_field(b, MAGIC);
    add_field(b, BAR_PACKAGE);
    add_field(b, BAR_PYTHON);
    add_field(b, "utf-8");
    add_number(b, s->utf8_mode);
    add_number(b, mask);
    signal_list(b, 1);
    signal_list(b, 0);
    int unbuffered = *env("PYTHONUNBUFFERED") != '\0';
    for (int fd = 0; fd < 3; fd++) {
        char text[64];
        int line = !unbuffered && (fd == 2 || isatty(fd));
        if (closed_streams & (1 << fd)) /* (the stream bar.cli.entry makes for it) */
            snprintf(text, sizeof text, "utf-8:%s:0:0", fd ? "backslashreplace" : "strict");
        else
            snprintf(text, sizeof text, "utf-8:%s:%d:%d", s->errors[fd], line, unbuffered);
        add_field(b, text);
    }
    add_number(b, arg_count);
    const char *program = (const char *)getauxval(AT_EXECFN);
    add_field(b, program ? program : arg_values[0]);
    for (int i = 1; i < arg_count; i++)
        add_field(b, arg_values[i]);
    int coerced = 0;
    for (char **e = environ; *e; e++) {
        const char *sep = strchr(*e, '=');
        if (sep == NULL || sep == *e)
            return -1; /* (Python's environment would differ: it decides) */
        for (char **f = environ; f < e; f++)
            if (!strncmp(*f, *e, (size_t)(sep - *e) + 1))
                return -1;
        if (s->coerced && !strncmp(*e, "LC_CTYPE=", 9)) {
            add_field(b, "LC_CTYPE=");
            add_text(b, s->coerced);
            coerced = 1;
        } else
            add_field(b, *e);
    }
    if (s->coerced && !coerced) {
        add_field(b, "LC_CTYPE=");
        add_text(b, s->coerced);
    }
    return 0;
}

/* --- passing signals on to the fork, until it says how it ended ----------------------- */

static volatile pid_t fork_pid;

static void forward(int signum) {
    int saved = errno;
    if (killpg(fork_pid, signum) < 0 && errno == ESRCH &&
        (signum == SIGINT || signum == SIGTERM || signum == SIGHUP || signum == SIGQUIT)) {
        signal(signum, SIG_DFL); /* nothing left to pass it to: it is this process's */
        kill(getpid(), signum);
    }
    errno = saved;
}

static void stop(int signum) {
    int saved = errno;
    killpg(fork_pid, SIGSTOP); /* Ctrl-Z: the fork stops with this process */
    signal(SIGTSTP, SIG_DFL);
    kill(getpid(), SIGTSTP);
    struct sigaction again = {.sa_handler = stop, .sa_flags = SA_RESTART | SA_NODEFER};
    sigaction(SIGTSTP, &again, NULL);
    errno = saved;
    (void)signum;
}

static int ignored_here(int signum) {
    struct sigaction now;
    return sigaction(signum, NULL, &now) == 0 && now.sa_handler == SIG_IGN;
}

static void wait_for(struct lines *l, pid_t pid) __attribute__((noreturn));
static void wait_for(struct lines *l, pid_t pid) {
    static const int forwarded[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
                                    SIGWINCH, SIGCONT, SIGUSR1, SIGUSR2};
    fork_pid = pid;
    for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++) {
        if (ignored_here(forwarded[i]))
            continue; /* (ignored here, so it is in the fork) */
        struct sigaction pass = {.sa_handler = forward, .sa_flags = SA_RESTART};
        sigaction(forwarded[i], &pass, NULL);
    }
    if (!ignored_here(SIGTSTP)) {
        struct sigaction pause = {.sa_handler = stop, .sa_flags = SA_RESTART | SA_NODEFER};
        sigaction(SIGTSTP, &pause, NULL);
    }
    char said[64];
    const char *line = next_line(l, said, sizeof said);
    if (line == NULL)
        line = "";
    close(l->sock);
    int code;
    if (!strncmp(line, "exit ", 5) && exit_number(line + 5, strlen(line + 5), &code))
        _exit(code);
    int status = 0;
    int known = !strncmp(line, "ended ", 6) && all_digits(line + 6, strlen(line + 6)) &&
                strlen(line + 6) < 10;
    if (known) {
        status = (int)strtol(line + 6, NULL, 10);
        if (WIFSIGNALED(status)) {
            signal(WTERMSIG(status), SIG_DFL);
            kill(getpid(), WTERMSIG(status));
        }
    }
    fprintf(stderr,
            "bar: the process running this command (pid %d) ended without saying how; run "
            "`bar status` to see what was recorded\n",
            (int)pid);
    _exit(known && WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

/* --- served by the resident (bar.changes.fast.resident.serve) ------------------------- */

static void forget(const char *path, const struct stat *known) {
    struct stat now;
    if (known->st_ino && lstat(path, &now) == 0 && S_ISSOCK(now.st_mode) &&
        now.st_dev == known->st_dev && now.st_ino == known->st_ino)
        unlink(path); /* (a socket only: never a file someone named there) */
}

static void set_timeout(int sock, int seconds) {
    struct timeval t = {seconds, 0};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
}

static void serve(void) {
    struct streams streams;
    if (!may_serve() || !python_streams(&streams))
        return;
    char *path = socket_path();
    struct buffer body = {0};
    if (request(&body, &streams) < 0)
        return;
    char head[32];
    int head_size = snprintf(head, sizeof head, "%zu\n", body.size);
    struct stat known = {0};
    if (stat(path, &known) < 0)
        memset(&known, 0, sizeof known);
    struct sockaddr_un to;
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (sock < 0 || here < 0 || address(path, &to) < 0)
        return;
    int on = 1;
    setsockopt(sock, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
    set_timeout(sock, TIMEOUT_S);
    if (connect(sock, (struct sockaddr *)&to, sizeof to) < 0) {
        if (errno == ECONNREFUSED)
            forget(path, &known); /* its resident died (or never started) */
        close(sock);
        return;
    }
    /* asked: bar's Python, if it runs the command, does not ask again */
    setenv("BAR_SERVE_TRIED", "1", 1);
    struct lines lines = {.sock = sock};
    errno = 0;
    if (!trusted(&lines, path)) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            forget(path, &known); /* a resident that does not answer */
        close(sock);
        return;
    }
    /* the length line and the fields, the descriptors with their first part */
    struct buffer data = {0};
    add(&data, head, (size_t)head_size);
    add(&data, body.data, body.size);
    size_t first = data.size < 65536 ? data.size : 65536;
    int fds[4] = {here, 0, 1, 2};
    char control[CMSG_SPACE(sizeof fds)];
    memset(control, 0, sizeof control);
    struct iovec iov = {data.data, first};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                         .msg_controllen = sizeof control};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t sent;
    do
        sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (sent < 0 || write_all(sock, data.data + sent, data.size - (size_t)sent) < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            forget(path, &known);
        close(sock);
        return;
    }
    char said[64];
    errno = 0;
    const char *line = next_line(&lines, said, sizeof said);
    /* (a pid it can pass signals to: never 0 or 1, the caller's own group or init) */
    pid_t fork = line && !strncmp(line, "pid ", 4) && all_digits(line + 4, strlen(line + 4)) &&
                         strlen(line + 4) < 10
                     ? (pid_t)strtol(line + 4, NULL, 10)
                     : 0;
    if (fork <= 1) {
        if (line == NULL && (errno == EAGAIN || errno == EWOULDBLOCK))
            forget(path, &known);
        close(sock);
        return; /* refused: the reason is the resident's (`no ...`) */
    }
    if (send(sock, "go\n", 3, MSG_NOSIGNAL) != 3) {
        close(sock);
        return;
    }
    close(here);
    set_timeout(sock, 0); /* from here the command runs: as long as it takes */
    wait_for(&lines, fork);
}

/* --- `bar hook AGENT [--socket PATH]` inside a step (bar.cli.commands.hook) ----------- */

/* bar's Python answers the hook, the agent's event given back as its standard input */
static void hook_in_python(const char *data, size_t size, const char *unanswered) {
    int fd = memfd_create("bar-hook-event", 0);
    if (fd < 0 || write_all(fd, data, size) < 0 || lseek(fd, 0, SEEK_SET) < 0 ||
        dup2(fd, 0) < 0) {
        fprintf(stderr, "bar: cannot hand the agent's event on (%s)\n", strerror(errno));
        _exit(2);
    }
    if (fd != 0)
        close(fd);
    if (unanswered != NULL) {
        char *argv[] = {BAR_PYTHON, BAR_SCRIPT,  "hook", arg_values[2],
                        "--unanswered", (char *)unanswered, NULL};
        execv(BAR_PYTHON, argv);
        fprintf(stderr, "bar: cannot start bar's Python (%s)\n", strerror(errno));
        _exit(2);
    }
    python();
}

static void hook(void) {
    static const char *const agents[] = {"claude", "codex", "gemini", NULL};
    if (arg_count < 3 || !among(arg_values[2], agents))
        return;
    for (int i = 2; i < arg_count; i++)
        if (!strcmp(arg_values[i], "-h") || !strcmp(arg_values[i], "--help"))
            return;
    const char *path;
    if (arg_count == 5 && !strcmp(arg_values[3], "--socket"))
        path = arg_values[4];
    else if (arg_count == 3)
        path = env("BAR_SOCKET");
    else
        return;
    if (*path == '\0')
        return; /* no `bar run` to ask: Python judges it */
    struct buffer event = {0};
    add(&event, "", 0);
    for (;;) {
        char chunk[65536];
        ssize_t n = read(0, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && event.size == 0)
            return; /* (Python reads it again) */
        if (n < 0)
            hook_in_python(event.data, event.size, NULL);
        if (n == 0)
            break;
        add(&event, chunk, (size_t)n);
    }
    struct sockaddr_un to;
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0 || address(path, &to) < 0)
        hook_in_python(event.data, event.size, NULL);
    set_timeout(sock, HOOK_TIMEOUT_S);
    if (connect(sock, (struct sockaddr *)&to, sizeof to) < 0)
        hook_in_python(event.data, event.size, NULL); /* (none there; or its error) */
    struct buffer data = {0};
    add_text(&data, HOOK_MAGIC " hook ");
    add_text(&data, arg_values[2]);
    add(&data, "\n", 1);
    add(&data, event.data, event.size);
    char why[160] = "";
    if (write_all(sock, data.data, data.size) < 0 || shutdown(sock, SHUT_WR) < 0) {
        /* (as Python says an OSError) */
        snprintf(why, sizeof why, "bar run did not answer ([Errno %d] %s)", errno, strerror(errno));
        hook_in_python(event.data, event.size, why);
    }
    struct buffer reply = {0};
    add(&reply, "", 0);
    for (;;) {
        char chunk[65536];
        ssize_t n = recv(sock, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            if (e == EAGAIN || e == EWOULDBLOCK)
                snprintf(why, sizeof why, "bar run did not answer (timed out)");
            else
                snprintf(why, sizeof why, "bar run did not answer ([Errno %d] %s)", e, strerror(e));
            hook_in_python(event.data, event.size, why);
        }
        if (n == 0)
            break;
        add(&reply, chunk, (size_t)n);
    }
    close(sock);
    /* EXIT_CODE \n len(STDOUT) \n STDOUT STDERR (bar.step.channel.request's reading) */
    char *code = reply.data, *size = memchr(code, '\n', reply.size);
    char *rest = size ? memchr(size + 1, '\n', reply.size - (size_t)(size + 1 - code)) : NULL;
    int exit_code = 0;
    size_t out = 0, total = 0;
    int readable = rest != NULL;
    if (readable) {
        size_t code_length = (size_t)(size - code), size_length = (size_t)(rest - size - 1);
        total = reply.size - (size_t)(rest + 1 - reply.data);
        readable = code_length > 0 && exit_number(code, code_length, &exit_code) &&
                   code[0] != '+' && all_digits(size + 1, size_length);
        for (size_t j = 0; readable && j < size_length; j++) {
            out = out * 10 + (size_t)(size[1 + j] - '0');
            readable = out <= total;
        }
        rest++;
    }
    if (!readable) {
        snprintf(why, sizeof why,
                 "bar run did not answer (bar run answered something unreadable (%zu bytes))",
                 reply.size);
        hook_in_python(event.data, event.size, why);
    }
    write_all(1, rest, out);
    write_all(2, rest + out, total - out);
    _exit(exit_code);
}

/* Whether this program was built from the launcher.c that is there now: bar updated in
   place since (its protocols may have changed with it), it asks nothing itself. */
static int current(void) {
    struct stat st;
    char id[64];
    if (stat(BAR_SOURCE, &st) != 0)
        return 0;
    snprintf(id, sizeof id, "%lld:%lld", (long long)st.st_size,
             (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec);
    return !strcmp(id, BAR_SOURCE_ID);
}

int main(int argc, char **argv) {
    arg_count = argc;
    arg_values = argv;
    if (argc < 2 || !current())
        python();
    standard_descriptors();
    const char *home = getenv("BAR_HOME");
    if (home != NULL && *home && *home != '/')
        python(); /* (a relative bar home: Python makes it absolute, for every process) */
    die_with_parent();
    if (!strcmp(argv[1], "hook"))
        hook();
    else if (among(argv[1], SERVED) || among(argv[1], QUIET))
        serve();
    python();
}
