//! The function libraries as persistent data (Redis Functions): each
//! library's name and source code, which every file format records and
//! every loader restores. The compiled side (the Lua state running them)
//! belongs to the scripting layer, which rebuilds itself from this when
//! [`Libraries::generation`] moves (docs/scripting.md, "Functions").

use std::collections::BTreeMap;

/// Bytes of a name or a source.
pub type Bytes = Vec<u8>;

/// A library: its name and its source.
pub type Source = (Bytes, Bytes);

/// Redis's error for a library or function name that is not made of
/// letters, digits and underscores.
pub const BAD_NAME_ERR: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// The loaded libraries' sources, by library name (names are
/// case-sensitive, as in Redis's library dictionary).
#[derive(Debug, Default, Clone)]
pub struct Libraries {
    libs: BTreeMap<Bytes, Bytes>,
    generation: u64,
    function_count: usize,
}

impl Libraries {
    /// Number of libraries.
    pub fn len(&self) -> usize {
        self.libs.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.libs.is_empty()
    }

    /// Moves on every change; the scripting layer compares it with the
    /// generation its compiled state reflects.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Number of functions the libraries registered (kept by the
    /// scripting layer, which compiles them).
    pub fn function_count(&self) -> usize {
        self.function_count
    }

    /// Records how many functions the libraries registered.
    pub fn set_function_count(&mut self, n: usize) {
        self.function_count = n;
    }

    /// The source of library `name`.
    pub fn code(&self, name: &[u8]) -> Option<&Bytes> {
        self.libs.get(name)
    }

    /// `(name, code)` of every library, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, &Bytes)> {
        self.libs.iter()
    }

    /// Every library's source, by name (what the files record).
    pub fn codes(&self) -> Vec<Bytes> {
        self.libs.values().cloned().collect()
    }

    /// Total bytes of the sources.
    pub fn code_bytes(&self) -> usize {
        self.libs.values().map(Vec::len).sum()
    }

    /// Adds or replaces library `name`.
    pub fn insert(&mut self, name: Bytes, code: Bytes) {
        self.libs.insert(name, code);
        self.generation += 1;
    }

    /// Removes library `name`; false when there is none.
    pub fn remove(&mut self, name: &[u8]) -> bool {
        let removed = self.libs.remove(name).is_some();
        if removed {
            self.generation += 1;
        }
        removed
    }

    /// Replaces every library with `libs` (`(name, code)` pairs).
    pub fn replace_all(&mut self, libs: impl IntoIterator<Item = Source>) {
        self.libs = libs.into_iter().collect();
        if self.libs.is_empty() {
            self.function_count = 0;
        }
        self.generation += 1;
    }

    /// Sets the libraries from sources read from a file, naming each from
    /// its metadata line; the error names the first source that has none.
    pub fn set_from_codes(&mut self, codes: Vec<Bytes>) -> Result<(), String> {
        let mut libs = BTreeMap::new();
        for code in codes {
            let meta = parse_metadata(&code)?;
            if libs.insert(meta.name, code).is_some() {
                return Err("duplicate library in the file".into());
            }
        }
        self.libs = libs;
        self.generation += 1;
        Ok(())
    }
}

/// A library's metadata line (`#!<engine> name=<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// The engine named after `#!` (Redis has `LUA`, any letter case).
    pub engine: Bytes,
    /// The library name.
    pub name: Bytes,
    /// Where the code after the metadata line starts (its newline is kept
    /// so line numbers count from the metadata line, as in Redis).
    pub body_start: usize,
}

/// Redis's `functionExtractLibMetaData`: the engine and name of a library
/// source, or Redis's error text (without the `ERR ` code).
pub fn parse_metadata(code: &[u8]) -> Result<Metadata, String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    // C string functions: the metadata line ends at the first newline
    // (or at a NUL, which leaves no newline to find).
    let text_end = code.iter().position(|&b| b == 0).unwrap_or(code.len());
    let Some(end) = code[..text_end].iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let parts = match crate::resp::split_args(&code[..end]) {
        Some(parts) if !parts.is_empty() => parts,
        _ => return Err("Invalid library metadata".into()),
    };
    let engine = parts[0][2.min(parts[0].len())..].to_vec();
    let mut name = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(part[5..].to_vec());
            continue;
        }
        return Err(format!(
            "Invalid metadata value given: {}",
            String::from_utf8_lossy(part)
        ));
    }
    let Some(name) = name else {
        return Err("Library name was not given".into());
    };
    Ok(Metadata {
        engine,
        name,
        body_start: end,
    })
}

/// Redis's `functionsVerifyName`: letters, digits and `_`, at least one.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_parsed_with_redis_errors() {
        let m = parse_metadata(b"#!lua name=lib1\nreturn 1").unwrap();
        assert_eq!(
            (m.engine.as_slice(), m.name.as_slice()),
            (&b"lua"[..], &b"lib1"[..])
        );
        assert_eq!(m.body_start, 15);
        assert_eq!(parse_metadata(b"#!lua name=\"q\"\n").unwrap().name, b"q");
        let err = |code: &[u8]| parse_metadata(code).unwrap_err();
        assert_eq!(err(b"return 1"), "Missing library metadata");
        assert_eq!(err(b"#!lua name=x"), "Invalid library metadata");
        assert_eq!(err(b"#!lua\n"), "Library name was not given");
        assert_eq!(
            err(b"#!lua name=a name=b\n"),
            "Invalid metadata value, name argument was given multiple times"
        );
        assert_eq!(
            err(b"#!lua foo=bar\n"),
            "Invalid metadata value given: foo=bar"
        );
        assert_eq!(parse_metadata(b"#! name=t\n").unwrap().engine, b"");
    }

    #[test]
    fn names_are_letters_digits_and_underscores() {
        assert!(valid_name(b"a_1Z"));
        assert!(!valid_name(b""));
        assert!(!valid_name(b"a-b"));
        assert!(!valid_name(b"a\0b"));
    }

    #[test]
    fn every_change_moves_the_generation() {
        let mut libs = Libraries::default();
        let g0 = libs.generation();
        libs.insert(b"a".to_vec(), b"#!lua name=a\n".to_vec());
        assert!(libs.generation() > g0);
        let g1 = libs.generation();
        assert!(!libs.remove(b"zz"));
        assert_eq!(libs.generation(), g1);
        assert!(libs.remove(b"a"));
        assert!(libs.generation() > g1);
        libs.set_from_codes(vec![b"#!lua name=b\nx".to_vec()])
            .unwrap();
        assert_eq!(libs.codes(), vec![b"#!lua name=b\nx".to_vec()]);
        assert!(libs.set_from_codes(vec![b"nope".to_vec()]).is_err());
    }
}
