//! Running under a supervisor or as a daemon (docs/operations.md):
//! `daemonize yes` (a double fork whose first parent waits for the
//! server to be listening and exits with its outcome), `supervised
//! systemd`/`auto` (`READY=1` and `STATUS=` datagrams to
//! `$NOTIFY_SOCKET`, abstract-namespace `@…` names included),
//! `supervised upstart` (SIGSTOP once started), and the pid file.

use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::log::{self, Level};
use crate::config::ops::Supervised;
use crate::config::Config;

/// True once systemd supervision is in force (`sd_notify` messages go out).
static SYSTEMD: AtomicBool = AtomicBool::new(false);
/// The write end of the pipe the daemon's first parent waits on.
static DAEMON_PIPE: Mutex<Option<std::fs::File>> = Mutex::new(None);

/// Redis's `daemonize`, made to report: forks twice (the server runs in
/// a grandchild without a controlling terminal, in a session of its own,
/// standard input and output on /dev/null) while the first process waits
/// on a pipe. That process exits 0 once [`daemon_ready`] is called, or 1
/// after printing what [`daemon_failed`] sent (or a note when the server
/// died without a word). Returns in the server process only. Must run
/// before any thread starts: fork keeps only the calling thread.
pub fn daemonize() -> Result<(), String> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe(2) fills the two-element array passed.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(format!(
            "can't create the daemon's pipe: {}",
            std::io::Error::last_os_error()
        ));
    }
    let (read_fd, write_fd) = (fds[0], fds[1]);
    // SAFETY: fork in a process with one thread (checked by the caller's
    // contract); the child continues with copies of everything.
    match unsafe { libc::fork() } {
        -1 => return Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => {}
        _ => {
            // SAFETY: we own both descriptors; the read end becomes a File.
            unsafe { libc::close(write_fd) };
            let mut pipe = unsafe { std::fs::File::from_raw_fd(read_fd) };
            let mut report = Vec::new();
            let _ = pipe.read_to_end(&mut report);
            if report.first() == Some(&b'+') {
                std::process::exit(0);
            }
            let text = String::from_utf8_lossy(report.get(1..).unwrap_or_default());
            if text.is_empty() {
                eprintln!(
                    "hozon-server: the daemonized server exited before it was ready (see its log)"
                );
            } else {
                eprintln!("{text}");
            }
            std::process::exit(1);
        }
    }
    // SAFETY: the child closes the read end it does not use, starts a
    // session, and forks again so it can never reacquire a terminal.
    unsafe {
        libc::close(read_fd);
        libc::setsid();
        match libc::fork() {
            -1 => {
                let mut pipe = std::fs::File::from_raw_fd(write_fd);
                let _ = write!(pipe, "-fork: {}", std::io::Error::last_os_error());
                libc::_exit(1);
            }
            0 => {}
            _ => libc::_exit(0),
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::dup2(null, 2);
            if null > 2 {
                libc::close(null);
            }
        }
        libc::fcntl(write_fd, libc::F_SETFD, libc::FD_CLOEXEC);
        *DAEMON_PIPE.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(std::fs::File::from_raw_fd(write_fd));
    }
    Ok(())
}

/// Tells the waiting first parent of `daemonize` that the server is
/// listening: it exits 0. A no-op when not daemonized.
pub fn daemon_ready() {
    if let Some(mut pipe) = DAEMON_PIPE.lock().unwrap_or_else(|p| p.into_inner()).take() {
        let _ = pipe.write_all(b"+");
    }
}

/// Sends `message` to the waiting first parent of `daemonize`, which
/// prints it on its standard error and exits 1. A no-op when not
/// daemonized (or once ready).
pub fn daemon_failed(message: &str) {
    if let Some(mut pipe) = DAEMON_PIPE.lock().unwrap_or_else(|p| p.into_inner()).take() {
        let _ = pipe.write_all(format!("-{message}").as_bytes());
    }
}

/// Redis's `redisIsSupervised`: resolves `auto` from the environment,
/// stops for upstart, checks `$NOTIFY_SOCKET` for systemd. The mode in
/// force when the server is supervised (then `daemonize` does not apply,
/// and CONFIG GET and INFO show the mode, as in Redis).
pub fn start_supervision(config: &Config) -> Option<Supervised> {
    let mut mode = config.ops.supervised;
    if mode == Supervised::Auto {
        if std::env::var_os("UPSTART_JOB").is_some() {
            log::log(Level::Verbose, "Upstart supervision detected.");
            mode = Supervised::Upstart;
        } else if std::env::var_os("NOTIFY_SOCKET").is_some() {
            log::log(Level::Verbose, "Systemd supervision detected.");
            mode = Supervised::Systemd;
        }
    }
    match mode {
        Supervised::Upstart => {
            if std::env::var_os("UPSTART_JOB").is_none() {
                log::log(
                    Level::Warning,
                    "upstart supervision requested, but UPSTART_JOB not found!",
                );
                return None;
            }
            log::log(
                Level::Notice,
                "supervised by upstart, will stop to signal readiness.",
            );
            // SAFETY: raise(2) with a constant signal.
            unsafe { libc::raise(libc::SIGSTOP) };
            std::env::remove_var("UPSTART_JOB");
            Some(mode)
        }
        Supervised::Systemd => {
            if std::env::var_os("NOTIFY_SOCKET").is_none() {
                log::log(
                    Level::Warning,
                    "systemd supervision requested or auto-detected, but no socket found!",
                );
                return None;
            }
            log::log(
                Level::Notice,
                "Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit.",
            );
            SYSTEMD.store(true, Ordering::SeqCst);
            notify("STATUS=hozon is loading...\n");
            Some(mode)
        }
        Supervised::Auto | Supervised::No => None,
    }
}

/// Sends `message` (`READY=1\n`, `STATUS=…\n`) to systemd's notification
/// socket when supervised by systemd. The socket is `$NOTIFY_SOCKET`: a
/// path, or with a leading `@` a name in the abstract namespace. Failures
/// are logged, never fatal.
pub fn notify(message: &str) {
    if !SYSTEMD.load(Ordering::SeqCst) {
        return;
    }
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        log::log(
            Level::Warning,
            "systemd supervision error: NOTIFY_SOCKET not found!",
        );
        return;
    };
    if let Err(e) = send_notification(&target.to_string_lossy(), message) {
        log::log(
            Level::Warning,
            &format!("systemd supervision error: sd_notify: {e}"),
        );
    }
}

/// One datagram to the socket named `target` (`@name`: abstract).
pub fn send_notification(target: &str, message: &str) -> std::io::Result<usize> {
    let socket = UnixDatagram::unbound()?;
    match target.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
            socket.send_to_addr(message.as_bytes(), &addr)
        }
        None => socket.send_to(message.as_bytes(), target),
    }
}

/// The server is ready (its data loaded): systemd hears `STATUS=` and
/// `READY=1`, as from Redis.
pub fn notify_ready(replica: bool) {
    if replica {
        notify("STATUS=Ready to accept connections in read-only mode. Waiting for MASTER <-> REPLICA sync\n");
    } else {
        notify("STATUS=Ready to accept connections\n");
    }
    notify("READY=1\n");
}

/// Writes the process id to `path` (Redis's `createPidFile`: best effort,
/// a failure is logged).
pub fn write_pidfile(path: &str) {
    let written = std::fs::write(path, format!("{}\n", std::process::id()));
    if let Err(e) = written {
        log::log(
            Level::Warning,
            &format!(
                "Failed to write PID file: {}",
                crate::config::os_error_text(&e)
            ),
        );
    }
}

/// Removes the pid file at shutdown, with Redis's log line.
pub fn remove_pidfile(path: &str) {
    log::log(Level::Notice, "Removing the pid file.");
    let _ = std::fs::remove_file(path);
}

/// Redis's `disable-thp`: turns transparent huge pages off for this
/// process (prctl PR_SET_THP_DISABLE), where they would cost latency.
pub fn disable_thp() {
    // SAFETY: prctl with integer arguments only.
    let done = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if done != 0 {
        log::log(
            Level::Verbose,
            &format!(
                "Failed to disable transparent huge pages: {}",
                std::io::Error::last_os_error()
            ),
        );
    }
}
