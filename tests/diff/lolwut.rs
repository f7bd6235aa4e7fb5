//! Differential tests: LOLWUT, RESP2 and RESP3.
//!
//! Without VERSION (and for versions without art) the reply must match
//! exactly. Versions 5 and 6 draw with libc's `rand()` in Redis, so only
//! what is not random is compared byte for byte: every version 5 drawing
//! of at most two rows of squares (no square is tilted before the third
//! row), the top rows of the default drawing, and for both versions the
//! size of the drawing and the closing lines.

use crate::harness::{check_both_protocols, show, Pair};

/// The text of a LOLWUT reply (a bulk in RESP2, a `txt` verbatim string
/// in RESP3).
fn text(reply: &[u8]) -> String {
    let header_end = reply
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("header line");
    let len: usize = std::str::from_utf8(&reply[1..header_end])
        .unwrap()
        .parse()
        .unwrap();
    let mut body = &reply[header_end + 2..header_end + 2 + len];
    match reply[0] {
        b'$' => {}
        b'=' => {
            assert_eq!(&body[..4], b"txt:", "{}", show(reply));
            body = &body[4..];
        }
        _ => panic!("not a string reply: {}", show(reply)),
    }
    String::from_utf8(body.to_vec()).expect("UTF-8 art")
}

const EXACT: &str = r#"
LOLWUT
LOLWUT foo bar
LOLWUT VERSION
LOLWUT version 7
LOLWUT VERSION 4
LOLWUT VERSION 0
LOLWUT VERSION -1
LOLWUT VERSION 59
LOLWUT VERSION 7 1 2 3
LOLWUT VERSION x
LOLWUT VERSION 5.0
LOLWUT VERSION 99999999999999999999
LOLWUT VERSION 5 x
LOLWUT VERSION 5 10 y
LOLWUT VERSION 5 10 3 z
LOLWUT VERSION 6 x
LOLWUT VERSION 6 10 y
LOLWUT VERSION 5 10 3 2
LOLWUT VERSION 5 10 3 1
LOLWUT VERSION 5 1 1 1
LOLWUT VERSION 5 2 1 2
LOLWUT VERSION 5 3 5 2
LOLWUT VERSION 5 0 0 0
LOLWUT VERSION 5 -4 -4 -4
LOLWUT VERSION 5 66 8 2
LOLWUT VERSION 5 100 7 2 extra args
LOLWUT VERSION 5 5000 300 2
LOLWUT VERSION 5 40 200 2
LOLWUT VERSION 4294967301 12 4 2
LOLWUT VERSION 5 67 13 1
"#;

#[test]
fn default_output_errors_and_deterministic_drawings_match() {
    check_both_protocols(EXACT);
}

/// Checks one version 5 drawing: same number of lines, each line of the
/// same number of characters, the first `exact_lines` lines and the
/// closing line identical.
fn check_schotter(p: &mut Pair, args: &[&str], exact_lines: usize) {
    let (r, h) = p.both(args);
    let (r, h) = (text(&r), text(&h));
    let (rl, hl): (Vec<&str>, Vec<&str>) = (r.lines().collect(), h.lines().collect());
    assert_eq!(rl.len(), hl.len(), "{args:?}: line count\n{r}\n{h}");
    for (i, (a, b)) in rl.iter().zip(&hl).enumerate() {
        assert_eq!(a.chars().count(), b.chars().count(), "{args:?}: line {i}");
        if i < exact_lines || i == rl.len() - 1 {
            assert_eq!(a, b, "{args:?}: line {i}");
        }
    }
    assert!(r.ends_with('\n') && h.ends_with('\n'));
    assert_eq!(
        hl.last().copied(),
        Some("Georg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15")
    );
}

/// Checks one version 6 drawing: `rows` lines of `cols` cells, each cell
/// one of Redis's four colour escapes, then the dedication, identical.
fn check_skyline(p: &mut Pair, args: &[&str], cols: usize, rows: usize) {
    let (r, h) = p.both(args);
    let (r, h) = (text(&r), text(&h));
    for art in [&r, &h] {
        let lines: Vec<&str> = art.lines().collect();
        assert_eq!(lines.len(), rows + 2, "{args:?}\n{art}");
        for line in &lines[..rows] {
            let cells: Vec<&str> = line.split("\x1b[0m").collect();
            assert_eq!(cells.len(), cols + 1, "{args:?}: {line:?}");
            assert_eq!(cells[cols], "");
            for cell in &cells[..cols] {
                assert!(
                    [
                        "\x1b[0;30;40m ",
                        "\x1b[0;90;100m ",
                        "\x1b[0;37;47m ",
                        "\x1b[0;97;107m "
                    ]
                    .contains(cell),
                    "{args:?}: cell {cell:?}"
                );
            }
        }
    }
    let tail = |s: &str| s.lines().skip(rows).map(String::from).collect::<Vec<_>>();
    assert_eq!(tail(&r), tail(&h), "{args:?}");
    assert_eq!(
        tail(&h),
        [
            "Dedicated to the 8 bit game developers of past and present.",
            "Original 8 bit image from Plaguemon by hikikomori. Redis ver. 7.0.15"
        ]
    );
}

#[test]
fn random_drawings_have_redis_shape_and_closing_lines() {
    let mut p = Pair::new();
    for resp3 in [false, true] {
        if resp3 {
            p.resp3();
        }
        // The default drawing: squares 16 pixels wide, the third row tilts
        // at most a pixel and a rotation's worth: pixel rows 0-27 (seven
        // lines) are not random.
        check_schotter(&mut p, &["LOLWUT", "VERSION", "5"], 7);
        check_schotter(&mut p, &["LOLWUT", "VERSION", "5", "30", "4", "9"], 1);
        check_schotter(&mut p, &["LOLWUT", "VERSION", "5", "200", "20", "200"], 0);
        check_skyline(&mut p, &["LOLWUT", "VERSION", "6"], 80, 20);
        check_skyline(&mut p, &["LOLWUT", "VERSION", "6", "1", "1"], 1, 1);
        check_skyline(&mut p, &["LOLWUT", "VERSION", "6", "33", "7", "x"], 33, 7);
        check_skyline(&mut p, &["LOLWUT", "VERSION", "6", "0", "-3"], 1, 1);
        check_skyline(&mut p, &["LOLWUT", "VERSION", "6", "1200", "3"], 1000, 3);
    }
}
