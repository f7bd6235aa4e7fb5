//! Log lines in Redis's format: `pid:role dd Mon yyyy hh:mm:ss.mmm <level> message`.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

/// Severity, shown as Redis's level characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// `.` debug
    Debug,
    /// `-` verbose
    Verbose,
    /// `*` notice
    Notice,
    /// `#` warning
    Warning,
}

/// Lowest level written (`loglevel`); Notice until configured.
static THRESHOLD: AtomicU8 = AtomicU8::new(Level::Notice as u8);
/// Role character after the pid: `C` while starting (Redis's "child/config"
/// phase), `M` once the server runs as master.
static ROLE: AtomicU8 = AtomicU8::new(b'M');
/// The log file (`logfile`), or standard output when unset.
static FILE: Mutex<Option<std::fs::File>> = Mutex::new(None);
/// The log file's path, for [`reopen`].
static PATH: Mutex<Option<String>> = Mutex::new(None);
/// Where log lines also go when `syslog-enabled` is on.
static SYSLOG: Mutex<Option<Syslog>> = Mutex::new(None);

/// The socket syslog listens on. `HOZON_SYSLOG_SOCKET` names another one
/// (a container's mounted log socket, or a test's).
pub const SYSLOG_SOCKET: &str = "/dev/log";

/// A syslog destination: RFC 3164 datagrams as glibc's `syslog(3)` sends
/// them (`<PRI>Mmm dd hh:mm:ss ident[pid]: message`, UTC).
struct Syslog {
    socket: Option<std::os::unix::net::UnixDatagram>,
    path: String,
    ident: String,
    facility: u8,
}

impl Syslog {
    fn send(&mut self, severity: u8, message: &str) {
        let ms = crate::engine::now_ms();
        let stamp = timestamp(ms);
        // "06 Dec 2026 01:02:03.456" → "Dec  6 01:02:03"
        let day: u32 = stamp[..2].parse().unwrap_or(1);
        let line = format!(
            "<{}>{} {day:>2} {} {}[{}]: {message}",
            u32::from(self.facility) * 8 + u32::from(severity),
            &stamp[3..6],
            &stamp[12..20],
            self.ident,
            std::process::id()
        );
        for _ in 0..2 {
            if self.socket.is_none() {
                self.socket = std::os::unix::net::UnixDatagram::unbound()
                    .and_then(|s| s.connect(&self.path).map(|()| s))
                    .ok();
            }
            let Some(socket) = &self.socket else { return };
            if socket.send(line.as_bytes()).is_ok() {
                return;
            }
            // The syslog daemon may have restarted: connect again once.
            self.socket = None;
        }
    }
}

/// Sends log lines to syslog too (`syslog-enabled`), as `ident` with the
/// facility code `facility` (`syslog-facility`). Lines are dropped while
/// the socket is unavailable, as glibc's syslog drops them.
pub fn set_syslog(ident: &str, facility: u8) {
    let path = std::env::var("HOZON_SYSLOG_SOCKET").unwrap_or_else(|_| SYSLOG_SOCKET.into());
    let mut syslog = Syslog {
        socket: None,
        path,
        ident: ident.to_string(),
        facility,
    };
    syslog.socket = std::os::unix::net::UnixDatagram::unbound()
        .and_then(|s| s.connect(&syslog.path).map(|()| s))
        .ok();
    *SYSLOG.lock().unwrap_or_else(|p| p.into_inner()) = Some(syslog);
}

/// Sets the lowest level written (`loglevel`).
pub fn set_level(level: Level) {
    THRESHOLD.store(level as u8, Ordering::Relaxed);
}

/// Sets the role character shown after the pid (`C` during startup, `M`
/// once serving).
pub fn set_role(role: u8) {
    ROLE.store(role, Ordering::Relaxed);
}

/// Sends the log to `path` (appending), as `logfile` asks. The error text
/// is C's `strerror` wording, for Redis's "Can't open the log file" message.
pub fn set_file(path: &str) -> Result<(), String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| crate::config::os_error_text(&e))?;
    *FILE.lock().unwrap_or_else(|p| p.into_inner()) = Some(file);
    *PATH.lock().unwrap_or_else(|p| p.into_inner()) = Some(path.to_string());
    Ok(())
}

/// Opens the log file again by its path (SIGHUP, after logrotate moved
/// it away), so lines go to a file of that name again. Redis 7.0 keeps
/// writing to the moved file; hozon reopens. A no-op when logging to
/// standard output; on failure the old file is kept and the error
/// returned.
pub fn reopen() -> Result<bool, String> {
    let Some(path) = PATH.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
        return Ok(false);
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| crate::config::os_error_text(&e))?;
    *FILE.lock().unwrap_or_else(|p| p.into_inner()) = Some(file);
    Ok(true)
}

/// Writes one log line (if `level` passes `loglevel`) to the log file or
/// standard output.
pub fn log(level: Level, message: &str) {
    if (level as u8) < THRESHOLD.load(Ordering::Relaxed) {
        return;
    }
    let mark = match level {
        Level::Debug => '.',
        Level::Verbose => '-',
        Level::Notice => '*',
        Level::Warning => '#',
    };
    if let Some(syslog) = SYSLOG.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        // Redis's syslogLevelMap: LOG_DEBUG, LOG_INFO, LOG_NOTICE, LOG_WARNING.
        let severity = match level {
            Level::Debug => 7,
            Level::Verbose => 6,
            Level::Notice => 5,
            Level::Warning => 4,
        };
        syslog.send(severity, message);
    }
    let role = ROLE.load(Ordering::Relaxed) as char;
    let line = format!(
        "{}:{} {} {} {}\n",
        std::process::id(),
        role,
        timestamp(crate::engine::now_ms()),
        mark,
        message
    );
    write_line(&line);
}

/// Writes an already formatted line (e.g. Redis's `pid:signal-handler …`
/// lines) to the log destination.
pub fn write_line(line: &str) {
    let mut file = FILE.lock().unwrap_or_else(|p| p.into_inner());
    // A closed or full log destination must not stop the server.
    if let Some(f) = file.as_mut() {
        let _ = f.write_all(line.as_bytes());
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

/// `29 Nov 2026 16:43:58.123` (UTC) for Unix ms `ms`.
pub fn timestamp(ms: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = crate::clock::civil_from_days(days);
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        d,
        MONTHS[(m - 1) as usize],
        y,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        millis
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps() {
        assert_eq!(super::timestamp(0), "01 Jan 1970 00:00:00.000");
        assert_eq!(
            super::timestamp(1_795_970_638_123),
            "29 Nov 2026 16:43:58.123"
        );
    }
}
