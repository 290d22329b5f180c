//@file full
// outfile.h - the one way the engine and mg write a file.
//
//     mg_outfile_input("model.gguf");                  // what the command reads
//     char * target = mg_outfile_check("--trace-json", path);   // before any work
//     if (target == NULL) ...mg_last_error()...        // e.g. "--trace-json m.gguf is the input m.gguf"
//     struct mg_outfile o;
//     FILE * f = mg_outfile_open(&o, target);          // a new temporary file beside target
//     fprintf(f, ...);
//     if (!mg_outfile_commit(&o)) ...                  // flush, fsync, rename over target
//
// Why each rule:
//   - An output that is one of the command's inputs (the same device and
//     inode, however it is named: the same path, a relative one, a symlink, a
//     hard link) would destroy what the command is reading: a mapped model
//     truncated under a running graph crashes it (SIGBUS). Refused.
//   - The result goes to a temporary file DIR/.NAME.XXXXXX (mkstemp: O_EXCL,
//     NAME cut to NAME_MAX - 8 bytes there, so a long name still fits;
//     never an existing file or a symlink planted at its name) beside the
//     target DIR/NAME, is fsync'd, and is
//     renamed over the target only when complete: a run that fails, is killed
//     or fills the disk leaves the old file as it was, and no torn file.
//   - rename() replaces a name and never follows a symlink there: a link
//     planted inside an output directory (--dot, --svg, --dump-tensors) is
//     replaced, its target untouched. A file output named on the command line
//     that is a symlink is written through (its target replaced, the link
//     kept), as cp does: mg_outfile_check returns the target's path.
//   - An output under /dev or /proc (/dev/stdout, /proc/self/fd/5, or a
//     symlink to one) is a descriptor the shell opened, and the file this
//     command's stdin, stdout or stderr is redirected into is that stream's:
//     renamed over, ">> journal.log" would lose everything it held. Refused.
//   - Two outputs of one command may not be one file, nor a file that an
//     output folder's writer would also write (DIR/order.txt beside
//     --dump-tensors DIR): one would replace the other. Refused.
//   - "-" is refused: to many tools it means standard output, and here it
//     would make a file named '-' ("./-" names that file).
//   - Everything that can be checked before the work is (the output's
//     directory exists and is writable, the output is a regular file or a new
//     name), so a refused output costs nothing and destroys nothing.
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

// Remember path as an input of the command (by device and inode, and the
// directory its name is in). A path that does not exist is ignored (reading
// it will fail and say so). A directory input (mg mkmodel --vocab DIR)
// registers the files in it.
void mg_outfile_input(const char * path);
// Forget every input (a new command; the tests).
void mg_outfile_clear_inputs(void);
// For a library call that registers its own input for the length of the
// call (mg_model_quantize): the inputs remembered so far, and forgetting
// those registered since, so that calls do not pile up inputs in a process.
int  mg_outfile_inputs_mark(void);
void mg_outfile_inputs_forget_since(int mark);

// Checks the file output flag path (flag: "--trace-json", "-o"; NULL for a
// positional argument) before any work: not an input, a regular file or a
// new name, in a directory that exists and can be written. Returns the path
// to write (path, or a symlink's target; the caller frees), or NULL with
// mg_last_error() naming the flag, the path and why.
char * mg_outfile_check(const char * flag, const char * path);

// The same checks, without remembering path as one of the command's outputs:
// for a library call that writes one file (mg_model_quantize) and may be
// called again with the same path in one process.
char * mg_outfile_target(const char * flag, const char * path);

// Checks an output directory (--dot, --svg, --dump-tensors) before any work:
// it exists, is a directory, can be written, and holds none of the inputs
// (their names in it would be replaced). False with mg_last_error().
bool mg_outfile_check_dir(const char * flag, const char * dir);

// Whether the folder path (a checked output) will be written in has room
// for bytes more (statvfs's space for unprivileged users): a result of known
// size, checked before the work, so a run does not fill the disk (which
// other programs share) only to fail at the end. False with mg_last_error()
// naming the flag, the bytes and the free space.
bool mg_outfile_room(const char * flag, const char * path, uint64_t bytes);

struct mg_outfile {
    FILE * f;
    char * path;   // the target
    char * tmp;    // the temporary file beside it
};

// A temporary file beside path, open for writing; NULL with mg_last_error()
// when it cannot be made or path is an input. Nothing at path changes until
// mg_outfile_commit.
FILE * mg_outfile_open(struct mg_outfile * o, const char * path);

// Flush, fsync and close the temporary file, then rename it over the target.
// On any failure the temporary file is removed and mg_last_error() says why;
// the target is as it was. Either way o is closed.
bool mg_outfile_commit(struct mg_outfile * o);

// Close and remove the temporary file: the target stays as it was.
void mg_outfile_abort(struct mg_outfile * o);

// Remove the temporary files still open when SIGINT, SIGTERM, SIGHUP, SIGQUIT,
// SIGPIPE, SIGXFSZ, SIGALRM, SIGUSR1 or SIGUSR2 ends the process (then die of the signal as before); a signal
// the process ignores stays ignored. For programs, not libraries: mg's main
// calls it.
void mg_outfile_remove_on_signal(void);
