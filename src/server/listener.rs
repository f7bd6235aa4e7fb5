//! Client connections over TCP or a Unix-domain socket (`unixsocket`),
//! behind one type so that everything past `accept` treats them alike.
//! A Unix client shows as `addr=<path>:0 laddr=<path>:0` in CLIENT LIST,
//! as Redis shows it, and counts as local for protected mode (Redis's
//! `connIsLocal`).

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};

use mio::event::Source;
use mio::net::{TcpStream, UnixListener, UnixStream};
use mio::{Interest, Registry, Token};

use super::log::{self, Level};
use crate::config::Config;

/// The Unix listener's token (below the clients', beside the TCP
/// listeners' 0.. and the other fixed tokens).
pub(super) const UNIX_TOKEN: usize = super::FIRST_CLIENT_TOKEN - 3;

/// A client's connection.
#[derive(Debug)]
pub enum Stream {
    /// Over TCP.
    Tcp(TcpStream),
    /// Over the Unix-domain socket.
    Unix(UnixStream),
}

impl From<TcpStream> for Stream {
    fn from(s: TcpStream) -> Stream {
        Stream::Tcp(s)
    }
}

impl Stream {
    /// TCP_NODELAY on a TCP connection (nothing to do on a Unix one).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nodelay(on),
            Stream::Unix(_) => Ok(()),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Source for Stream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(r, t, i),
            Stream::Unix(s) => s.register(r, t, i),
        }
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(r, t, i),
            Stream::Unix(s) => s.reregister(r, t, i),
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(r),
            Stream::Unix(s) => s.deregister(r),
        }
    }
}

/// A client's address as Redis prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerAddr {
    /// `ip:port` (`[ip6]:port`).
    Tcp(SocketAddr),
    /// The `unixsocket` path (shown `path:0`).
    Unix(&'static str),
}

impl From<SocketAddr> for PeerAddr {
    fn from(a: SocketAddr) -> PeerAddr {
        PeerAddr::Tcp(a)
    }
}

impl PeerAddr {
    /// The IP address protected mode looks at: a Unix client is local.
    pub fn ip(&self) -> IpAddr {
        match self {
            PeerAddr::Tcp(a) => a.ip(),
            PeerAddr::Unix(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        }
    }
}

impl std::fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerAddr::Tcp(a) => write!(f, "{a}"),
            PeerAddr::Unix(path) => write!(f, "{path}:0"),
        }
    }
}

/// The Unix-domain listener (`unixsocket`) and its path, removed when
/// the server shuts down.
pub struct UnixSocket {
    pub(super) listener: UnixListener,
    /// The path, kept for the life of the process (clients' addresses
    /// borrow it).
    pub path: &'static str,
}

/// Opens the Unix-domain listener `config` asks for, as Redis's
/// `anetUnixServer` does: an old file at the path is removed first,
/// permissions set when `unixsocketperm` is not 0, `tcp-backlog` as the
/// queue length. Ok(None) when `unixsocket` is not set.
pub fn open_unix(config: &Config) -> Result<Option<UnixSocket>, String> {
    let path = &config.ops.unixsocket;
    if path.is_empty() {
        return Ok(None);
    }
    // sockaddr_un's sun_path holds 108 bytes, the last one a NUL.
    const SUN_PATH_LEN: usize = 108;
    if path.len() > SUN_PATH_LEN - 1 {
        return Err(format!(
            "Failed opening Unix socket: unix socket path too long ({}), must be under {SUN_PATH_LEN}",
            path.len()
        ));
    }
    let _ = std::fs::remove_file(path);
    let failed = |e: io::Error| {
        format!(
            "Failed opening Unix socket: {}",
            crate::config::os_error_text(&e)
        )
    };
    let listener = UnixListener::bind(path).map_err(failed)?;
    set_backlog(listener.as_raw_fd(), config.ops.tcp_backlog);
    if config.ops.unixsocketperm != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            path,
            std::fs::Permissions::from_mode(config.ops.unixsocketperm),
        )
        .map_err(failed)?;
    }
    Ok(Some(UnixSocket {
        listener,
        path: Box::leak(path.clone().into_boxed_str()),
    }))
}

impl UnixSocket {
    /// Registers the listener under [`UNIX_TOKEN`].
    pub(super) fn register(&mut self, registry: &Registry) -> io::Result<()> {
        registry.register(&mut self.listener, Token(UNIX_TOKEN), Interest::READABLE)
    }

    /// Accepts one waiting connection, if any.
    pub(super) fn accept(&self) -> io::Result<(Stream, PeerAddr)> {
        let (stream, _) = self.listener.accept()?;
        Ok((Stream::Unix(stream), PeerAddr::Unix(self.path)))
    }

    /// Removes the socket file (Redis's `closeListeningSockets` at
    /// shutdown), with Redis's log lines.
    pub(super) fn remove_file(&self) {
        log::log(Level::Notice, "Removing the unix socket file.");
        if let Err(e) = std::fs::remove_file(self.path) {
            log::log(
                Level::Warning,
                &format!(
                    "Error removing the unix socket file: {}",
                    crate::config::os_error_text(&e)
                ),
            );
        }
    }
}

/// Sets a listening socket's accept queue length (`tcp-backlog`): listen(2)
/// again on a listening socket changes it on Linux.
pub fn set_backlog(fd: RawFd, backlog: u32) {
    let backlog = backlog.min(i32::MAX as u32) as i32;
    // SAFETY: listen(2) on a descriptor we own; it changes no memory.
    unsafe {
        libc::listen(fd, backlog);
    }
}

/// Redis's `checkTcpBacklogSettings`: a warning when the kernel caps the
/// backlog below `tcp-backlog`.
pub fn check_backlog_setting(config: &Config) {
    let Ok(text) = std::fs::read_to_string("/proc/sys/net/core/somaxconn") else {
        return;
    };
    let Ok(somaxconn) = text.trim().parse::<u64>() else {
        return;
    };
    if somaxconn < u64::from(config.ops.tcp_backlog) {
        log::log(
            Level::Warning,
            &format!(
                "WARNING: The TCP backlog setting of {} cannot be enforced because /proc/sys/net/core/somaxconn is set to the lower value of {somaxconn}.",
                config.ops.tcp_backlog
            ),
        );
    }
}
