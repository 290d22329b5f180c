//@file full
// outfile.c - the one way to write a file (see outfile.h for the rules and why).
#define _XOPEN_SOURCE 700   // realpath, mkstemp, fchmod, fsync, sigaction
#include "outfile.h"
#include "tensor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// The command's inputs
// ---------------------------------------------------------------------------

struct input {
    char  path[512];          // as given, for messages
    dev_t dev, dir_dev[2];    // the file; the directory its name is in (as typed, and resolved)
    ino_t ino, dir_ino[2];
};

// Grown as needed: a --vocab DIR of 5000 files registers them all (a fixed
// 256 let `mkmodel --vocab DIR -o DIR/tokenizer_config.json` replace the
// file it read when that name came late in readdir's order).
static struct input * inputs     = NULL;
static int            n_inputs   = 0, cap_inputs = 0;
static bool           inputs_lost = false;   // one could not be remembered (out of memory): every output is refused

// The outputs already checked for this command: two flags may not name one
// file, nor a file inside a folder another flag writes into under a name that
// folder's writer uses (the second writer would replace the first one's file
// at its rename).
enum { MAX_OUTPUTS = 32 };

struct output {
    char  flag[64];
    dev_t dir_dev;            // the folder the file is in, or the output folder itself
    ino_t dir_ino;
    char  base[256];          // the file's name in that folder; "" for an output folder
};

static struct output outputs[MAX_OUTPUTS];
static int           n_outputs = 0;

void mg_outfile_clear_inputs(void) {
    n_inputs    = 0;
    inputs_lost = false;
    n_outputs = 0;
}

int mg_outfile_inputs_mark(void) {
    return n_inputs;
}

void mg_outfile_inputs_forget_since(int mark) {
    if (mark >= 0 && mark < n_inputs) n_inputs = mark;
}

// The directory part of path ("." for a bare name), into out.
static void dir_of(const char * path, char * out, size_t size) {
    const char * slash = strrchr(path, '/');
    if (slash == NULL) snprintf(out, size, ".");
    else if (slash == path) snprintf(out, size, "/");
    else snprintf(out, size, "%.*s", (int) (slash - path), path);
}

// A bounded copy (a longer path is cut: it only names a file in a message or the signal handler's list).
static void copy_cut(char * out, size_t size, const char * s) {
    size_t n = strlen(s);
    if (n >= size) n = size - 1;
    memcpy(out, s, n);
    out[n] = '\0';
}

static void stat_dir_of(const char * path, dev_t * dev, ino_t * ino) {
    char dir[PATH_MAX];
    struct stat st;
    dir_of(path, dir, sizeof(dir));
    *dev = 0, *ino = 0;
    if (stat(dir, &st) == 0) *dev = st.st_dev, *ino = st.st_ino;
}

static void add_file(const char * path, const struct stat * st) {
    if (n_inputs == cap_inputs) {
        const int      cap  = cap_inputs ? 2 * cap_inputs : 64;
        struct input * more = cap_inputs < INT_MAX / 2 ? realloc(inputs, (size_t) cap * sizeof(*more)) : NULL;
        if (more == NULL) {
            inputs_lost = true;
            return;
        }
        inputs = more, cap_inputs = cap;
    }
    struct input * in = &inputs[n_inputs++];
    copy_cut(in->path, sizeof(in->path), path);
    in->dev = st->st_dev, in->ino = st->st_ino;
    stat_dir_of(path, &in->dir_dev[0], &in->dir_ino[0]);
    char * real = realpath(path, NULL);
    stat_dir_of(real != NULL ? real : path, &in->dir_dev[1], &in->dir_ino[1]);
    free(real);
}

// A directory's regular files (the files a --vocab DIR is read from).
static void add_dir(const char * path) {
    DIR * d = opendir(path);
    if (d == NULL) return;
    for (struct dirent * e; (e = readdir(d)) != NULL;) {
        char        file[PATH_MAX];
        struct stat st;
        snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
        if (e->d_name[0] != '.' && stat(file, &st) == 0 && S_ISREG(st.st_mode)) add_file(file, &st);
    }
    closedir(d);
}

void mg_outfile_input(const char * path) {
    struct stat st;
    if (path == NULL || stat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) add_dir(path);
    else add_file(path, &st);
}

// The input that is the file st, or NULL. stdin counts when it is a file:
// `mg chat < notes.txt --trace-json notes.txt` must not empty it.
static const char * input_named(const struct stat * st) {
    for (int i = 0; i < n_inputs; i++) {
        if (inputs[i].dev == st->st_dev && inputs[i].ino == st->st_ino) return inputs[i].path;
    }
    struct stat in;
    if (fstat(0, &in) == 0 && S_ISREG(in.st_mode) && in.st_dev == st->st_dev && in.st_ino == st->st_ino) {
        return "standard input";
    }
    return NULL;
}

// The input whose name is in directory st, or NULL.
static const char * input_in_dir(const struct stat * st) {
    for (int i = 0; i < n_inputs; i++) {
        for (int k = 0; k < 2; k++) {
            if (inputs[i].dir_dev[k] == st->st_dev && inputs[i].dir_ino[k] == st->st_ino) return inputs[i].path;
        }
    }
    return NULL;
}

// ---------------------------------------------------------------------------
// Checks before the work
// ---------------------------------------------------------------------------

static const char * file_kind(mode_t mode) {
    return S_ISDIR(mode) ? "a directory" : S_ISCHR(mode) ? "a character device" : S_ISBLK(mode) ? "a block device"
         : S_ISFIFO(mode) ? "a fifo" : S_ISSOCK(mode) ? "a socket" : "not a regular file";
}

// "--flag PATH" or "PATH" for messages.
static void named(const char * flag, const char * path, char * out, size_t size) {
    snprintf(out, size, "%s%s%s", flag ? flag : "", flag ? " " : "", path);
}

// The directory a new file at path would be written in exists and is writable.
static bool dir_writable(const char * what, const char * path) {
    char        dir[PATH_MAX];
    struct stat st;
    dir_of(path, dir, sizeof(dir));
    if (stat(dir, &st) != 0) {
        mg_set_error("%s: cannot write there: directory %s does not exist", what, dir);
        return false;
    }
    if (!S_ISDIR(st.st_mode)) {
        mg_set_error("%s: cannot write there: %s is not a directory", what, dir);
        return false;
    }
    if (access(dir, W_OK) != 0) {
        mg_set_error("%s: cannot write there: directory %s: %s", what, dir, strerror(errno));
        return false;
    }
    return true;
}

// Does path lead, by its own name or through its symlinks, into /dev or
// /proc? /dev/stdout and /proc/self/fd/5 are links to whatever the shell
// opened there: renamed over, a file redirected into (">> journal.log")
// would lose everything it held.
static bool names_a_descriptor(const char * path) {
    char cur[PATH_MAX], link[PATH_MAX], dir[PATH_MAX];
    copy_cut(cur, sizeof(cur), path);
    for (int hop = 0; hop < 40; hop++) {   // the kernel's own limit on a chain of links
        dir_of(cur, dir, sizeof(dir));
        char * real = realpath(dir, NULL);
        const bool special = real != NULL && (strncmp(real, "/dev", 4) == 0 || strncmp(real, "/proc", 5) == 0) &&
                             (real[4] == '\0' || real[4] == '/' || real[5] == '\0' || real[5] == '/');
        free(real);
        if (special) return true;
        const ssize_t n = readlink(cur, link, sizeof(link) - 1);
        if (n < 0) return false;
        link[n] = '\0';
        if (link[0] == '/') {
            copy_cut(cur, sizeof(cur), link);
        } else {
            char joined[2 * PATH_MAX + 2];
            snprintf(joined, sizeof(joined), "%s/%s", dir, link);
            copy_cut(cur, sizeof(cur), joined);
        }
    }
    return false;
}

// Is st the file this command's standard input, output or error is (a
// redirect)? Its name, of the three; NULL if none.
static const char * standard_stream(const struct stat * st) {
    static const char * const names[] = {"standard input", "standard output", "standard error"};
    for (int fd = 0; fd < 3; fd++) {
        struct stat s;
        if (fstat(fd, &s) == 0 && S_ISREG(s.st_mode) && s.st_dev == st->st_dev && s.st_ino == st->st_ino) {
            return names[fd];
        }
    }
    return NULL;
}

// A name an output folder's writer uses: the tensor dumps' order.txt and
// NAME.npy, the drawings' NAME.dot, and the memory maps prompt-alloc.svg and
// decode-alloc.svg. A file of another name may share the folder
// (--memory-map DIR/memory-map.svg beside --svg DIR).
static bool folder_writes(const char * name) {
    const size_t n = strlen(name);
    return strcmp(name, "order.txt") == 0 || strcmp(name, "prompt-alloc.svg") == 0 ||
           strcmp(name, "decode-alloc.svg") == 0 ||
           (n > 4 && (strcmp(name + n - 4, ".dot") == 0 || strcmp(name + n - 4, ".npy") == 0));
}

// The output named here before, that would write the same file as this one
// (dir, base) or the folder it is in; its flag, or NULL. Then remembered.
static const char * output_taken(const char * flag, const char * path, bool is_dir) {
    struct stat st;
    dev_t       dev = 0;
    ino_t       ino = 0;
    const char * slash = strrchr(path, '/');
    const char * base  = is_dir ? "" : slash ? slash + 1 : path;
    if (is_dir) {
        if (stat(path, &st) == 0) dev = st.st_dev, ino = st.st_ino;
    } else {
        stat_dir_of(path, &dev, &ino);
    }
    for (int i = 0; i < n_outputs; i++) {
        const struct output * o = &outputs[i];
        if (o->dir_dev != dev || o->dir_ino != ino) continue;
        const char * in_folder = o->base[0] == '\0' ? base : base[0] == '\0' ? o->base : NULL;
        if (in_folder != NULL ? folder_writes(in_folder) : strcmp(o->base, base) == 0) return o->flag;
    }
    if (n_outputs < MAX_OUTPUTS) {
        struct output * o = &outputs[n_outputs++];
        copy_cut(o->flag, sizeof(o->flag), flag ? flag : "the output");
        copy_cut(o->base, sizeof(o->base), base);
        o->dir_dev = dev, o->dir_ino = ino;
    }
    return NULL;
}

char * mg_outfile_target(const char * flag, const char * path) {
    char what[PATH_MAX + 64];
    named(flag, path, what, sizeof(what));
    if (inputs_lost) {
        mg_set_error("%s: out of memory while remembering the inputs, so it cannot be checked against them", what);
        return NULL;
    }
    if (path[0] == '\0' || path[strlen(path) - 1] == '/') {   // the rename at the end would fail, after all the work
        mg_set_error("%s%s'%s' is not a file name", flag ? flag : "", flag ? " " : "", path);
        return NULL;
    }
    if (strcmp(path, "-") == 0) {   // many tools' "standard output": here it would quietly make a file named '-'
        mg_set_error("%s%s'-': outputs go to files, not to standard output (for a file named '-', give ./-)",
                     flag ? flag : "", flag ? " " : "");
        return NULL;
    }
    struct stat link = {0}, st;
    const bool  is_link = lstat(path, &link) == 0 && S_ISLNK(link.st_mode);
    if (stat(path, &st) != 0) {
        if (is_link) {
            mg_set_error("%s is a symlink to a missing file (%s); give the target's path instead", what, strerror(errno));
            return NULL;
        }
        if (errno != ENOENT && errno != ENOTDIR) {
            mg_set_error("%s: cannot write there: %s", what, strerror(errno));
            return NULL;
        }
        if (!dir_writable(what, path)) return NULL;
        return strdup(path);
    }
    const char * input = input_named(&st);
    if (input != NULL) {
        mg_set_error("%s is the same file as the input %s; writing it would destroy that input", what, input);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        mg_set_error("%s is %s; the output must be a regular file (or a new name)", what, file_kind(st.st_mode));
        return NULL;
    }
    if (names_a_descriptor(path)) {
        mg_set_error("%s is in /dev or /proc (a descriptor such as /dev/stdout); the output must be a file of its "
                     "own (for the terminal, leave the flag out)", what);
        return NULL;
    }
    const char * stream = standard_stream(&st);
    if (stream != NULL) {
        mg_set_error("%s is this command's %s (a redirect); writing it would replace what the command prints there",
                     what, stream);
        return NULL;
    }
    // A symlink is written through: the temporary file and the rename happen beside its target.
    char * target = is_link ? realpath(path, NULL) : strdup(path);
    if (target == NULL) {
        mg_set_error("%s: cannot resolve: %s", what, strerror(errno));
        return NULL;
    }
    if (!dir_writable(what, target)) {
        free(target);
        return NULL;
    }
    return target;
}

char * mg_outfile_check(const char * flag, const char * path) {
    char * target = mg_outfile_target(flag, path);
    if (target == NULL) return NULL;
    const char * taken = output_taken(flag, target, false);
    if (taken != NULL) {
        char what[PATH_MAX + 64];
        named(flag, path, what, sizeof(what));
        mg_set_error("%s is also written by %s (the same file, or a file in its folder): one would replace the other",
                     what, taken);
        free(target);
        return NULL;
    }
    return target;
}

bool mg_outfile_check_dir(const char * flag, const char * dir) {
    char what[PATH_MAX + 64];
    named(flag, dir, what, sizeof(what));
    if (inputs_lost) {
        mg_set_error("%s: out of memory while remembering the inputs, so it cannot be checked against them", what);
        return false;
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        mg_set_error("%s: %s", what, errno == ENOENT ? "no such directory" : strerror(errno));
        return false;
    }
    if (!S_ISDIR(st.st_mode)) {
        mg_set_error("%s is not a directory", what);
        return false;
    }
    if (access(dir, W_OK) != 0) {
        mg_set_error("%s: cannot write there: %s", what, strerror(errno));
        return false;
    }
    const char * input = input_in_dir(&st);
    if (input != NULL) {
        mg_set_error("%s holds the input %s, which a file written there could replace; give a directory of its own",
                     what, input);
        return false;
    }
    const char * taken = output_taken(flag, dir, true);
    if (taken != NULL) {
        mg_set_error("%s is also where %s writes: one would replace the other's files; give each its own place", what,
                     taken);
        return false;
    }
    return true;
}

bool mg_outfile_room(const char * flag, const char * path, uint64_t bytes) {
    char           dir[PATH_MAX];
    struct statvfs fs;
    dir_of(path, dir, sizeof(dir));
    if (statvfs(dir, &fs) != 0) return true;   // nothing known: the write itself will say
    const uint64_t free_bytes = (uint64_t) fs.f_bavail * (uint64_t) fs.f_frsize;
    if (bytes <= free_bytes) return true;
    mg_set_error("%s%s%s needs %llu bytes (%.1f MiB), and %s has %llu bytes (%.1f MiB) free", flag ? flag : "",
                 flag ? " " : "", path, (unsigned long long) bytes, (double) bytes / (1u << 20), dir,
                 (unsigned long long) free_bytes, (double) free_bytes / (1u << 20));
    return false;
}

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

// The temporary files open now, for the signal handler (fixed arrays: it may
// only call async-signal-safe functions, and unlink is one).
enum { MAX_OPEN = 16 };
static char                  open_tmp[MAX_OPEN][PATH_MAX];
static volatile sig_atomic_t open_used[MAX_OPEN];

static void track(const char * tmp, bool on) {
    for (int i = 0; i < MAX_OPEN; i++) {
        if (on && !open_used[i]) {
            copy_cut(open_tmp[i], sizeof(open_tmp[i]), tmp);
            open_used[i] = 1;
            return;
        }
        if (!on && open_used[i] && strcmp(open_tmp[i], tmp) == 0) {
            open_used[i] = 0;
            return;
        }
    }
}

static void remove_and_die(int sig) {
    for (int i = 0; i < MAX_OPEN; i++) {
        if (open_used[i]) unlink(open_tmp[i]);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

// Only for signals that would kill the process as it is: one the caller
// ignores (nohup, `trap '' XFSZ` to get EFBIG instead) stays ignored.
// Every signal whose default action ends the process and that another
// process or the terminal sends: SIGQUIT is Ctrl-\, SIGPIPE ends
// `mg run ... | head -1`, SIGXFSZ a write past `ulimit -f`, SIGALRM
// `timeout -s ALRM`. (A crash's SIGSEGV or SIGBUS is not caught: the state
// is unknown there, and the core dump matters more than a stray file.)
void mg_outfile_remove_on_signal(void) {
    const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ, SIGALRM, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++) {
        struct sigaction old;
        if (sigaction(signals[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL) continue;
        struct sigaction sa = {0};
        sa.sa_handler = remove_and_die;
        sigemptyset(&sa.sa_mask);
        sigaction(signals[i], &sa, NULL);
    }
}

// The mode a new file gets (0666 less the umask), as fopen would give it;
// mkstemp makes 0600. An existing target keeps its own mode.
static mode_t new_file_mode(const char * path) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return st.st_mode & 07777;
    const mode_t mask = umask(022);
    umask(mask);
    return 0666 & ~mask;
}

FILE * mg_outfile_open(struct mg_outfile * o, const char * path) {
    memset(o, 0, sizeof(*o));
    struct stat st;
    const char * input = lstat(path, &st) == 0 ? input_named(&st) : NULL;   // the name itself, not a link's target
    if (inputs_lost) input = "(an input not remembered: out of memory)";
    if (input != NULL) {
        mg_set_error("%s is the same file as the input %s; writing it would destroy that input", path, input);
        return NULL;
    }
    char         dir[PATH_MAX];
    const char * slash = strrchr(path, '/');
    dir_of(path, dir, sizeof(dir));
    const size_t n = strlen(dir) + strlen(path) + 16;
    o->tmp  = malloc(n);
    o->path = strdup(path);
    if (o->tmp == NULL || o->path == NULL) {
        mg_set_error("%s: out of memory", path);
        mg_outfile_abort(o);
        return NULL;
    }
    // The name in the folder is at most NAME_MAX bytes: ".NAME.XXXXXX" adds 8
    // to NAME, so a long NAME is cut in the temporary name (its own name is kept).
    const char * base    = slash ? slash + 1 : path;
    const int    base_at = (int) (strlen(base) < NAME_MAX - 8 ? strlen(base) : NAME_MAX - 8);
    snprintf(o->tmp, n, "%s/.%.*s.XXXXXX", dir, base_at, base);
    const int fd = mkstemp(o->tmp);   // O_CREAT | O_EXCL: a new file, never a planted one
    if (fd < 0) {
        mg_set_error("%s: cannot create a temporary file in %s: %s", path, dir, strerror(errno));
        free(o->tmp);
        o->tmp = NULL;
        mg_outfile_abort(o);
        return NULL;
    }
    track(o->tmp, true);
    if (fchmod(fd, new_file_mode(path)) != 0 || (o->f = fdopen(fd, "wb")) == NULL) {
        mg_set_error("%s: cannot open %s: %s", path, o->tmp, strerror(errno));
        close(fd);
        mg_outfile_abort(o);
        return NULL;
    }
    return o->f;
}

bool mg_outfile_commit(struct mg_outfile * o) {
    if (o->f == NULL) {
        mg_outfile_abort(o);
        return false;
    }
    int err = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) err = errno ? errno : EIO;
    // fsync before the rename, so the new name never points at unwritten bytes after a crash.
    if (err == 0 && fsync(fileno(o->f)) != 0) err = errno;
    if (fclose(o->f) != 0 && err == 0) err = errno ? errno : EIO;
    o->f = NULL;
    if (err != 0) {
        mg_set_error("%s: write failed: %s", o->path, strerror(err));
        mg_outfile_abort(o);
        return false;
    }
    if (rename(o->tmp, o->path) != 0) {
        mg_set_error("%s: cannot rename %s over it: %s", o->path, o->tmp, strerror(errno));
        mg_outfile_abort(o);
        return false;
    }
    track(o->tmp, false);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof(*o));
    return true;
}

void mg_outfile_abort(struct mg_outfile * o) {
    if (o->f != NULL) fclose(o->f);
    if (o->tmp != NULL) {
        unlink(o->tmp);
        track(o->tmp, false);
    }
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof(*o));
}
