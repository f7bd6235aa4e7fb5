/*
 * An LD_PRELOAD library that injects file-system faults into a running
 * hozon-server from outside the process (tests/persistence/outside_faults.rs
 * builds it with cc and starts the server with it).
 *
 * The control file named by HOZON_FAULT_CTL holds three numbers, "W F D":
 * how many of the next write(2) calls on the AOF, fsync/fdatasync calls on
 * the AOF, and fsync calls on a directory fail (writes with ENOSPC, fsyncs
 * with EIO). Each failure decrements its number in the file. The AOF is
 * any open file whose path ends with HOZON_FAULT_FILE ("/appendonly.aof"
 * by default); a renamed-over or unlinked AOF no longer matches. Every
 * injected failure is appended to HOZON_FAULT_LOG as one line.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);

static void resolve(void) {
    if (!real_write) real_write = dlsym(RTLD_NEXT, "write");
    if (!real_fsync) real_fsync = dlsym(RTLD_NEXT, "fsync");
    if (!real_fdatasync) real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
}

enum kind { AOF_WRITE = 0, AOF_SYNC = 1, DIR_SYNC = 2 };

static int is_aof(int fd) {
    const char *suffix = getenv("HOZON_FAULT_FILE");
    if (!suffix) suffix = "/appendonly.aof";
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    size_t len = strlen(suffix);
    return (size_t)n >= len && strcmp(path + n - len, suffix) == 0;
}

static int is_dir(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Takes one failure of `kind` from the control file; 1 when one was due. */
static int take(enum kind k, const char *what) {
    const char *ctl = getenv("HOZON_FAULT_CTL");
    if (!ctl) return 0;
    int due = 0;
    pthread_mutex_lock(&lock);
    /* The test rewrites the control file too (Setup::arm): both hold an
       exclusive flock on <ctl>.lock across their read-modify-write, so a
       count the test sets is never overwritten by a decrement of the
       count it replaced. */
    char lockpath[4096];
    snprintf(lockpath, sizeof lockpath, "%s.lock", ctl);
    int lockfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lockfd >= 0) flock(lockfd, LOCK_EX);
    FILE *f = fopen(ctl, "r");
    long counts[3] = {0, 0, 0};
    if (f) {
        if (fscanf(f, "%ld %ld %ld", &counts[0], &counts[1], &counts[2]) != 3)
            counts[0] = counts[1] = counts[2] = 0;
        fclose(f);
    }
    if (counts[k] > 0) {
        counts[k]--;
        due = 1;
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", ctl);
        f = fopen(tmp, "w");
        if (f) {
            fprintf(f, "%ld %ld %ld\n", counts[0], counts[1], counts[2]);
            fclose(f);
            rename(tmp, ctl);
        }
        const char *log = getenv("HOZON_FAULT_LOG");
        if (log && (f = fopen(log, "a"))) {
            fprintf(f, "%s\n", what);
            fclose(f);
        }
    }
    if (lockfd >= 0) close(lockfd); /* releases the flock */
    pthread_mutex_unlock(&lock);
    return due;
}

ssize_t write(int fd, const void *buf, size_t count) {
    resolve();
    if (is_aof(fd) && take(AOF_WRITE, "write ENOSPC")) {
        errno = ENOSPC;
        return -1;
    }
    return real_write(fd, buf, count);
}

static int sync_fault(int fd, const char *aof_what) {
    if (is_dir(fd)) return take(DIR_SYNC, "dirsync EIO");
    if (is_aof(fd)) return take(AOF_SYNC, aof_what);
    return 0;
}

int fsync(int fd) {
    resolve();
    if (sync_fault(fd, "fsync EIO")) {
        errno = EIO;
        return -1;
    }
    return real_fsync(fd);
}

int fdatasync(int fd) {
    resolve();
    if (sync_fault(fd, "fdatasync EIO")) {
        errno = EIO;
        return -1;
    }
    return real_fdatasync(fd);
}
