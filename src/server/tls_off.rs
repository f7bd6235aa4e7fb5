//! TLS when hozon is built without the `tls` feature: the types exist so
//! the event loop needs no conditional code, and a setting that needs
//! TLS is refused at startup and by CONFIG SET.

use std::io::{self, Read, Write};

use mio::net::TcpStream;

use crate::config::Config;

/// No TLS configuration can be built without the `tls` feature.
#[derive(Debug, Clone)]
pub struct TlsContext {
    never: Never,
}

/// A value that cannot exist.
#[derive(Debug, Clone, Copy)]
enum Never {}

impl TlsContext {
    /// Always refuses: TLS is not built in.
    pub fn build(_config: &Config) -> Result<TlsContext, String> {
        Err("TLS is not supported: hozon-server was built without the `tls` feature".into())
    }

    /// Never called (no context exists).
    pub fn accept(&self, _sock: TcpStream) -> io::Result<TlsStream> {
        match self.never {}
    }

    /// Never called (no context exists).
    pub fn connect(&self, _sock: TcpStream, _host: &str) -> io::Result<TlsClientStream> {
        match self.never {}
    }
}

/// A TLS session (none can exist without the `tls` feature).
#[derive(Debug)]
pub struct TlsConn {
    never: Never,
}

/// A server-side session.
pub type TlsStream = TlsConn;
/// A client-side session.
pub type TlsClientStream = TlsConn;

impl TlsConn {
    /// The socket underneath.
    pub fn sock(&self) -> &TcpStream {
        match self.never {}
    }

    /// The socket underneath.
    pub fn sock_mut(&mut self) -> &mut TcpStream {
        match self.never {}
    }

    /// Sends what is held.
    pub fn flush_tls(&mut self) -> io::Result<bool> {
        match self.never {}
    }

    /// Whether output is held.
    pub fn unsent(&self) -> bool {
        match self.never {}
    }
}

impl Read for TlsConn {
    fn read(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        match self.never {}
    }
}

impl Write for TlsConn {
    fn write(&mut self, _buf: &[u8]) -> io::Result<usize> {
        match self.never {}
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.never {}
    }
}
