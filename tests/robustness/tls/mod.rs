//! TLS (docs/security.md, "TLS"), checked side by side with Debian's
//! redis-server (built with TLS) where Redis behaves the same, with real
//! clients (redis-cli, redis-benchmark, redis-py) and with a rustls
//! client this suite drives byte by byte.
//!
//! The certificates are made at test time with openssl by the commands
//! docs/security.md shows (`testkit::certs`); without openssl the tests
//! fail.

#![allow(dead_code)] // each test module uses a different part

mod abuse;
mod clients;
mod settings;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use testkit::certs::Certs;
use testkit::harness::{self, ServerProcess};

/// A server (redis-server or hozon-server) with a plain port (the
/// harness's readiness check uses it) and a TLS port.
pub struct TlsServer {
    pub process: ServerProcess,
    pub tls_port: u16,
    pub name: &'static str,
}

impl TlsServer {
    /// The plain port.
    pub fn port(&self) -> u16 {
        self.process.port
    }
}

/// Starts `binary` with TLS on a free port, the given certificates and
/// `extra` flags; a few tries in case a port was taken meanwhile.
pub fn start_tls(binary: &str, name: &'static str, certs: &Certs, extra: &[&str]) -> TlsServer {
    for _ in 0..5 {
        let tls_port = harness::unused_port();
        let mut args = certs.server_args(tls_port);
        args.extend(extra.iter().map(|s| s.to_string()));
        if binary.ends_with("redis-server") {
            args.extend(["--daemonize", "no", "--loglevel", "warning"].map(String::from));
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        if let Some(process) = harness::start_on_port(binary, name, harness::unused_port(), &refs) {
            return TlsServer {
                process,
                tls_port,
                name,
            };
        }
    }
    panic!("could not start {name} with TLS");
}

/// A redis-server and a hozon-server with the same TLS settings.
pub fn start_both(certs: &Certs, extra: &[&str]) -> [TlsServer; 2] {
    [
        start_tls(&harness::redis_server_path(), "redis-server", certs, extra),
        start_tls(harness::hozon_server_path(), "hozon-server", certs, extra),
    ]
}

/// How a [`TlsClient`] presents itself.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// No certificate.
    Anonymous,
    /// `client.crt`, signed by the server's CA.
    Client,
    /// `stranger.crt`, signed by another CA.
    Stranger,
}

/// Which TLS versions a [`TlsClient`] offers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Versions {
    /// 1.2 and 1.3.
    Both,
    /// 1.2 only.
    Tls12,
    /// 1.3 only.
    Tls13,
}

/// A rustls client configuration that trusts the test CA.
pub fn client_config(
    certs: &Certs,
    who: Identity,
    versions: Versions,
) -> Arc<rustls::ClientConfig> {
    #[allow(deprecated)] // ring's provider: what the server uses too
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(certs.path("ca.crt")).expect("ca.crt"))
        .expect("the CA is a valid trust anchor");
    let versions: &[&rustls::SupportedProtocolVersion] = match versions {
        Versions::Both => &[&rustls::version::TLS13, &rustls::version::TLS12],
        Versions::Tls12 => &[&rustls::version::TLS12],
        Versions::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .expect("protocol versions")
        .with_root_certificates(roots);
    let config = match who {
        Identity::Anonymous => builder.with_no_client_auth(),
        Identity::Client | Identity::Stranger => {
            let name = if who == Identity::Client {
                "client"
            } else {
                "stranger"
            };
            let chain = CertificateDer::pem_file_iter(certs.path(&format!("{name}.crt")))
                .expect("client certificate")
                .collect::<Result<Vec<_>, _>>()
                .expect("client certificate");
            let key = PrivateKeyDer::from_pem_file(certs.path(&format!("{name}.key")))
                .expect("client key");
            builder
                .with_client_auth_cert(chain, key)
                .expect("client certificate and key")
        }
    };
    Arc::new(config)
}

/// A blocking TLS client connection (rustls over a std TcpStream).
pub struct TlsClient {
    pub stream: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

impl TlsClient {
    /// Connects to 127.0.0.1:`port` and completes the handshake; Err is
    /// the reason it failed (a refused certificate, a closed socket).
    pub fn connect(port: u16, config: Arc<rustls::ClientConfig>) -> Result<TlsClient, String> {
        let sock = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        TlsClient::over(sock, config)
    }

    /// As [`TlsClient::connect`], over a socket already connected.
    pub fn over(sock: TcpStream, config: Arc<rustls::ClientConfig>) -> Result<TlsClient, String> {
        sock.set_nodelay(true).expect("nodelay");
        sock.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("read timeout");
        let name = ServerName::try_from("localhost").expect("a name");
        let conn = rustls::ClientConnection::new(config, name).map_err(|e| e.to_string())?;
        let mut stream = rustls::StreamOwned::new(conn, sock);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .map_err(|e| e.to_string())?;
        }
        // TLS 1.3: the server checks the client's certificate after the
        // client's handshake ends, so a refusal shows on the first
        // exchange. A PING proves the session.
        let mut client = TlsClient {
            stream,
            buf: Vec::new(),
        };
        client
            .stream
            .write_all(b"*1\r\n$4\r\nPING\r\n")
            .map_err(|e| e.to_string())?;
        match client.read_reply_result() {
            Ok(reply) if reply == b"+PONG\r\n" => Ok(client),
            Ok(reply) => Err(format!("PING answered {}", harness::show(&reply))),
            Err(e) => Err(e),
        }
    }

    /// Completes a handshake with 127.0.0.1:`port`, sends nothing, and
    /// returns what the server says before it closes (read for up to 10
    /// seconds): a refusal's text.
    pub fn unprompted(port: u16, config: Arc<rustls::ClientConfig>) -> Result<Vec<u8>, String> {
        let sock = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        TlsClient::unprompted_over(sock, config)
    }

    /// As [`TlsClient::unprompted`], over a socket already connected.
    pub fn unprompted_over(
        sock: TcpStream,
        config: Arc<rustls::ClientConfig>,
    ) -> Result<Vec<u8>, String> {
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        let name = ServerName::try_from("localhost").expect("a name");
        let conn = rustls::ClientConnection::new(config, name).map_err(|e| e.to_string())?;
        let mut stream = rustls::StreamOwned::new(conn, sock);
        let mut said = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => return Ok(said),
                Ok(n) => said.extend_from_slice(&chunk[..n]),
                Err(e) if said.is_empty() => return Err(e.to_string()),
                Err(_) => return Ok(said),
            }
        }
    }

    /// Sends a command and reads its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(&harness::encode_command(args));
        self.read_reply()
    }

    /// Writes raw bytes.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write over TLS");
        self.stream.flush().expect("flush over TLS");
    }

    /// Reads one whole RESP reply.
    pub fn read_reply(&mut self) -> Vec<u8> {
        self.read_reply_result().expect("a reply over TLS")
    }

    fn read_reply_result(&mut self) -> Result<Vec<u8>, String> {
        self.read_reply_paced(64 * 1024, Duration::ZERO)
    }

    /// Reads one whole RESP reply `chunk` bytes at a time with a `pause`
    /// after each read: a slow reader, whose socket stays full.
    pub fn read_reply_paced(&mut self, chunk: usize, pause: Duration) -> Result<Vec<u8>, String> {
        let mut chunk = vec![0u8; chunk];
        loop {
            if let Some(n) = reply_len(&self.buf) {
                return Ok(self.buf.drain(..n).collect());
            }
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err("connection closed".into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// The certificate the server showed, DER-encoded.
    pub fn server_cert(&self) -> Vec<u8> {
        self.stream
            .conn
            .peer_certificates()
            .expect("a server certificate")[0]
            .to_vec()
    }
}

/// The length of the first complete RESP2 reply in `buf`, if there is one.
pub fn reply_len(buf: &[u8]) -> Option<usize> {
    fn line_end(buf: &[u8], from: usize) -> Option<usize> {
        buf[from..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .map(|p| from + p + 2)
    }
    fn one(buf: &[u8], at: usize) -> Option<usize> {
        let end = line_end(buf, at)?;
        let head = std::str::from_utf8(&buf[at + 1..end - 2]).ok()?;
        match buf.get(at)? {
            b'+' | b'-' | b':' => Some(end),
            b'$' => {
                let len: i64 = head.parse().ok()?;
                if len < 0 {
                    return Some(end);
                }
                let total = end + len as usize + 2;
                (buf.len() >= total).then_some(total)
            }
            b'*' => {
                let count: i64 = head.parse().ok()?;
                let mut pos = end;
                for _ in 0..count.max(0) {
                    pos = one(buf, pos)?;
                }
                Some(pos)
            }
            _ => None,
        }
    }
    if buf.is_empty() {
        return None;
    }
    one(buf, 0)
}

/// Runs redis-cli over TLS against `port` with `tls_args` (certificate
/// flags) and `command`: (succeeded, stdout, stderr).
pub fn redis_cli(port: u16, tls_args: &[String], command: &[&str]) -> (bool, String, String) {
    let out = Command::new("redis-cli")
        .args(["--tls", "-p", &port.to_string()])
        .args(tls_args)
        .args(command)
        .output()
        .expect("run redis-cli (Debian's redis-tools)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The first certificate of the PEM file `name` in `certs`, DER-encoded.
pub fn der(certs: &Certs, name: &str) -> Vec<u8> {
    CertificateDer::from_pem_file(certs.path(name))
        .expect("a certificate")
        .to_vec()
}

/// A TCP connection to 127.0.0.1:`port` whose receive buffer is `bytes`
/// (set before connecting, so the window stays small): the server's side
/// of it fills after a few KiB.
pub fn connect_with_small_receive_buffer(port: u16, bytes: i32) -> TcpStream {
    use std::os::fd::FromRawFd;
    let target = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: plain socket calls on a descriptor this function owns; the
    // structs live across the calls; on success the descriptor goes to
    // TcpStream, which closes it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let set = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
        assert_eq!(set, 0, "SO_RCVBUF: {}", std::io::Error::last_os_error());
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let connected = libc::connect(fd, (&target as *const libc::sockaddr_in).cast(), len);
        assert_eq!(connected, 0, "connect: {}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    }
}
