//! Log lines in Redis's format: `pid:role dd Mon yyyy hh:mm:ss.mmm <level> message`.

use std::io::Write;

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

/// Writes one log line to standard output.
pub fn log(level: Level, message: &str) {
    let mark = match level {
        Level::Debug => '.',
        Level::Verbose => '-',
        Level::Notice => '*',
        Level::Warning => '#',
    };
    let line = format!("{}:M {} {} {}\n", std::process::id(), timestamp(crate::engine::now_ms()), mark, message);
    let mut out = std::io::stdout().lock();
    // A closed stdout must not stop the server.
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

/// `29 Nov 2026 16:43:58.123` (UTC) for Unix ms `ms`.
pub fn timestamp(ms: i64) -> String {
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
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

/// Converts days since 1970-01-01 to (year, month, day), proleptic
/// Gregorian (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps() {
        assert_eq!(super::timestamp(0), "01 Jan 1970 00:00:00.000");
        assert_eq!(super::timestamp(1_795_970_638_123), "29 Nov 2026 16:43:58.123");
    }
}
