//! A small RESP2 client whose failures are values (the server may be
//! killed under it at any moment), and parsed replies.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use hozon::resp::reply_frame::frame_len;

/// A parsed RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum V {
    /// `+text`
    Simple(String),
    /// `-text`
    Err(String),
    /// `:n`
    Int(i64),
    /// `$n` bytes
    Bulk(Vec<u8>),
    /// `$-1`
    Nil,
    /// `*n` elements
    Arr(Vec<V>),
    /// `*-1`
    NilArr,
}

impl V {
    /// The bytes of a bulk (or simple) reply.
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            V::Bulk(b) => b.clone(),
            V::Simple(s) => s.as_bytes().to_vec(),
            other => panic!("not a bulk reply: {other:?}"),
        }
    }

    /// The integer of an `:n` reply.
    pub fn int(&self) -> i64 {
        match self {
            V::Int(n) => *n,
            other => panic!("not an integer reply: {other:?}"),
        }
    }

    /// The elements of an array reply (`*-1` is empty).
    pub fn arr(&self) -> &[V] {
        match self {
            V::Arr(items) => items,
            V::NilArr => &[],
            other => panic!("not an array reply: {other:?}"),
        }
    }
}

fn line(buf: &[u8], pos: &mut usize) -> String {
    let end = buf[*pos..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("complete frame")
        + *pos;
    let text = String::from_utf8_lossy(&buf[*pos..end]).into_owned();
    *pos = end + 2;
    text
}

/// Parses one complete frame at `pos`.
fn parse(buf: &[u8], pos: &mut usize) -> V {
    let kind = buf[*pos];
    *pos += 1;
    let text = line(buf, pos);
    match kind {
        b'+' => V::Simple(text),
        b'-' => V::Err(text),
        b':' => V::Int(text.parse().expect("integer reply")),
        b'$' => {
            let n: i64 = text.parse().expect("bulk length");
            if n < 0 {
                return V::Nil;
            }
            let bytes = buf[*pos..*pos + n as usize].to_vec();
            *pos += n as usize + 2;
            V::Bulk(bytes)
        }
        b'*' => {
            let n: i64 = text.parse().expect("array length");
            if n < 0 {
                return V::NilArr;
            }
            V::Arr((0..n).map(|_| parse(buf, pos)).collect())
        }
        other => panic!("unexpected RESP2 type byte {other:?}"),
    }
}

/// Encodes a command as a RESP multibulk request.
pub fn encode(args: &[Vec<u8>], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Builds a command from words.
pub fn cmd(words: &[&[u8]]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.to_vec()).collect()
}

/// A connection to 127.0.0.1.
pub struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    /// Connects; replies must arrive within `timeout`.
    pub fn connect(port: u16, timeout: Duration) -> io::Result<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream,
            buf: Vec::new(),
        })
    }

    /// Changes how long a reply may take.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.stream
            .set_read_timeout(Some(timeout))
            .expect("set the read timeout");
    }

    /// Sends commands in one write (pipelined).
    pub fn send(&mut self, cmds: &[Vec<Vec<u8>>]) -> io::Result<()> {
        let mut out = Vec::new();
        for c in cmds {
            encode(c, &mut out);
        }
        self.stream.write_all(&out)
    }

    /// Reads one reply.
    pub fn read(&mut self) -> io::Result<V> {
        loop {
            match frame_len(&self.buf) {
                Ok(Some(n)) => {
                    let mut pos = 0;
                    let v = parse(&self.buf[..n], &mut pos);
                    self.buf.drain(..n);
                    return Ok(v);
                }
                Ok(None) => {}
                Err(e) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("malformed reply: {e}"),
                    ))
                }
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk)? {
                0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed")),
                n => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Sends one command and reads its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> io::Result<V> {
        self.send(&[cmd(args)])?;
        self.read()
    }

    /// Like [`Client::call`], panicking on an I/O error (for a server that
    /// is not being killed).
    pub fn must(&mut self, args: &[&[u8]]) -> V {
        self.call(args).unwrap_or_else(|e| {
            panic!(
                "{:?}: {e}",
                args.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
            )
        })
    }
}
