//! Times on the tools' command lines (`hozon-repair truncate --before`,
//! `hozon-inspect aof --from/--to`), in reports and in file names (a
//! backup's UTC timestamp). Proleptic Gregorian calendar, UTC; the day
//! arithmetic is `clock`'s (Howard Hinnant's civil-date algorithms).

pub use crate::clock::civil_from_days;
use crate::clock::days_from_civil;

/// What [`rfc3339_ms`] does with a fraction finer than a millisecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubMs {
    /// Drop it (`12:00:00.0005` is `12:00:00.000`).
    Truncate,
    /// Round up to the next whole millisecond (`12:00:00.0005` is
    /// `12:00:00.001`).
    RoundUp,
}

/// Parses `--before`: Unix milliseconds (`1796040240000`) or RFC 3339
/// (`2026-11-30T12:04:00Z`, `2026-11-30T13:04:00.250+01:00`). Returns Unix
/// ms. A fraction finer than a millisecond rounds up: timestamps in files
/// are whole milliseconds, and "before 12:00:00.0005" keeps a batch
/// written at 12:00:00.000.
pub fn parse_time_ms(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<i64>()
            .map_err(|_| format!("'{text}': Unix milliseconds out of range"));
    }
    rfc3339_ms(text, SubMs::RoundUp).ok_or_else(|| {
        format!(
            "'{text}' is neither Unix milliseconds nor an RFC 3339 time \
             (e.g. 2026-11-30T12:04:00Z or 2026-11-30T13:04:00.5+01:00)"
        )
    })
}

/// Reads `len` ASCII digits at `at` as a number.
fn digits(b: &[u8], at: usize, len: usize) -> Option<i64> {
    let part = b.get(at..at + len)?;
    if !part.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
}

/// Unix ms of an RFC 3339 time (`2026-11-30T12:04:00Z`, a fraction of a
/// second, `+HH:MM`/`-HH:MM` offsets; `t`/`z` and a space for `T`
/// accepted), or `None` when `text` is not one. `sub_ms` says what
/// happens to a fraction finer than a millisecond.
pub fn rfc3339_ms(text: &str, sub_ms: SubMs) -> Option<i64> {
    let b = text.as_bytes();
    let year = digits(b, 0, 4)?;
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    let hour = digits(b, 11, 2)?;
    let minute = digits(b, 14, 2)?;
    let second = digits(b, 17, 2)?;
    if b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || !matches!(b.get(10), Some(b'T' | b't' | b' '))
        || b.get(13) != Some(&b':')
        || b.get(16) != Some(&b':')
    {
        return None;
    }
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        // 60 is a leap second: it is read as the next second's start.
        || second > 60
    {
        return None;
    }
    let mut at = 19;
    // Fraction: nanoseconds, made whole milliseconds below.
    let mut frac_ns = 0i64;
    let mut below_ns = false;
    if b.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            if at - start < 9 {
                frac_ns = frac_ns * 10 + i64::from(b[at] - b'0');
            } else if b[at] != b'0' {
                below_ns = true;
            }
            at += 1;
        }
        let n = at - start;
        if n == 0 {
            return None;
        }
        for _ in n..9 {
            frac_ns *= 10;
        }
    }
    let frac_ms = match sub_ms {
        SubMs::Truncate => frac_ns / 1_000_000,
        // Below a nanosecond: still after the whole nanosecond.
        SubMs::RoundUp => (frac_ns + i64::from(below_ns) + 999_999) / 1_000_000,
    };
    let offset_s = match b.get(at) {
        Some(b'Z' | b'z') if at + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if at + 6 == b.len() && b[at + 3] == b':' => {
            let h = digits(b, at + 1, 2)?;
            let m = digits(b, at + 4, 2)?;
            if h > 23 || m > 59 {
                return None;
            }
            let s = h * 3600 + m * 60;
            if sign == b'+' {
                s
            } else {
                -s
            }
        }
        _ => return None,
    };
    let secs =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Some(secs * 1000 + frac_ms)
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Unix ms as `YYYYMMDDTHHMMSSZ` (the backup file name's stamp).
pub fn compact_utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let of_day = secs.rem_euclid(86_400);
    format!(
        "{y:04}{mo:02}{d:02}T{:02}{:02}{:02}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// Unix ms as RFC 3339 UTC with milliseconds (for reports).
pub fn rfc3339_utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let of_day = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        ms.rem_euclid(1000)
    )
}

/// Unix ms as `YYYY-MM-DD HH:MM:SS UTC` (the inspector's reports).
pub fn utc_text(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let of_day = secs.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// The current time in Unix ms.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_ms_is_taken_as_is() {
        assert_eq!(parse_time_ms("0"), Ok(0));
        assert_eq!(parse_time_ms("1796040240000"), Ok(1_796_040_240_000));
        assert!(parse_time_ms("99999999999999999999").is_err());
    }

    #[test]
    fn rfc3339_utc_and_offsets() {
        // 2026-11-30T12:04:00Z = 1796040240 s.
        assert_eq!(parse_time_ms("2026-11-30T12:04:00Z"), Ok(1_796_040_240_000));
        assert_eq!(parse_time_ms("2026-11-30t12:04:00z"), Ok(1_796_040_240_000));
        assert_eq!(
            parse_time_ms("2026-11-30T13:04:00+01:00"),
            Ok(1_796_040_240_000)
        );
        assert_eq!(
            parse_time_ms("2026-11-30T06:34:00-05:30"),
            Ok(1_796_040_240_000)
        );
        assert_eq!(parse_time_ms("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_time_ms("1969-12-31T23:59:59Z"), Ok(-1000));
        assert_eq!(parse_time_ms("2000-02-29T00:00:00Z"), Ok(951_782_400_000));
    }

    #[test]
    fn fractions_round_up_to_whole_ms() {
        assert_eq!(parse_time_ms("1970-01-01T00:00:00.5Z"), Ok(500));
        assert_eq!(parse_time_ms("1970-01-01T00:00:00.123Z"), Ok(123));
        assert_eq!(parse_time_ms("1970-01-01T00:00:00.1231Z"), Ok(124));
        assert_eq!(parse_time_ms("1970-01-01T00:00:00.123000000Z"), Ok(123));
        assert_eq!(parse_time_ms("1970-01-01T00:00:00.1230000001Z"), Ok(124));
    }

    #[test]
    fn malformed_times_are_refused() {
        for bad in [
            "",
            "yesterday",
            "2026-11-30",
            "2026-11-30T12:04:00",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T12:04:00.Z",
            "2026-11-30T12:04:00+0100",
            "2026-11-30T12:04:00Zjunk",
            "-5",
        ] {
            assert!(parse_time_ms(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn truncated_fractions_keep_whole_ms() {
        let t = |text| rfc3339_ms(text, SubMs::Truncate);
        assert_eq!(t("1970-01-01T00:00:00.5Z"), Some(500));
        assert_eq!(t("1970-01-01T00:00:00.1239Z"), Some(123));
        assert_eq!(t("1970-01-01T00:00:00.9999999999Z"), Some(999));
        assert_eq!(t("2023-11-14 22:13:20.123456z"), Some(1_700_000_000_123));
    }

    #[test]
    fn utc_text_formats_known_instants() {
        assert_eq!(utc_text(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_text(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_text(1_700_000_000_123), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc_text(-1000), "1969-12-31 23:59:59 UTC");
    }

    #[test]
    fn stamps_format_utc() {
        assert_eq!(compact_utc(0), "19700101T000000Z");
        assert_eq!(compact_utc(1_796_040_240_999), "20261130T120400Z");
        assert_eq!(rfc3339_utc(1_796_040_240_250), "2026-11-30T12:04:00.250Z");
        let ms = parse_time_ms(&rfc3339_utc(951_782_400_123)).expect("round trip parses");
        assert_eq!(ms, 951_782_400_123);
    }
}
