//! RESP2 replies decoded into values, shown readably in failures (the
//! `repl` and `replica` suites).

use crate::harness::{show, Conn};

/// Sends a command given as words and decodes its reply.
pub fn call(conn: &mut Conn, args: &[&str]) -> Value {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    decode(&conn.call(&args))
}

/// One field of an INFO section, if the server reports it.
pub fn info_field(conn: &mut Conn, section: &str, field: &str) -> Option<String> {
    let Value::Bulk(text) = call(conn, &["INFO", section]) else {
        panic!("INFO is not a bulk string");
    };
    let text = String::from_utf8_lossy(&text).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
}

/// A decoded RESP2 reply.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    Bulk(Vec<u8>),
    Int(i64),
    Simple(String),
    Error(String),
    Nil,
    Array(Vec<Value>),
}

/// Bulk strings shown as escaped text, so a failed comparison reads.
impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Bulk(b) => write!(f, "{:?}", show(b)),
            Value::Int(n) => write!(f, "{n}"),
            Value::Simple(s) => write!(f, "+{s}"),
            Value::Error(e) => write!(f, "-{e}"),
            Value::Nil => write!(f, "nil"),
            Value::Array(items) => f.debug_list().entries(items).finish(),
        }
    }
}

impl Value {
    /// The elements of an array (panics otherwise).
    pub fn items(&self) -> &[Value] {
        match self {
            Value::Array(items) => items,
            other => panic!("not an array: {other:?}"),
        }
    }

    /// A bulk or simple string as text (panics otherwise).
    pub fn text(&self) -> String {
        match self {
            Value::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            Value::Simple(s) => s.clone(),
            other => panic!("not a string: {other:?}"),
        }
    }

    /// An integer reply (panics otherwise).
    pub fn int(&self) -> i64 {
        match self {
            Value::Int(n) => *n,
            other => panic!("not an integer: {other:?}"),
        }
    }
}

/// Decodes the one RESP2 reply at the start of `buf`.
pub fn decode(buf: &[u8]) -> Value {
    fn at(buf: &[u8], pos: &mut usize) -> Value {
        let end = buf[*pos..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("reply line")
            + *pos;
        let line = String::from_utf8_lossy(&buf[*pos + 1..end]).into_owned();
        let kind = buf[*pos];
        *pos = end + 2;
        match kind {
            b'+' => Value::Simple(line),
            b'-' => Value::Error(line),
            b':' => Value::Int(line.parse().expect("integer reply")),
            b'$' => {
                let n: i64 = line.parse().expect("bulk length");
                if n < 0 {
                    return Value::Nil;
                }
                let v = buf[*pos..*pos + n as usize].to_vec();
                *pos += n as usize + 2;
                Value::Bulk(v)
            }
            b'*' => {
                let n: i64 = line.parse().expect("array length");
                if n < 0 {
                    return Value::Nil;
                }
                Value::Array((0..n).map(|_| at(buf, pos)).collect())
            }
            other => panic!("unexpected reply type {:?}", other as char),
        }
    }
    at(buf, &mut 0)
}
