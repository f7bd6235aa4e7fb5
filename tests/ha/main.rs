//! High availability and scale-out with the real programs (issue 26):
//! Redis Sentinel (Debian's `redis-sentinel`, 7.0) failing over hozon
//! servers, and twemproxy (Debian's `nutcracker`) sharding over them.
//! Each test starts its own processes on free ports; a missing program
//! fails the test (scripts/test installs both).

mod proxy;
mod sentinel;

pub use testkit::value::{call, info_field, Value};

/// Spawns `command` (output discarded) and waits up to 5 s until
/// something accepts connections on `port`; None when the process exits
/// first or never listens (it is then killed).
pub fn spawn_listening(
    mut command: std::process::Command,
    port: u16,
) -> Option<std::process::Child> {
    let mut child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(child);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}
