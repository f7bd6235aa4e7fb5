//! A replica played by the test over raw TCP (the handshake a Redis 7.0
//! replica sends, the payload in either form, the stream's raw bytes), and
//! redis-check-rdb as a payload checker.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use crate::harness::{show, PATIENCE};

/// The raw connection of a fake replica.
pub struct FakeReplica {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl FakeReplica {
    pub fn connect(port: u16) -> FakeReplica {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.set_read_timeout(Some(PATIENCE)).expect("timeout");
        FakeReplica {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends a command (RESP multibulk).
    pub fn send(&mut self, words: &[&str]) {
        let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        self.send_raw(&testkit::harness::encode_command(&args));
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to the master");
    }

    fn fill(&mut self) {
        let mut chunk = [0u8; 65536];
        match self.stream.read(&mut chunk) {
            Ok(0) => panic!("the master closed; unread: {}", show(&self.buf)),
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("reading from the master: {e}; unread: {}", show(&self.buf)),
        }
    }

    /// One `\r\n` line, after any bare `\n` keepalives.
    pub fn line(&mut self) -> String {
        loop {
            while self.buf.first() == Some(&b'\n') {
                self.buf.remove(0);
            }
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..end + 2).collect();
                return String::from_utf8_lossy(&line[..end]).into_owned();
            }
            self.fill();
        }
    }

    /// Exactly `n` bytes.
    pub fn exact(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            self.fill();
        }
        self.buf.drain(..n).collect()
    }

    /// The bytes before `mark` (which is consumed).
    pub fn until_mark(&mut self, mark: &[u8]) -> Vec<u8> {
        loop {
            if let Some(at) = self.buf.windows(mark.len()).position(|w| w == mark) {
                let payload: Vec<u8> = self.buf.drain(..at).collect();
                self.buf.drain(..mark.len());
                return payload;
            }
            self.fill();
        }
    }

    /// Everything that arrives within `wait` (the stream so far). The
    /// master closing the connection is a failure here.
    pub fn take_available(&mut self, wait: Duration) -> Vec<u8> {
        self.stream.set_read_timeout(Some(wait)).expect("timeout");
        let mut chunk = [0u8; 65536];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!(
                    "the master closed the replica connection; unread: {}",
                    show(&self.buf)
                ),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    panic!(
                        "the master reset the replica connection; unread: {}",
                        show(&self.buf)
                    )
                }
                Err(_) => break, // nothing more within `wait`
            }
        }
        self.stream
            .set_read_timeout(Some(PATIENCE))
            .expect("timeout");
        std::mem::take(&mut self.buf)
    }

    /// Everything until the master closes the connection (which it must
    /// within [`PATIENCE`]).
    pub fn until_closed(&mut self) -> Vec<u8> {
        let mut chunk = [0u8; 65536];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return std::mem::take(&mut self.buf),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return std::mem::take(&mut self.buf)
                }
                Err(e) => panic!(
                    "the master did not close the connection ({e}); got: {}",
                    show(&self.buf)
                ),
            }
        }
    }

    /// What a Redis 7.0 replica sends before PSYNC, with the replies.
    pub fn handshake(&mut self, listening_port: u16) {
        self.send(&["PING"]);
        assert_eq!(self.line(), "+PONG");
        self.send(&["REPLCONF", "listening-port", &listening_port.to_string()]);
        self.send(&["REPLCONF", "capa", "eof", "capa", "psync2"]);
        assert_eq!(self.line(), "+OK");
        assert_eq!(self.line(), "+OK");
    }

    /// The handshake, `PSYNC ? -1`, the payload and one ACK; returns the
    /// `+FULLRESYNC` offset.
    pub fn attach(&mut self, listening_port: u16) -> i64 {
        self.handshake(listening_port);
        self.send(&["PSYNC", "?", "-1"]);
        let line = self.line();
        let offset: i64 = line
            .strip_prefix("+FULLRESYNC ")
            .and_then(|rest| rest.split(' ').nth(1))
            .and_then(|o| o.parse().ok())
            .unwrap_or_else(|| panic!("not +FULLRESYNC <id> <offset>: {line:?}"));
        self.payload();
        self.send(&["REPLCONF", "ACK", &offset.to_string()]);
        offset
    }

    /// Reads the `$` line and the payload in either form; returns the
    /// payload and whether it was the `$EOF:` form.
    pub fn payload(&mut self) -> (Vec<u8>, bool) {
        let line = self.line();
        if let Some(mark) = line.strip_prefix("$EOF:") {
            assert_eq!(mark.len(), 40, "EOF mark {mark:?}");
            (self.until_mark(mark.as_bytes()), true)
        } else {
            let n: usize = line
                .strip_prefix('$')
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("not a payload line: {line:?}"));
            (self.exact(n), false)
        }
    }
}

/// The complete commands (RESP multibulks) at the start of `bytes`, and
/// how many bytes they take (a unit cut by a read is left over).
pub fn split_units(bytes: &[u8]) -> (Vec<Vec<String>>, usize) {
    fn line(bytes: &[u8], pos: &mut usize) -> Option<String> {
        let end = bytes.get(*pos..)?.windows(2).position(|w| w == b"\r\n")? + *pos;
        let l = String::from_utf8_lossy(&bytes[*pos..end]).into_owned();
        *pos = end + 2;
        Some(l)
    }
    fn unit(bytes: &[u8], pos: &mut usize) -> Option<Vec<String>> {
        let head = line(bytes, pos)?;
        let n: usize = head
            .strip_prefix('*')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("stream unit header {head:?}"));
        let mut words = Vec::new();
        for _ in 0..n {
            let len: usize = line(bytes, pos)?[1..].parse().expect("bulk length");
            let word = bytes.get(*pos..*pos + len)?;
            words.push(String::from_utf8_lossy(word).into_owned());
            bytes.get(*pos + len..*pos + len + 2)?;
            *pos += len + 2;
        }
        Some(words)
    }
    let mut units = Vec::new();
    let mut done = 0;
    loop {
        let mut pos = done;
        match unit(bytes, &mut pos) {
            Some(u) => {
                units.push(u);
                done = pos;
            }
            None => return (units, done),
        }
    }
}

/// `bytes` as commands; all of it must be complete units.
pub fn parse_commands(bytes: &[u8]) -> Vec<Vec<String>> {
    let (units, used) = split_units(bytes);
    assert_eq!(used, bytes.len(), "incomplete stream: {}", show(bytes));
    units
}

/// Runs redis-check-rdb on `payload`; returns its output (it must pass).
pub fn check_rdb(payload: &[u8]) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("payload.rdb");
    std::fs::write(&file, payload).expect("write payload");
    let out = Command::new("redis-check-rdb")
        .arg(&file)
        .output()
        .expect("run redis-check-rdb (apt-get install redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && text.contains("RDB looks OK"),
        "redis-check-rdb refused the payload:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// An AUX field as redis-check-rdb prints it.
pub fn aux(check_output: &str, name: &str) -> String {
    let prefix = format!("AUX FIELD {name} = '");
    let line = check_output
        .lines()
        .find_map(|l| l.split_once(&prefix).map(|(_, v)| v.to_string()))
        .unwrap_or_else(|| panic!("no AUX field {name}:\n{check_output}"));
    line.trim_end_matches('\'').to_string()
}
