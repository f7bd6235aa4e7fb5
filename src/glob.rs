//! Glob-style pattern matching with the semantics of Redis 7.0's
//! `stringmatchlen` (KEYS, SCAN MATCH, *SCAN MATCH, PSUBSCRIBE, CONFIG GET).
//!
//! Pattern elements:
//! - `*` matches any run of bytes, `?` any single byte;
//! - `[abc]`, `[^abc]`, `[a-z]` match one byte from (or, with `^`, not
//!   from) a set; inside a class `\x` stands for the byte `x`;
//! - `\x` outside a class matches `x` literally; every other byte matches
//!   itself.
//!
//! Redis's quirks are kept because replies must match byte for byte:
//! - an empty subject matches only the empty pattern (so `*` does not match
//!   the empty key; KEYS and SCAN treat the pattern `*` as "everything"
//!   before ever calling the matcher);
//! - an unterminated class (`[ab`) ends at the end of the pattern;
//! - a `]` right after `[` or `[^` closes an empty class;
//! - `x-y` inside a class is a range whenever two more bytes follow the `x`,
//!   even when the `y` is the closing `]` (`[a-]` is the range `a`..`]`);
//!   ranges compare bytes as C's signed `char` (bytes ≥ 0x80 sort below
//!   0x00), and reversed ranges are swapped;
//! - with `nocase`, escaped bytes inside a class still compare exactly;
//!   only ASCII letters fold (Redis runs in the C locale for `tolower`).
//!
//! Redis matches `*` by recursion, pruned so that it never tries a longer
//! match for an earlier `*` once a later one failed everywhere. Every other
//! element consumes exactly one byte, so the classic single-backtrack-point
//! algorithm below gives the same answers iteratively: constant stack and
//! O(pattern × subject) time for any pattern (a hostile pattern cannot
//! blow the stack, which a deep recursion over a long run of `*x*x*x`
//! could). Redis 7.0.15 has no nesting limit (7.2 added one), so none is
//! needed to reproduce its answers.

/// ASCII-only lower-casing of a C `char` value (C locale `tolower`).
fn lower_signed(c: i32) -> i32 {
    if (i32::from(b'A')..=i32::from(b'Z')).contains(&c) {
        c + 32
    } else {
        c
    }
}

/// Matches the pattern element starting at `p` (not a `*`) against the
/// byte `c`. Returns whether it matched and the index just after the
/// element. The element's extent depends on the pattern only.
fn match_element(pattern: &[u8], p: usize, c: u8, nocase: bool) -> (bool, usize) {
    let len = pattern.len();
    match pattern[p] {
        b'?' => (true, p + 1),
        b'[' => {
            let mut i = p + 1;
            let negate = i < len && pattern[i] == b'^';
            if negate {
                i += 1;
            }
            let mut matched = false;
            loop {
                let remaining = len - i;
                if remaining >= 2 && pattern[i] == b'\\' {
                    // An escaped byte compares exactly, even with nocase.
                    i += 1;
                    if pattern[i] == c {
                        matched = true;
                    }
                } else if remaining >= 1 && pattern[i] == b']' {
                    break;
                } else if remaining == 0 {
                    // Unterminated class: it ends with the pattern.
                    return (matched != negate, len);
                } else if remaining >= 3 && pattern[i + 1] == b'-' {
                    // C compares signed chars here.
                    let mut start = i32::from(pattern[i] as i8);
                    let mut end = i32::from(pattern[i + 2] as i8);
                    let mut subject = i32::from(c as i8);
                    if start > end {
                        std::mem::swap(&mut start, &mut end);
                    }
                    if nocase {
                        start = lower_signed(start);
                        end = lower_signed(end);
                        subject = lower_signed(subject);
                    }
                    i += 2;
                    if subject >= start && subject <= end {
                        matched = true;
                    }
                } else if pattern[i] == c || (nocase && pattern[i].eq_ignore_ascii_case(&c)) {
                    matched = true;
                }
                i += 1;
            }
            (matched != negate, i + 1)
        }
        b'\\' if p + 1 < len => {
            let lit = pattern[p + 1];
            (lit == c || (nocase && lit.eq_ignore_ascii_case(&c)), p + 2)
        }
        lit => (lit == c || (nocase && lit.eq_ignore_ascii_case(&c)), p + 1),
    }
}

/// True when `subject` matches the glob `pattern` (Redis's
/// `stringmatchlen`; see the module documentation for the exact rules).
/// `nocase` folds ASCII letters.
pub fn matches(pattern: &[u8], subject: &[u8], nocase: bool) -> bool {
    if subject.is_empty() {
        // Redis's loop never runs for an empty subject.
        return pattern.is_empty();
    }
    let (mut p, mut s) = (0usize, 0usize);
    // After the last `*` seen: (pattern index just past it, subject index
    // the `*` currently stops at).
    let mut star: Option<(usize, usize)> = None;
    loop {
        if s == subject.len() {
            // Trailing stars match the empty rest.
            while p < pattern.len() && pattern[p] == b'*' {
                p += 1;
            }
            return p == pattern.len();
        }
        if p < pattern.len() && pattern[p] == b'*' {
            while p < pattern.len() && pattern[p] == b'*' {
                p += 1;
            }
            if p == pattern.len() {
                return true;
            }
            star = Some((p, s));
            continue;
        }
        if p < pattern.len() {
            let (ok, next) = match_element(pattern, p, subject[s], nocase);
            if ok {
                p = next;
                s += 1;
                continue;
            }
        }
        // Mismatch: let the last `*` swallow one more byte and retry. A
        // longer match for an earlier `*` cannot help (every element
        // consumes one byte), so only the last one is ever retried.
        match star {
            Some((star_p, star_s)) if star_s < subject.len() => {
                star = Some((star_p, star_s + 1));
                p = star_p;
                s = star_s + 1;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    /// A direct transcription of the recursive definition (without the
    /// pruning), used as the model for the iterative matcher.
    fn model(pattern: &[u8], subject: &[u8], nocase: bool) -> bool {
        if pattern.is_empty() || subject.is_empty() {
            return pattern.is_empty() && subject.is_empty();
        }
        if pattern[0] == b'*' {
            let mut p = 0;
            while p + 1 < pattern.len() && pattern[p + 1] == b'*' {
                p += 1;
            }
            if p + 1 == pattern.len() {
                return true;
            }
            return (0..subject.len()).any(|i| model(&pattern[p + 1..], &subject[i..], nocase));
        }
        let (ok, next) = super::match_element(pattern, 0, subject[0], nocase);
        if !ok {
            return false;
        }
        let rest = &pattern[next..];
        if subject.len() == 1 {
            return rest.iter().all(|&b| b == b'*');
        }
        model(rest, &subject[1..], nocase)
    }

    fn m(p: &str, s: &str) -> bool {
        matches(p.as_bytes(), s.as_bytes(), false)
    }

    #[test]
    fn basics() {
        assert!(m("*", "abc"));
        assert!(m("a*", "a"));
        assert!(m("a*", "abc"));
        assert!(m("*c", "abc"));
        assert!(!m("*d", "abc"));
        assert!(m("a?c", "abc"));
        assert!(!m("a?c", "ac"));
        assert!(m("h[ae]llo", "hello"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("h[b-a]llo", "hallo"));
        assert!(m("\\*", "*"));
        assert!(!m("\\*", "a"));
        assert!(m("a\\", "a\\"));
        assert!(m("*a*b*c*", "xxaxxbxxcxx"));
        assert!(!m("*a*b*c*", "xxaxxcxxbxx"));
        assert!(m("", ""));
        assert!(!m("", "a"));
    }

    #[test]
    fn redis_quirks() {
        // An empty subject matches only the empty pattern.
        assert!(!m("*", ""));
        assert!(!m("**", ""));
        // Unterminated classes.
        assert!(m("[ab", "a"));
        assert!(!m("[", "a"));
        assert!(m("[^", "a"));
        // An empty class, then a literal ']'.
        assert!(!m("[]]", "]"));
        assert!(m("[^]]", "a]"));
        // `[a-]` is the range a..']' (']' is 0x5d < 'a', so swapped).
        assert!(m("[a-]", "_"));
        assert!(!m("[a-]", "-"));
        // Escapes inside a class.
        assert!(m("[\\]]", "]"));
        assert!(m("[\\-]", "-"));
        // Signed ranges: 0x80..0xff sort below 0x00.
        assert!(!matches(b"[\x00-\xff]", b"A", false));
        assert!(matches(b"[\x00-\xff]", b"\x00", false));
        assert!(matches(b"[\x00-\xff]", b"\xff", false));
        assert!(matches(b"[\x80-\x7f]", b"A", false));
    }

    #[test]
    fn nocase() {
        assert!(matches(b"HeLLo", b"hello", true));
        assert!(!matches(b"HeLLo", b"hello", false));
        assert!(matches(b"[A-C]x", b"bX", true));
        assert!(matches(b"[abc]", b"B", true));
        // An escaped byte in a class compares exactly.
        assert!(!matches(b"[\\A]", b"a", true));
        assert!(matches(b"\\A", b"a", true));
    }

    #[test]
    fn hostile_patterns_are_fast_and_shallow() {
        let pattern: Vec<u8> = b"*a".repeat(50_000).into_iter().chain(*b"*b").collect();
        let subject = vec![b'a'; 5_000];
        let started = std::time::Instant::now();
        assert!(!matches(&pattern, &subject, false));
        let pattern = b"a*"
            .repeat(20)
            .into_iter()
            .chain(*b"b")
            .collect::<Vec<u8>>();
        let subject = vec![b'a'; 10_000];
        assert!(!matches(&pattern, &subject, false));
        assert!(started.elapsed().as_secs() < 5, "matching took too long");
    }

    #[test]
    fn agrees_with_the_recursive_model() {
        let alphabet = [
            b'a', b'b', b'*', b'?', b'[', b']', b'^', b'-', b'\\', b'A', 0xe9,
        ];
        let mut rng = crate::rand::Rng::with_seed(42);
        for _ in 0..200_000 {
            let plen = rng.index(8);
            let slen = rng.index(6);
            let pattern: Vec<u8> = (0..plen)
                .map(|_| alphabet[rng.index(alphabet.len())])
                .collect();
            let subject: Vec<u8> = (0..slen)
                .map(|_| alphabet[rng.index(alphabet.len())])
                .collect();
            let nocase = rng.index(2) == 0;
            assert_eq!(
                matches(&pattern, &subject, nocase),
                model(&pattern, &subject, nocase),
                "pattern {:?} subject {:?} nocase {nocase}",
                String::from_utf8_lossy(&pattern),
                String::from_utf8_lossy(&subject)
            );
        }
    }
}
