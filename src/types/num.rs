//! Number parsing and formatting with Redis's exact rules.
//!
//! Redis is strict about what counts as an integer (`string2ll`: no sign but
//! `-`, no leading zeros, no spaces) and formats doubles with C's `%.17g`
//! (Redis 7.0). Replies must match byte for byte, so these are written out
//! here rather than left to Rust's formatting defaults.

/// Parses `s` as a signed 64-bit integer the way Redis's `string2ll` does.
///
/// Accepts `0`, `-5`, `123`; rejects `+5`, `05`, `-0`, ` 5`, `5 `, empty
/// input, and anything that overflows.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !(b'1'..=b'9').contains(&digits[0]) {
        return None;
    }
    let mut value: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if negative {
        if value > (i64::MAX as u64) + 1 {
            None
        } else {
            Some((value as i64).wrapping_neg())
        }
    } else if value > i64::MAX as u64 {
        None
    } else {
        Some(value as i64)
    }
}

/// Parses `s` as a double the way Redis's `getDoubleFromObject` does
/// (`strtod` over the whole string): leading/trailing spaces, an empty
/// string and NaN are rejected; `inf`, `-inf`, `+inf`, hex floats and
/// exponents are accepted; a finite number that overflows to infinity or
/// underflows to zero (strtod's ERANGE) is rejected.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    let value = parse_f64_any_range(s)?;
    let lower = std::str::from_utf8(s).ok()?.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    let literal_infinity = matches!(unsigned, "inf" | "infinity");
    if value.is_infinite() && !literal_infinity {
        return None;
    }
    if value == 0.0 && has_nonzero_mantissa_digit(unsigned) {
        return None;
    }
    Some(value)
}

/// [`parse_f64`] without the range check: what plain `strtod` returns
/// (`1e400` is infinity, `1e-400` is 0), as Redis's score-range parsing
/// uses it.
pub fn parse_f64_any_range(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s[0].is_ascii_whitespace() || s[s.len() - 1].is_ascii_whitespace() {
        return None;
    }
    let text = std::str::from_utf8(s).ok()?;
    let lower = text.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if unsigned.len() + 1 < lower.len() {
        return None; // more than one sign
    }
    let value = match unsigned {
        "inf" | "infinity" => {
            if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        _ if unsigned.starts_with("0x") => parse_hex_float(&lower)?,
        _ => {
            // Rust's parser accepts "inf"/"nan" spellings handled above and
            // rejects forms strtod accepts only in exotic locales.
            if unsigned.contains("nan") || unsigned.contains("inf") {
                return None;
            }
            lower.parse::<f64>().ok()?
        }
    };
    if value.is_nan() {
        None
    } else {
        Some(value)
    }
}

/// True when the mantissa (before any exponent) has a non-zero digit.
fn has_nonzero_mantissa_digit(unsigned: &str) -> bool {
    let hex = unsigned.starts_with("0x");
    let body = if hex { &unsigned[2..] } else { unsigned };
    let mantissa = body.split(if hex { 'p' } else { 'e' }).next().unwrap_or("");
    mantissa.bytes().any(|b| b.is_ascii_hexdigit() && b != b'0')
}

fn parse_hex_float(s: &str) -> Option<f64> {
    let (negative, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let rest = rest.strip_prefix("0x")?;
    let (mantissa, exponent) = match rest.split_once('p') {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (rest, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let mut value = 0f64;
    for c in int_part.chars() {
        value = value * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in frac_part.chars() {
        value += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    let value = value * 2f64.powi(exponent);
    Some(if negative { -value } else { value })
}

/// "00" to "99": [`format_i64`] writes two digits per division.
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// Formats `n` in decimal into `buf` (20 bytes hold any `i64`, sign
/// included) and returns the digits, without allocating.
pub fn format_i64(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut pos = buf.len();
    let mut v = n.unsigned_abs();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        pos -= 2;
        buf[pos..pos + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        pos -= 2;
        buf[pos..pos + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        pos -= 1;
        buf[pos] = b'0' + v as u8;
    }
    if n < 0 {
        // 19 digits at most for |i64::MIN|, so there is room for the sign.
        pos -= 1;
        buf[pos] = b'-';
    }
    &buf[pos..]
}

/// Appends the decimal representation of `n`.
pub fn write_i64(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(format_i64(n, &mut [0u8; 20]));
}

/// Formats a double as C's `printf("%.17g")` does, which is what Redis 7.0
/// uses for scores and for RESP3 doubles. Infinities are `inf` / `-inf`.
pub fn format_g17(d: f64) -> String {
    let mut buf = [0u8; G17_BYTES];
    let text = format_g17_into(d, &mut buf);
    // The text is ASCII.
    String::from_utf8_lossy(text).into_owned()
}

/// Room for any `%.17g` text: a sign, 17 digits, a point and an exponent
/// of up to `e-308` (24 bytes), or a sign, `0.000` and 17 digits (23).
pub const G17_BYTES: usize = 32;

/// [`format_g17`] into `buf`, returning the text, without allocating for
/// the numbers `%.17g` writes without an exponent (from 1e-4 to just
/// under 1e17), which it works out from the binary value exactly in
/// integer arithmetic; the others go through [`format_g`].
pub fn format_g17_into(d: f64, buf: &mut [u8; G17_BYTES]) -> &[u8] {
    if let Some(len) = g17_fixed(d, buf) {
        return &buf[..len];
    }
    let text = format_g(d, 17);
    let len = text.len().min(G17_BYTES);
    buf[..len].copy_from_slice(&text.as_bytes()[..len]);
    &buf[..len]
}

/// `%.17g` of `d` when its decimal exponent after rounding to 17
/// significant digits is in -4..=16 (so C prints it without exponent) and
/// `d` lies between 1e-4 and 1e17: the length written to `buf`. None
/// otherwise (zero, infinities, NaN, other magnitudes).
///
/// The 17 digits are `|d| × 10^(16 - X)` rounded to an integer, half to
/// even (the exact value of `d` is `m × 2^e`, so the product is an
/// integer shifted right by `-e` bits, here at most 2^120 in a u128),
/// for the exponent `X` that puts the rounded result in 10^16..10^17.
fn g17_fixed(d: f64, buf: &mut [u8; G17_BYTES]) -> Option<usize> {
    const LOW: u64 = 10_000_000_000_000_000; // 10^16
    const HIGH: u64 = 100_000_000_000_000_000; // 10^17
    let magnitude = d.abs();
    if !(1e-4..1e17).contains(&magnitude) {
        return None;
    }
    let bits = magnitude.to_bits();
    // A normal number (1e-4 is far above the subnormals): the implicit
    // bit, and the exponent of the mantissa's last bit.
    let mantissa = (bits & ((1 << 52) - 1)) | (1 << 52);
    let exponent = ((bits >> 52) & 0x7FF) as i32 - 1075;
    let mut x = magnitude.log10().floor() as i32;
    let mut digits = None;
    // log10 is off by at most one near powers of ten; the rounding can
    // carry into one more digit (then X is one more).
    for _ in 0..3 {
        let k = 16 - x;
        if !(0..=20).contains(&k) {
            return None;
        }
        let q = round_scaled(mantissa, exponent, k as u32);
        if q >= u128::from(HIGH) {
            x += 1;
        } else if q < u128::from(LOW) {
            x -= 1;
        } else {
            digits = Some(q as u64);
            break;
        }
    }
    let digits = digits?;
    if !(-4..=16).contains(&x) {
        return None;
    }
    let mut text = [0u8; 17];
    let mut rest = digits;
    for slot in text.iter_mut().rev() {
        *slot = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    // The last significant digit (the first is never 0).
    let last = text.iter().rposition(|&c| c != b'0').unwrap_or(0);
    let mut len = 0;
    let mut put = |bytes: &[u8]| {
        buf[len..len + bytes.len()].copy_from_slice(bytes);
        len += bytes.len();
    };
    if d < 0.0 {
        put(b"-");
    }
    if x >= 0 {
        let int_digits = x as usize + 1;
        put(&text[..int_digits]);
        if last >= int_digits {
            put(b".");
            put(&text[int_digits..=last]);
        }
    } else {
        put(b"0.");
        put(&b"0000"[..(-x - 1) as usize]);
        put(&text[..=last]);
    }
    Some(len)
}

/// `mantissa × 2^exponent × 10^k` rounded to an integer, half to even
/// (`mantissa` < 2^53, `k` ≤ 20, `exponent` ≥ -127: the product fits).
fn round_scaled(mantissa: u64, exponent: i32, k: u32) -> u128 {
    let scaled = u128::from(mantissa) * 10u128.pow(k);
    if exponent >= 0 {
        return scaled << exponent;
    }
    let shift = (-exponent) as u32;
    if shift >= 128 {
        return 0;
    }
    let q = scaled >> shift;
    let rem = scaled - (q << shift);
    let half = 1u128 << (shift - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q + 1
    } else {
        q
    }
}

/// C's `%.{precision}g`.
pub fn format_g(d: f64, precision: usize) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d.is_nan() {
        // glibc prints the sign bit of a NaN too (0/0 on x86 is -nan).
        return if d.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let p = precision.max(1);
    // Scientific form with p significant digits gives the decimal exponent
    // after rounding, which decides between fixed and exponent notation.
    let sci = format!("{:.*e}", p - 1, d);
    let (mantissa, exp) = sci.split_once('e').expect("{:e} always has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    if exp < -4 || exp >= p as i32 {
        let mantissa = strip_fraction_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip_fraction_zeros(&format!("{:.*}", decimals, d)).to_string()
    }
}

fn strip_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Formats the result of INCRBYFLOAT / HINCRBYFLOAT.
///
/// Redis computes these in `long double` and prints `%.17Lf` with trailing
/// zeros removed. Rust has no 80-bit float, so this prints the shortest
/// decimal that round-trips the `f64` result, which agrees with Redis for
/// every value that is exactly representable to 17 significant digits (the
/// common case: `10.5 + 0.1` is `10.6` in both).
pub fn format_incr_float(d: f64) -> String {
    let s = format!("{d}");
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn integers_format_as_rust_prints_them() {
        let mut cases = vec![0, 1, -1, 9, 10, 99, 100, -100, i64::MIN, i64::MAX];
        let mut p: i64 = 1;
        while let Some(next) = p.checked_mul(10) {
            cases.extend([p - 1, p, p + 1, -p + 1, -p, -p - 1]);
            p = next;
        }
        cases.extend((-2000..2000).chain((0..64).map(|b| 1i64 << b)));
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push(x as i64 >> (x % 60));
        }
        for n in cases {
            assert_eq!(format_i64(n, &mut [0; 20]), n.to_string().as_bytes(), "{n}");
        }
    }

    use super::*;

    #[test]
    fn parse_i64_follows_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"+1",
            b"01",
            b"-0",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"1a",
            b"-",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", bad.escape_ascii().to_string());
        }
    }

    #[test]
    fn parse_f64_follows_strtod() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b".5"), Some(0.5));
        assert_eq!(parse_f64(b"0x10"), Some(16.0));
        assert_eq!(parse_f64(b"4e-320"), Some(4e-320)); // denormal: ERANGE but kept
        assert_eq!(parse_f64(b"0.000"), Some(0.0));
        assert_eq!(parse_f64_any_range(b"1e400"), Some(f64::INFINITY));
        for bad in [
            &b""[..],
            b"nan",
            b" 1",
            b"1 ",
            b"abc",
            b"--1",
            b"1.2.3",
            b"1e400",
            b"-1e400",
            b"1e-400",
        ] {
            assert_eq!(parse_f64(bad), None, "{:?}", bad.escape_ascii().to_string());
        }
    }

    #[test]
    fn g17_matches_printf() {
        assert_eq!(format_g17(1.1), "1.1000000000000001");
        assert_eq!(format_g17(1.0), "1");
        assert_eq!(format_g17(-2.5), "-2.5");
        assert_eq!(format_g17(1e20), "1e+20");
        assert_eq!(format_g17(123456789012345680.0), "1.2345678901234568e+17");
        assert_eq!(format_g17(0.0001), "0.0001");
        assert_eq!(format_g17(0.00001), "1.0000000000000001e-05");
        assert_eq!(format_g17(f64::INFINITY), "inf");
        assert_eq!(format_g17(3.0), "3");
    }

    #[test]
    fn g17_fixed_notation_is_format_gs() {
        let mut rng = crate::rand::Rng::with_seed(17);
        let check = |d: f64| {
            let mut buf = [0u8; G17_BYTES];
            let fast = format_g17_into(d, &mut buf);
            assert_eq!(
                std::str::from_utf8(fast).unwrap(),
                format_g(d, 17),
                "{d:e} ({:#x})",
                d.to_bits()
            );
        };
        for d in [
            0.0,
            -0.0,
            1e-4,
            1e-5,
            1e17,
            1e16,
            0.1,
            0.3,
            1.0 / 3.0,
            2.5,
            9.5,
            0.5,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            9_007_199_254_740_993.0,
            99_999_999_999_999_990.0,
            0.000_099_999_999_999_999_99,
        ] {
            check(d);
            check(-d);
        }
        // Ties at the 17th digit (the exact value ends in 5 one digit
        // further; quarters are exact up to 2^51): half to even, both ways.
        for d in [
            1_234_567_890_123_456.0 + 0.25,
            1_234_567_890_123_456.0 + 0.75,
            1_234_567_890_123_457.0 + 0.25,
            2_251_799_813_685_247.0 + 0.5,
        ] {
            assert!(g17_fixed(d, &mut [0; G17_BYTES]).is_some(), "{d}");
            check(d);
            check(-d);
        }
        // Around every power of ten in range, a few ulps either side.
        for exp in -6..=18 {
            let p = 10f64.powi(exp);
            let mut below = p;
            let mut above = p;
            for _ in 0..64 {
                check(below);
                check(above);
                below = f64::from_bits(below.to_bits() - 1);
                above = f64::from_bits(above.to_bits() + 1);
            }
        }
        // The usual scores take the integer path.
        for d in [
            1.5,
            0.1,
            -142_857.142_857_142_87,
            1e-4,
            99_999_999_999_999.99,
        ] {
            assert!(g17_fixed(d, &mut [0; G17_BYTES]).is_some(), "{d}");
        }
        for _ in 0..200_000 {
            check(f64::from_bits(rng.next_u64()));
            // Any magnitude from 1e-6 to 1e18, every mantissa.
            let exp = rng.below(25) as i32 - 6;
            let mantissa = f64::from_bits(0x3FF0_0000_0000_0000 | (rng.next_u64() >> 12));
            check(mantissa * 10f64.powi(exp));
            // Scores as they come: fractions, halves and quarters of big
            // integers, integers.
            check(rng.below(1 << 40) as f64 / (1 + rng.below(1000)) as f64);
            check((rng.next_u64() >> rng.below(64)) as f64 / 4.0);
            check((rng.next_u64() >> rng.below(64)) as f64);
        }
    }

    #[test]
    fn write_i64_extremes() {
        let mut v = Vec::new();
        write_i64(&mut v, i64::MIN);
        assert_eq!(v, b"-9223372036854775808");
    }

    /// Every digit count and sign, both sides of each power of ten, and
    /// random values, appended after what the vector holds: the same text
    /// as `to_string`, in place.
    #[test]
    fn write_i64_matches_to_string() {
        let mut values = vec![0i64, 1, -1, 9, -9, i64::MAX, i64::MIN, i64::MIN + 1];
        let mut p = 1i64;
        for _ in 0..18 {
            p *= 10;
            values.extend([p - 1, p, p + 1, -(p - 1), -p, -(p + 1)]);
        }
        let mut rng = crate::rand::Rng::with_seed(7);
        values.extend((0..10_000).map(|_| (rng.next_u64() >> rng.below(64)) as i64));
        for n in values {
            let mut out = b"x".to_vec();
            write_i64(&mut out, n);
            assert_eq!(out, format!("x{n}").into_bytes(), "{n}");
            let mut buf = [0u8; 20];
            assert_eq!(format_i64(n, &mut buf), n.to_string().as_bytes(), "{n}");
        }
    }
}
