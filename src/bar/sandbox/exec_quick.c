/* The exec check's listener, compiled (bar.sandbox.exec_quick, docs/policy.md).

   bar's thread hands this loop the listening descriptor of a step's seccomp filter. It
   takes each execve the step makes and answers, without going back to Python, the two
   kinds of call that are most of a build's and a script's:

   - a call that names no program (a search along PATH tries each directory in turn):
     it fails with ENOENT, as the kernel would fail it and as bar's Python listener does;
   - a program whose judgment is known without judging it: a regular file (not a
     script) in the system's directories, under a name the shell analysis treats as
     plain words (asked of Python once per name), run from inside the worktree or a
     temporary directory, whose words hold no `$`, backquote, control character or
     byte beyond ASCII, and whose words, written as the rules read them (quoted, the
     places' paths in the rules' words), contain none of the strings every rule needs
     to match (its literals): no rule can match it, so it runs.

   Everything else, and anything this loop cannot read or is unsure of, goes to the
   Python judge (`judge`), whose answer is sent as it gives it. The loop ends when the
   listener hangs up (no process of the step is left) or `wake` becomes readable. */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437 /* (the same on every architecture: Linux 5.6) */
#endif

#if defined(__x86_64__)
#define NR_EXECVE 59
#elif defined(__aarch64__)
#define NR_EXECVE 221
#else
#define NR_EXECVE -1
#endif

#define MAX_WORDS 4096          /* more arguments than this: the judge reads them */
#define MAX_BYTES (64 * 1024)   /* more bytes than this in the words: the judge reads them */
#define NAMES 512               /* program names remembered as plain or not */
#define NAME_MAX_LEN 128

struct bar_quick {
    int enabled;                 /* 0: every found program goes to the judge */
    const char *const *exact;    /* literals, compared as they are */
    int n_exact;
    const char *const *folded;   /* literals of rules matched without regard to case (ASCII) */
    int n_folded;
    const char *const *prefixes; /* the places' paths, longest first ... */
    const char *const *said;     /* ... and how the rules write them */
    int n_places;
    const char *const *roots;    /* where a program may run from: the innermost wins ... */
    const int *safe;             /* ... and whether it is the worktree or a temporary one */
    int n_roots;
    const char *const *system;   /* the system's directories ("/usr/" ...) */
    int n_system;
    const char *const *hidden;   /* what the step may not read: the judge answers */
    int n_hidden;
};

typedef int (*judge_fn)(uint64_t id, uint32_t pid, int32_t nr, const __u64 *args);
typedef int (*plain_fn)(const char *name);

/* counts[0]: answered here, let run; counts[1]: answered here, no program; counts[2]: judged */
enum { QUICK_RUN, QUICK_MISSING, JUDGED };

struct names {
    char name[NAMES][NAME_MAX_LEN];
    signed char plain[NAMES];
    int used;
};

struct buf {
    char *data;
    size_t len, cap;
};

static int put(struct buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown)
            return -1;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

/* the NUL-ended string at `at` in the process's memory, into `out` (at most `room`
   bytes with its NUL); its length, or -1 when unread, cut or too long */
static long read_string(int mem, uint64_t at, char *out, size_t room) {
    size_t got = 0;
    while (got < room) {
        uint64_t here = at + got;
        size_t page = 4096 - (size_t)(here % 4096);
        size_t want = page < room - got ? page : room - got;
        ssize_t n = pread(mem, out + got, want, (off_t)here);
        if (n <= 0)
            return -1;
        char *end = memchr(out + got, 0, (size_t)n);
        if (end)
            return (long)(end - out);
        got += (size_t)n;
        if ((size_t)n < want)
            return -1;
    }
    return -1;
}

static int starts(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int under(const char *path, const char *root) {
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    return strncmp(path, root, n) == 0 && (path[n] == 0 || path[n] == '/');
}

/* the words of a plain command hold nothing the analysis reads further into: no
   substitution (`$`, a backquote, `<(`, `>(`: quoting reads into those), no control
   character and no byte beyond ASCII (the rules' blanks and case are ASCII's then) */
static int plain_word(const char *w) {
    for (const unsigned char *c = (const unsigned char *)w; *c; c++) {
        if (*c < 0x20 || *c >= 0x7f || *c == '$' || *c == '`')
            return 0;
        if (*c == '(' && c > (const unsigned char *)w && (c[-1] == '<' || c[-1] == '>'))
            return 0;
    }
    return 1;
}

/* a word as the rules read it (bar.shell.quoting.quote): bare, or in single quotes */
static int quoted(struct buf *b, const char *w) {
    if (!*w)
        return put(b, "''", 2);
    if (!strchr(w, ' '))
        return put(b, w, strlen(w));
    if (put(b, "'", 1))
        return -1;
    for (const char *c = w; *c; c++)
        if (*c == '\'' ? put(b, "'\\''", 4) : put(b, c, 1))
            return -1;
    return put(b, "'", 1);
}

/* the places' paths written in the rules' words (bar.policy.places.Places.text): a
   path of a place starts the text or follows a blank, a quote, `=`, `@` or `:`, and ends
   it or is followed by `/`, a blank or a quote; the first (longest) that fits wins */
static int placed(struct buf *out, const char *text, const struct bar_quick *q) {
    size_t n = strlen(text);
    size_t i = 0;
    while (i < n) {
        int before = i == 0 || strchr(" '\"=@:", text[i - 1]) != NULL;
        int done = 0;
        if (before) {
            for (int k = 0; k < q->n_places; k++) {
                size_t len = strlen(q->prefixes[k]);
                if (len && strncmp(text + i, q->prefixes[k], len) == 0) {
                    char after = text[i + len];
                    if (after == 0 || after == '/' || after == ' ' || after == '\'' || after == '"') {
                        if (put(out, q->said[k], strlen(q->said[k])))
                            return -1;
                        i += len;
                        done = 1;
                        break;
                    }
                }
            }
        }
        if (!done) {
            if (put(out, text + i, 1))
                return -1;
            i++;
        }
    }
    return 0;
}

static int has_folded(const char *text, const char *literal) {
    size_t n = strlen(literal);
    for (const char *t = text; *t; t++)
        if (strncasecmp(t, literal, n) == 0)
            return 1;
    return 0;
}

/* whether some rule could match the program `name` run with `words`: its text holds a
   literal of some rule (or cannot be written) */
static int concerned(const char *name, char **words, int count, const struct bar_quick *q) {
    struct buf text = {0}, seen = {0};
    int found = 1;
    if (quoted(&text, name))
        goto done;
    for (int k = 1; k < count; k++)
        if (put(&text, " ", 1) || quoted(&text, words[k]))
            goto done;
    if (placed(&seen, text.data, q))
        goto done;
    found = 0;
    for (int k = 0; k < q->n_exact && !found; k++)
        found = strstr(seen.data, q->exact[k]) != NULL;
    for (int k = 0; k < q->n_folded && !found; k++)
        found = has_folded(seen.data, q->folded[k]);
done:
    free(text.data);
    free(seen.data);
    return found;
}

/* for the tests: whether words of a program called `name` (its base name; `words[0]`
   is not read) let it run unjudged, `name` being a plain program (1), or not (0) */
int bar_exec_unjudged(const char *name, char **words, int count, const struct bar_quick *q) {
    if (!plain_word(name))
        return 0;
    for (int k = 1; k < count; k++)
        if (!plain_word(words[k]))
            return 0;
    return !concerned(name, words, count, q);
}

static int is_plain(struct names *known, const char *name, plain_fn plain) {
    if (strlen(name) >= NAME_MAX_LEN)
        return 0;
    for (int k = 0; k < known->used; k++)
        if (strcmp(known->name[k], name) == 0)
            return known->plain[k];
    int answer = plain(name) == 1;
    if (known->used < NAMES) {
        strcpy(known->name[known->used], name);
        known->plain[known->used++] = (signed char)answer;
    }
    return answer;
}

/* where a program runs from lets its relative words stand (Places._inside): the
   innermost of the roots that hold `cwd` is the worktree or a temporary directory */
static int inside(const char *cwd, const struct bar_quick *q) {
    size_t best = 0;
    int safe = 0, any = 0;
    for (int k = 0; k < q->n_roots; k++) {
        size_t len = strlen(q->roots[k]);
        if (under(cwd, q->roots[k]) && (!any || len > best)) {
            best = len;
            safe = q->safe[k];
            any = 1;
        }
    }
    return any && safe;
}

#define FORWARD (-1000)

/* what this loop answers for call `n`: 0 run, ENOENT no program, FORWARD the judge */
static int quick(int listener, const struct seccomp_notif *n, const struct bar_quick *q,
                 struct names *known, plain_fn plain, uint64_t *counts) {
    if (n->data.nr != NR_EXECVE || !n->data.args[0])
        return FORWARD;
    char procfs[64], path[PATH_MAX], probe[PATH_MAX + 64], real[PATH_MAX], cwd[PATH_MAX];
    snprintf(procfs, sizeof procfs, "/proc/%u/mem", n->pid);
    int mem = open(procfs, O_RDONLY | O_CLOEXEC);
    if (mem < 0)
        return FORWARD;
    int answer = FORWARD;
    char **words = NULL;
    char *strings = NULL;
    int fd = -1;
    if (read_string(mem, n->data.args[0], path, sizeof path) <= 0)
        goto done;
    /* a process's own files by name (/proc/self, /dev/stdin, /dev/fd/N): the judge
       reads them as the process's */
    if (starts(path, "/proc/") || starts(path, "/dev/"))
        goto done;
    /* the program as the process reaches it: from its root or its directory, links
       followed as for it (never through a link that would be bar's own) */
    snprintf(probe, sizeof probe, path[0] == '/' ? "/proc/%u/root" : "/proc/%u/cwd", n->pid);
    int base = open(probe, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (base < 0)
        goto done;
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_NO_MAGICLINKS | (path[0] == '/' ? RESOLVE_IN_ROOT : 0);
    /* EAGAIN: a rename or a mount anywhere on the machine while a ".." (a link's "../x"
       too) was walked under RESOLVE_IN_ROOT; openat2(2) asks for a retry */
    int failed = 0;
    for (int tries = 0; tries < 100; tries++) {
        fd = (int)syscall(SYS_openat2, base, path, &how, sizeof how);
        failed = errno;
        if (fd >= 0 || failed != EAGAIN)
            break;
    }
    close(base);
    if (fd < 0) {
        if (failed == ENOENT || failed == ENOTDIR) {
            answer = ENOENT;
            counts[QUICK_MISSING]++;
        }
        goto done;
    }
    if (!q->enabled)
        goto done;
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    ssize_t rn = readlink(self, real, sizeof real - 1);
    if (rn <= 0)
        goto done;
    real[rn] = 0;
    struct stat info;
    if (fstat(fd, &info) || !S_ISREG(info.st_mode))
        goto done;
    for (int k = 0; k < q->n_hidden; k++)
        if (under(real, q->hidden[k]))
            goto done;
    int system = 0;
    for (int k = 0; k < q->n_system && !system; k++)
        system = starts(real, q->system[k]);
    if (!system)
        goto done;
    int head = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (head < 0)
        goto done;
    char two[2] = {0, 0};
    ssize_t hn = pread(head, two, 2, 0);
    close(head);
    if (hn < 0 || (hn == 2 && two[0] == '#' && two[1] == '!'))
        goto done;
    snprintf(procfs, sizeof procfs, "/proc/%u/cwd", n->pid);
    ssize_t cn = readlink(procfs, cwd, sizeof cwd - 1);
    if (cn <= 0)
        goto done;
    cwd[cn] = 0;
    if (!inside(cwd, q))
        goto done;
    /* the words, read whole (or left to the judge) */
    uint64_t pointers[64];
    int count = 0;
    size_t used = 0;
    words = calloc(MAX_WORDS + 1, sizeof *words);
    strings = malloc(MAX_BYTES);
    if (!words || !strings)
        goto done;
    for (;;) {
        ssize_t got = pread(mem, pointers, sizeof pointers, (off_t)(n->data.args[1] + 8u * (unsigned)count));
        if (got < 8)
            goto done;
        int ended = 0;
        for (int k = 0; k < got / 8; k++) {
            if (!pointers[k]) {
                ended = 1;
                break;
            }
            if (count >= MAX_WORDS || used >= MAX_BYTES)
                goto done;
            long len = read_string(mem, pointers[k], strings + used, MAX_BYTES - used);
            if (len < 0)
                goto done;
            words[count++] = strings + used;
            used += (size_t)len + 1;
        }
        if (ended)
            break;
    }
    if (!plain_word(path) || strchr(path, '=') || path[strlen(path) - 1] == '/')
        goto done;
    for (int k = 1; k < count; k++)
        if (!plain_word(words[k]))
            goto done;
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const char *real_name = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    if (!plain_word(real_name))
        goto done; /* (quoted as the judge quotes it only then) */
    /* the name it is called by can choose what it does (git-reset): the judge reads it */
    if (count > 0) {
        const char *called = strrchr(words[0], '/') ? strrchr(words[0], '/') + 1 : words[0];
        if (strcmp(called, name) != 0 && strcmp(called, real_name) != 0)
            goto done;
    }
    if (!is_plain(known, name, plain) || !is_plain(known, real_name, plain))
        goto done;
    if (concerned(name, words, count, q) || concerned(real_name, words, count, q))
        goto done;
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &n->id))
        goto done; /* (another process now: the judge reads again) */
    answer = 0;
    counts[QUICK_RUN]++;
done:
    if (fd >= 0)
        close(fd);
    close(mem);
    free(words);
    free(strings);
    return answer;
}

int bar_exec_serve(int listener, int wake, const struct bar_quick *q, judge_fn judge,
                   plain_fn plain, uint64_t *counts) {
    struct names *known = calloc(1, sizeof *known);
    if (!known)
        return -1;
    struct pollfd fds[2] = {{listener, POLLIN, 0}, {wake, POLLIN, 0}};
    for (;;) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[1].revents)
            break;
        if (fds[0].revents & POLLIN) {
            struct seccomp_notif n;
            memset(&n, 0, sizeof n);
            if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &n))
                continue; /* (the asking process died before its call was read) */
            int error = quick(listener, &n, q, known, plain, counts);
            if (error == FORWARD) {
                counts[JUDGED]++;
                error = judge(n.id, n.pid, n.data.nr, n.data.args);
            }
            struct seccomp_notif_resp r;
            memset(&r, 0, sizeof r);
            r.id = n.id;
            if (error)
                r.error = -error;
            else
                r.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
            ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &r); /* (ENOENT: it died meanwhile) */
        } else if (fds[0].revents & (POLLHUP | POLLERR | POLLNVAL)) {
            break;
        }
    }
    free(known);
    return 0;
}
