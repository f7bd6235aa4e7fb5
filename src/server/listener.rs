//! The listening sockets (TCP on `port`, TLS on `tls-port`, the
//! Unix-domain socket `unixsocket`) and the client connections they
//! accept, behind one type so that everything past `accept` treats them
//! alike. A Unix client shows as `addr=<path>:0 laddr=<path>:0` in CLIENT
//! LIST, as Redis shows it, and counts as local for protected mode
//! (Redis's `connIsLocal`).

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};

use mio::event::Source;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Interest, Registry, Token};

use super::log::{self, Level};
use super::tls::{TlsContext, TlsStream};
use crate::config::tls::TlsSettings;
use crate::config::Config;

/// The Unix listener's token (below the clients', beside the TCP
/// listeners' 0.. and the other fixed tokens).
pub(super) const UNIX_TOKEN: usize = super::FIRST_CLIENT_TOKEN - 3;
/// The first TLS listener's token (TCP listeners take 0.., far fewer
/// than this: Redis allows 16 `bind` addresses).
pub(super) const TLS_TOKEN: usize = 512;

/// A client's connection.
#[derive(Debug)]
pub enum Stream {
    /// Over TCP.
    Tcp(TcpStream),
    /// Over the Unix-domain socket.
    Unix(UnixStream),
    /// TLS over TCP.
    Tls(Box<TlsStream>),
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
            Stream::Tls(s) => s.sock().set_nodelay(on),
        }
    }

    /// Sends the encrypted output TLS still holds: Ok(true) when none is
    /// left (always on a plain connection), Ok(false) when the socket is
    /// full (the client stays writable until it drains).
    pub fn flush_tls(&mut self) -> io::Result<bool> {
        match self {
            Stream::Tls(s) => s.flush_tls(),
            _ => Ok(true),
        }
    }

    /// Whether TLS holds output not yet sent, or a handshake not yet
    /// over (a closing client stays until it is sent).
    pub fn tls_unsent(&self) -> bool {
        match self {
            Stream::Tls(s) => s.unsent(),
            _ => false,
        }
    }

    /// Whether this is a TLS connection.
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tls(s) => s.sock().as_raw_fd(),
        }
    }
}

impl Source for Stream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(r, t, i),
            Stream::Unix(s) => s.register(r, t, i),
            Stream::Tls(s) => s.sock_mut().register(r, t, i),
        }
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(r, t, i),
            Stream::Unix(s) => s.reregister(r, t, i),
            Stream::Tls(s) => s.sock_mut().reregister(r, t, i),
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(r),
            Stream::Unix(s) => s.deregister(r),
            Stream::Tls(s) => s.sock_mut().deregister(r),
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

// ---------------------------------------------------------------------------
// Listening sockets

/// The socket addresses one `bind` entry stands for: `*` is every IPv4
/// interface, `::*` every IPv6 one; a leading `-` makes the entry optional
/// (skipped when unavailable). Returns (optional, addresses).
fn bind_entry_addrs(entry: &str, port: u16) -> (bool, std::io::Result<Vec<SocketAddr>>) {
    let (optional, host) = match entry.strip_prefix('-') {
        Some(h) => (true, h),
        None => (false, entry),
    };
    let addrs = match host {
        "*" => Ok(vec![SocketAddr::new(
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            port,
        )]),
        "::*" => Ok(vec![SocketAddr::new(
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            port,
        )]),
        _ => (host, port).to_socket_addrs().map(|a| a.collect()),
    };
    (optional, addrs)
}

/// The listening sockets and the TLS configuration new TLS connections
/// get.
pub struct Listeners {
    /// On `port`, tokens 0...
    tcp: Vec<TcpListener>,
    /// On `tls-port`, tokens [`TLS_TOKEN`]...
    tls: Vec<TcpListener>,
    /// Built from the `tls-*` settings while TLS is on.
    tls_ctx: Option<TlsContext>,
    /// `unixsocket`, token [`UNIX_TOKEN`].
    pub(super) unix: Option<UnixSocket>,
}

/// The TCP port to listen on: none when `port` is 0 and the Unix socket
/// or TLS serves instead (Redis's `port 0`); else `port` (0 in tests
/// picks a free one).
fn tcp_port(config: &Config) -> Option<u16> {
    let other = !config.ops.unixsocket.is_empty() || config.tls.port != 0;
    (config.port != 0 || !other).then_some(config.port)
}

/// The TLS port to listen on, if any.
fn tls_port(config: &Config) -> Option<u16> {
    (config.tls.port != 0).then_some(config.tls.port)
}

impl Listeners {
    /// Opens and registers what `config` asks for; Err is the reason the
    /// server cannot start.
    pub fn open(config: &Config, registry: &Registry) -> Result<Listeners, String> {
        let tls_ctx = if config.tls.enabled() {
            let ctx = TlsContext::build(config).map_err(|e| {
                log::log(Level::Warning, &e);
                format!("Failed to configure TLS ({e}). Check logs for more info.")
            })?;
            Some(ctx)
        } else {
            None
        };
        let mut listeners = Listeners {
            tcp: open_port(config, tcp_port(config), "TCP")?,
            tls: open_port(config, tls_port(config), "TLS")?,
            tls_ctx,
            unix: open_unix(config)?,
        };
        let registering = |e: io::Error| format!("Registering a listening socket: {e}");
        register(registry, &mut listeners.tcp, 0).map_err(registering)?;
        register(registry, &mut listeners.tls, TLS_TOKEN).map_err(registering)?;
        if let Some(u) = listeners.unix.as_mut() {
            registry
                .register(&mut u.listener, Token(UNIX_TOKEN), Interest::READABLE)
                .map_err(registering)?;
        }
        Ok(listeners)
    }

    /// The TCP addresses bound (useful with port 0).
    pub fn tcp_addrs(&self) -> Vec<SocketAddr> {
        self.tcp
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// The TLS addresses bound.
    pub fn tls_addrs(&self) -> Vec<SocketAddr> {
        self.tls
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// Whether any TCP or TLS listener is open.
    pub fn has_network(&self) -> bool {
        !self.tcp.is_empty() || !self.tls.is_empty()
    }

    /// The TLS configuration in force (a replica's master link uses it
    /// under `tls-replication yes`).
    pub fn tls_context(&self) -> Option<&TlsContext> {
        self.tls_ctx.as_ref()
    }

    /// The tokens of every open listener.
    pub(super) fn tokens(&self) -> Vec<usize> {
        let mut tokens: Vec<usize> = (0..self.tcp.len()).collect();
        tokens.extend((0..self.tls.len()).map(|i| TLS_TOKEN + i));
        if self.unix.is_some() {
            tokens.push(UNIX_TOKEN);
        }
        tokens
    }

    /// Accepts one waiting connection on the listener of `token`; None
    /// when there is no such listener (CONFIG SET port/bind may have
    /// replaced the listeners since the event was reported).
    pub(super) fn accept(&self, token: usize) -> Option<io::Result<(Stream, PeerAddr)>> {
        if token == UNIX_TOKEN {
            return self.unix.as_ref().map(|u| u.accept());
        }
        if token >= TLS_TOKEN {
            let listener = self.tls.get(token - TLS_TOKEN)?;
            let ctx = self.tls_ctx.as_ref()?;
            return Some(listener.accept().and_then(|(sock, addr)| {
                let stream = ctx.accept(sock)?;
                Ok((Stream::Tls(Box::new(stream)), addr.into()))
            }));
        }
        let listener = self.tcp.get(token)?;
        Some(listener.accept().map(|(s, a)| (s.into(), a.into())))
    }

    /// Applies CONFIG SET of `port`, `bind` and the `tls-*` settings
    /// (Redis's `changeBindAddr`, `applyTLSPort`, `applyTlsCfg`): the TLS
    /// configuration is built first, so a failure changes nothing; a
    /// listener that cannot be opened leaves the old ones.
    pub(super) fn apply_config(
        &mut self,
        registry: &Registry,
        old: &Config,
        new: &Config,
    ) -> Result<(), String> {
        let mut built = None;
        if new.tls.enabled() && (self.tls_ctx.is_none() || TlsSettings::rebuild_needed(old, new)) {
            match TlsContext::build(new) {
                Ok(ctx) => built = Some(ctx),
                Err(e) => {
                    log::log(Level::Warning, &e);
                    return Err("Unable to update TLS configuration. Check server logs.".into());
                }
            }
        }
        if tcp_port(old) != tcp_port(new) || old.bind != new.bind {
            rebind(&mut self.tcp, registry, old, new, tcp_port, 0, "TCP")?;
        }
        if tls_port(old) != tls_port(new) || (old.bind != new.bind && tls_port(new).is_some()) {
            rebind(
                &mut self.tls,
                registry,
                old,
                new,
                tls_port,
                TLS_TOKEN,
                "TLS",
            )?;
        }
        if !new.tls.enabled() {
            self.tls_ctx = None;
        } else if built.is_some() {
            self.tls_ctx = built;
        }
        Ok(())
    }
}

/// Opens the listening sockets for `port` (Redis's `listenToPort`):
/// every `bind` entry; with no entry, every interface (`*` and the
/// optional `-::*`). No port: none.
fn open_port(config: &Config, port: Option<u16>, kind: &str) -> Result<Vec<TcpListener>, String> {
    let Some(port) = port else {
        return Ok(Vec::new());
    };
    let defaults = ["*".to_string(), "-::*".to_string()];
    let entries: &[String] = if config.bind.is_empty() {
        &defaults
    } else {
        &config.bind
    };
    let mut listeners = Vec::new();
    for entry in entries {
        let (optional, addrs) = bind_entry_addrs(entry, port);
        let addrs = match addrs {
            Ok(a) => a,
            Err(e) if optional => {
                log::log(
                    Level::Warning,
                    &format!("Skipping bind address {entry}: {e}"),
                );
                continue;
            }
            Err(e) => return Err(format!("Could not resolve bind address {entry}: {e}")),
        };
        for addr in addrs {
            match TcpListener::bind(addr) {
                Ok(l) => {
                    set_backlog(l.as_raw_fd(), config.ops.tcp_backlog);
                    listeners.push(l)
                }
                Err(e) if optional => {
                    log::log(
                        Level::Warning,
                        &format!("Could not bind {addr} (optional): {e}"),
                    );
                }
                Err(e) => {
                    return Err(format!(
                        "Warning: Could not create server TCP listening socket {addr}: {}",
                        crate::config::os_error_text(&e)
                    ))
                }
            }
        }
    }
    if listeners.is_empty() {
        return Err(format!(
            "Failed listening on port {port} ({kind}): no address to listen on (bind)"
        ));
    }
    Ok(listeners)
}

/// Registers `listeners` under tokens `first`...
fn register(registry: &Registry, listeners: &mut [TcpListener], first: usize) -> io::Result<()> {
    for (i, l) in listeners.iter_mut().enumerate() {
        registry.register(l, Token(first + i), Interest::READABLE)?;
    }
    Ok(())
}

/// Replaces one kind of listening sockets after CONFIG SET. The old ones
/// close first (the new set may reuse their addresses); if the new ones
/// cannot be opened, the old configuration is opened again and the change
/// is refused, as Redis's `changeBindAddr` does.
fn rebind(
    listeners: &mut Vec<TcpListener>,
    registry: &Registry,
    old: &Config,
    new: &Config,
    port_of: fn(&Config) -> Option<u16>,
    first_token: usize,
    kind: &str,
) -> Result<(), String> {
    for l in listeners.iter_mut() {
        let _ = registry.deregister(l);
    }
    listeners.clear();
    let (opened, result) = match open_port(new, port_of(new), kind) {
        Ok(l) => (l, Ok(())),
        Err(e) => {
            log::log(Level::Warning, &e);
            let restored = open_port(old, port_of(old), kind).unwrap_or_else(|e| {
                log::log(
                    Level::Warning,
                    &format!("Failed to restore the old listening sockets: {e}"),
                );
                Vec::new()
            });
            let why = if port_of(old) != port_of(new) {
                "Unable to listen on this port. Check server logs."
            } else {
                "Failed to bind to specified addresses."
            };
            (restored, Err(why.to_string()))
        }
    };
    *listeners = opened;
    if let Err(e) = register(registry, listeners, first_token) {
        log::log(
            Level::Warning,
            &format!("Registering listening sockets: {e}"),
        );
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_entries() {
        let (optional, addrs) = bind_entry_addrs("-::*", 7000);
        assert!(optional);
        assert_eq!(
            addrs.unwrap(),
            vec!["[::]:7000".parse::<SocketAddr>().unwrap()]
        );
        let (optional, addrs) = bind_entry_addrs("*", 7000);
        assert!(!optional);
        assert_eq!(
            addrs.unwrap(),
            vec!["0.0.0.0:7000".parse::<SocketAddr>().unwrap()]
        );
        let (_, addrs) = bind_entry_addrs("127.0.0.1", 7000);
        assert_eq!(
            addrs.unwrap(),
            vec!["127.0.0.1:7000".parse::<SocketAddr>().unwrap()]
        );
    }
}
