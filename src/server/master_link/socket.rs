//! The link's socket: the non-blocking connect, closing it (a payload's
//! temporary file goes with it, a load in progress is cancelled), dropping a link of an older REPLICAOF, and
//! the clients a change of master unblocks.

use std::io::{self, Read, Write};
use std::net::ToSocketAddrs;

use mio::net::TcpStream;
use mio::{Interest, Token};

use super::{MasterLink, PayloadSink, Phase, MASTER_LIMITS, MASTER_TOKEN};
use crate::engine::now_ms;
use crate::repl::handshake::Event;
use crate::resp;
use crate::server::log::{self, Level};
use crate::server::Server;

/// The link's socket: TCP, or TLS over it (`tls-replication yes`).
pub(in crate::server) enum LinkSocket {
    /// Plain TCP.
    Tcp(TcpStream),
    /// TLS, the master's certificate checked against the CA.
    Tls(Box<crate::server::tls::TlsClientStream>),
}

impl LinkSocket {
    /// The TCP socket underneath.
    pub(super) fn tcp(&self) -> &TcpStream {
        match self {
            LinkSocket::Tcp(s) => s,
            LinkSocket::Tls(s) => s.sock(),
        }
    }

    /// The TCP socket underneath, to register with the event loop.
    fn tcp_mut(&mut self) -> &mut TcpStream {
        match self {
            LinkSocket::Tcp(s) => s,
            LinkSocket::Tls(s) => s.sock_mut(),
        }
    }

    /// Sends what TLS holds (nothing to do on TCP); Ok(false) while the
    /// socket is full (the link's WRITABLE events flush it again).
    pub(super) fn flush_tls(&mut self) -> io::Result<bool> {
        match self {
            LinkSocket::Tcp(_) => Ok(true),
            LinkSocket::Tls(s) => s.flush_tls(),
        }
    }
}

impl Read for LinkSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            LinkSocket::Tcp(s) => s.read(buf),
            LinkSocket::Tls(s) => s.read(buf),
        }
    }
}

impl Write for LinkSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            LinkSocket::Tcp(s) => s.write(buf),
            LinkSocket::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            LinkSocket::Tcp(s) => s.flush(),
            LinkSocket::Tls(s) => s.flush(),
        }
    }
}

impl Server {
    /// Clients blocked while we were a master (or followed another one)
    /// get Redis's UNBLOCKED error and are closed after it.
    pub(super) fn disconnect_blocked_clients(&mut self) {
        let tokens: Vec<usize> = self
            .clients
            .iter()
            .filter(|(_, c)| c.session.blocked.is_some())
            .map(|(t, _)| *t)
            .collect();
        for token in tokens {
            let Some(client) = self.clients.get_mut(&token) else {
                continue;
            };
            if self.engine.unblock(&mut client.session, false).is_some() {
                client.out.extend_from_slice(
                    b"-UNBLOCKED force unblock from blocking operation, instance state changed \
                      (master -> replica?)\r\n",
                );
                client.closing = true;
                self.pending.push(token);
            }
        }
    }

    /// Starts the non-blocking connect.
    pub(super) fn connect_link(&mut self, link: &mut MasterLink) {
        self.close_link_socket(link);
        link.progress_ms = now_ms();
        if let Some(config) = self.link_config() {
            link.handshake.set_config(config);
        }
        let config = link.handshake.config();
        let address = (config.host.as_str(), config.port)
            .to_socket_addrs()
            .map_err(|e| e.to_string())
            .and_then(|mut a| a.next().ok_or_else(|| "no address".to_string()));
        let host = config.host.clone();
        let started = address
            .and_then(|a| TcpStream::connect(a).map_err(|e| e.to_string()))
            .and_then(|sock| self.link_socket(sock, &host));
        match started {
            Ok(mut socket) => {
                let registered = self.poll.registry().register(
                    socket.tcp_mut(),
                    Token(MASTER_TOKEN),
                    Interest::READABLE | Interest::WRITABLE,
                );
                match registered {
                    Ok(()) => link.socket = Some(socket),
                    Err(e) => {
                        let step = link.handshake.handle(Event::SocketError(&e.to_string()));
                        self.apply_step(link, step);
                    }
                }
            }
            Err(e) => {
                log::log(Level::Warning, &format!("Unable to connect to MASTER: {e}"));
                let step = link.handshake.handle(Event::SocketError(&e));
                self.apply_step(link, step);
            }
        }
    }

    /// The link's socket over a connecting TCP socket: TLS under
    /// `tls-replication yes` (the handshake starts once connected).
    fn link_socket(&self, sock: TcpStream, host: &str) -> Result<LinkSocket, String> {
        if !self.engine.config().tls.replication {
            return Ok(LinkSocket::Tcp(sock));
        }
        let ctx = self
            .listeners
            .tls_context()
            .ok_or("tls-replication is set but TLS is not configured")?;
        let tls = ctx.connect(sock, host).map_err(|e| e.to_string())?;
        Ok(LinkSocket::Tls(Box::new(tls)))
    }

    /// Closes the socket and abandons what it was receiving (a payload's
    /// temporary file goes; the old data stays).
    pub(super) fn close_link_socket(&mut self, link: &mut MasterLink) {
        if let Some(mut socket) = link.socket.take() {
            let _ = self.poll.registry().deregister(socket.tcp_mut());
        }
        match std::mem::replace(&mut link.phase, Phase::Handshake) {
            Phase::Payload { sink, streamed, .. } => {
                if let Some((load, _, _)) = streamed {
                    load.cancel();
                }
                if let PayloadSink::File { path, .. } = sink {
                    let _ = std::fs::remove_file(path);
                }
            }
            Phase::Loading { load, path, .. } => {
                // The thread's result is discarded; the old data stays.
                load.cancel();
                if let Some(path) = path {
                    let _ = std::fs::remove_file(path);
                }
                if let Some(master) = self.engine.core().replica.master.as_mut() {
                    master.loading = None;
                }
                log::log(
                    Level::Notice,
                    "MASTER <-> REPLICA sync: the load in progress is abandoned",
                );
            }
            _ => {}
        }
        link.out.clear();
        link.inbuf.clear();
        // What was read and not applied is gone: a partial resync asks
        // for the stream from the end of the last applied unit (Redis's
        // replicationCacheMaster resets read_reploff to reploff).
        if let Some(master) = self.engine.core().replica.master.as_mut() {
            master.read_reploff = master.reploff;
        }
        link.parser = resp::Parser::new(MASTER_LIMITS);
        if let Some(mut session) = link.session.take() {
            self.engine.end_session(&mut session);
        }
        link.full_sync = None;
    }

    /// Drops a link (REPLICAOF changed the master).
    pub(super) fn drop_link(&mut self, mut link: MasterLink) {
        self.close_link_socket(&mut link);
        if self.engine.core().replica.master.is_none() {
            log::set_role(b'M');
        }
    }
}
