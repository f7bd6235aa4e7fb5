//! The report tree the tools build, and its two renderings: JSON for
//! scripts and aligned text for people. One tree for both keeps the two
//! outputs saying the same thing.

use std::io::{self, Write};

/// A JSON-shaped value. Objects keep insertion order so the output
/// reads in the order the report was built.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// `null`: a fact that is not known.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An unsigned count or size.
    UInt(u64),
    /// A signed number (timestamps).
    Int(i64),
    /// Text.
    Str(String),
    /// A list (a list of objects renders as a table).
    List(Vec<Node>),
    /// Named fields in order.
    Object(Vec<(String, Node)>),
}

impl Node {
    /// An empty object to add fields to.
    pub fn object() -> Node {
        Node::Object(Vec::new())
    }

    /// Adds (or appends) a field; a no-op on non-objects by design of the
    /// builders, which only call it on objects.
    pub fn set(&mut self, key: &str, value: impl Into<Node>) {
        if let Node::Object(fields) = self {
            fields.push((key.to_string(), value.into()));
        }
    }

    /// Builder form of [`Node::set`].
    pub fn with(mut self, key: &str, value: impl Into<Node>) -> Node {
        self.set(key, value);
        self
    }

    /// The field `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn is_scalar(&self) -> bool {
        !matches!(self, Node::List(_) | Node::Object(_))
    }
}

impl From<u64> for Node {
    fn from(v: u64) -> Node {
        Node::UInt(v)
    }
}

impl From<usize> for Node {
    fn from(v: usize) -> Node {
        Node::UInt(v as u64)
    }
}

impl From<u32> for Node {
    fn from(v: u32) -> Node {
        Node::UInt(u64::from(v))
    }
}

impl From<u16> for Node {
    fn from(v: u16) -> Node {
        Node::UInt(u64::from(v))
    }
}

impl From<i64> for Node {
    fn from(v: i64) -> Node {
        Node::Int(v)
    }
}

impl From<bool> for Node {
    fn from(v: bool) -> Node {
        Node::Bool(v)
    }
}

impl From<&str> for Node {
    fn from(v: &str) -> Node {
        Node::Str(v.to_string())
    }
}

impl From<String> for Node {
    fn from(v: String) -> Node {
        Node::Str(v)
    }
}

impl<T: Into<Node>> From<Option<T>> for Node {
    fn from(v: Option<T>) -> Node {
        v.map_or(Node::Null, Into::into)
    }
}

impl From<Vec<Node>> for Node {
    fn from(v: Vec<Node>) -> Node {
        Node::List(v)
    }
}

/// Bytes from a file as text: UTF-8 as is, anything else with its
/// non-printable bytes written `\xHH` (so the JSON stays valid UTF-8 and
/// the escaping is visible rather than lossy).
pub fn bytes_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => bytes.escape_ascii().to_string(),
    }
}

/// A key for display: printable ASCII as is except `\`, written `\\`;
/// every other byte as `\xHH`. The escaped text is ASCII and reversible
/// (how both tools print keys).
pub fn escape_key(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len());
    for &b in key {
        match b {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\x");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 15)]));
            }
        }
    }
    out
}

/// Prints `node` on stdout: one JSON document with `json`, else aligned
/// text.
pub fn print(node: &Node, json: bool) -> io::Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if json {
        write_json(&mut out, node)?;
    } else {
        write_text(&mut out, node)?;
    }
    out.flush()
}

// ---------------------------------------------------------------------------
// JSON.

/// Writes `node` as one line of JSON.
pub fn write_json(out: &mut dyn Write, node: &Node) -> io::Result<()> {
    let mut text = String::new();
    json_into(&mut text, node);
    text.push('\n');
    out.write_all(text.as_bytes())
}

fn json_into(out: &mut String, node: &Node) {
    match node {
        Node::Null => out.push_str("null"),
        Node::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Node::UInt(n) => out.push_str(&n.to_string()),
        Node::Int(n) => out.push_str(&n.to_string()),
        Node::Str(s) => json_string(out, s),
        Node::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_into(out, item);
            }
            out.push(']');
        }
        Node::Object(fields) => {
            out.push('{');
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_string(out, k);
                out.push(':');
                json_into(out, v);
            }
            out.push('}');
        }
    }
}

/// A JSON string literal (RFC 8259 escaping: quote, backslash and
/// control characters).
fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

// ---------------------------------------------------------------------------
// Text for people.

/// Writes `node` (an object) as aligned `name  value` rows; nested
/// objects become indented sections, lists of objects become tables.
pub fn write_text(out: &mut dyn Write, node: &Node) -> io::Result<()> {
    let mut text = String::new();
    if let Node::Object(fields) = node {
        text_object(&mut text, fields, 0);
    }
    out.write_all(text.as_bytes())
}

fn label(key: &str) -> String {
    key.replace('_', " ")
}

fn text_object(out: &mut String, fields: &[(String, Node)], indent: usize) {
    let pad = " ".repeat(indent);
    let width = fields
        .iter()
        .filter(|(_, v)| v.is_scalar() || is_scalar_list(v) || is_empty(v))
        .map(|(k, _)| label(k).len())
        .max()
        .unwrap_or(0);
    for (key, value) in fields {
        let name = label(key);
        match value {
            v if v.is_scalar() => {
                out.push_str(&format!("{pad}{name:width$}  {}\n", scalar_text(v)));
            }
            v if is_empty(v) => out.push_str(&format!("{pad}{name:width$}  (none)\n")),
            Node::List(items) if is_scalar_list(value) => {
                let joined: Vec<String> = items.iter().map(scalar_text).collect();
                out.push_str(&format!("{pad}{name:width$}  {}\n", joined.join(", ")));
            }
            Node::List(items) => {
                out.push_str(&format!("{pad}{name}:\n"));
                text_table(out, items, indent + 2);
            }
            Node::Object(inner) => {
                out.push_str(&format!("{pad}{name}:\n"));
                text_object(out, inner, indent + 2);
            }
            _ => {}
        }
    }
}

fn is_empty(v: &Node) -> bool {
    matches!(v, Node::List(items) if items.is_empty())
        || matches!(v, Node::Object(fields) if fields.is_empty())
}

fn is_scalar_list(v: &Node) -> bool {
    matches!(v, Node::List(items) if items.iter().all(Node::is_scalar))
}

fn scalar_text(v: &Node) -> String {
    match v {
        Node::Null => "-".into(),
        Node::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Node::UInt(n) => n.to_string(),
        Node::Int(n) => n.to_string(),
        // Producers escape binary data themselves (`bytes_text`,
        // `escape_key`); only control characters that slipped through are
        // escaped here, so a `\xHH` already written stays as it is.
        Node::Str(s) => s
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
        other => {
            let mut s = String::new();
            json_into(&mut s, other);
            s
        }
    }
}

/// A list of objects as a table: one column per field name (in first-seen
/// order), numbers right-aligned.
fn text_table(out: &mut String, rows: &[Node], indent: usize) {
    let pad = " ".repeat(indent);
    let mut columns: Vec<&str> = Vec::new();
    for row in rows {
        if let Node::Object(fields) = row {
            for (k, _) in fields {
                if !columns.contains(&k.as_str()) {
                    columns.push(k);
                }
            }
        }
    }
    if columns.is_empty() {
        let joined: Vec<String> = rows.iter().map(scalar_text).collect();
        out.push_str(&format!("{pad}{}\n", joined.join(", ")));
        return;
    }
    let cells: Vec<Vec<(String, bool)>> = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|c| match row.get(c) {
                    Some(v) => (scalar_text(v), matches!(v, Node::UInt(_) | Node::Int(_))),
                    None => ("-".into(), false),
                })
                .collect()
        })
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|r| r[i].0.chars().count())
                .chain(std::iter::once(label(c).len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let numeric: Vec<bool> = (0..columns.len())
        .map(|i| cells.iter().all(|r| r[i].1 || r[i].0 == "-"))
        .collect();
    let line = |out: &mut String, texts: Vec<&str>| {
        let mut parts = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            let w = widths[i];
            parts.push(if numeric[i] {
                format!("{t:>w$}")
            } else {
                format!("{t:w$}")
            });
        }
        out.push_str(&format!("{pad}{}\n", parts.join("  ").trim_end()));
    };
    let header: Vec<String> = columns.iter().map(|c| label(c)).collect();
    line(out, header.iter().map(String::as_str).collect());
    for row in &cells {
        line(out, row.iter().map(|(t, _)| t.as_str()).collect());
    }
}

/// How the inspector reports an AOF's torn tail whose log starts at file
/// offset `base`: the offset where the valid data ends, the `torn_tail`
/// field's value, and the problem's text.
pub fn torn_tail(base: u64, torn: &crate::persist::aof::TornTail) -> (u64, Node, String) {
    let at = base + torn.valid_len;
    let node = Node::object()
        .with("offset", at)
        .with("dropped_bytes", torn.dropped_bytes)
        .with("dropped_commands", torn.dropped_commands)
        .with("reason", torn.reason.as_str());
    let text = format!(
        "torn tail at offset {at}: {} ({} bytes, {} complete commands after it)",
        torn.reason, torn.dropped_bytes, torn.dropped_commands
    );
    (at, node, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_quotes_backslashes_and_controls() {
        let node = Node::object().with("k\"", "a\\b\n\u{1}é");
        let mut out = Vec::new();
        write_json(&mut out, &node).expect("writing to a Vec cannot fail");
        assert_eq!(
            String::from_utf8(out).expect("JSON output is UTF-8"),
            "{\"k\\\"\":\"a\\\\b\\n\\u0001é\"}\n"
        );
    }

    #[test]
    fn tables_align_columns() {
        let node = Node::object().with(
            "databases",
            vec![
                Node::object().with("db", 0u64).with("keys", 5u64),
                Node::object().with("db", 15u64).with("keys", 12345u64),
            ],
        );
        let mut out = Vec::new();
        write_text(&mut out, &node).expect("writing to a Vec cannot fail");
        assert_eq!(
            String::from_utf8(out).expect("text output is UTF-8"),
            "databases:\n  db   keys\n   0      5\n  15  12345\n"
        );
    }
}
