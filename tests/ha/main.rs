//! High availability and scale-out with the real programs (issue 26):
//! Redis Sentinel (Debian's `redis-sentinel`, 7.0) failing over hozon
//! servers, and twemproxy (Debian's `nutcracker`) sharding over them.
//! Each test starts its own processes on free ports; a missing program
//! fails the test (scripts/test installs both).

mod proxy;
mod sentinel;

use testkit::harness::Conn;
pub use testkit::value::Value;

/// Sends a command and decodes its reply.
pub fn call(conn: &mut Conn, args: &[&str]) -> Value {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let raw = conn.call(&args);
    testkit::value::decode(&raw)
}

/// One INFO field.
pub fn info_field(conn: &mut Conn, section: &str, field: &str) -> Option<String> {
    let Value::Bulk(text) = call(conn, &["INFO", section]) else {
        panic!("INFO is not a bulk string");
    };
    let text = String::from_utf8_lossy(&text).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
}
