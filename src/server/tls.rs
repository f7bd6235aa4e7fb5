//! TLS (docs/security.md, "TLS"): the rustls configurations built from the
//! `tls-*` settings, and a TLS session run over a non-blocking socket so
//! that the event loop treats it like a plain one.
//!
//! [`TlsConn`] never blocks: a handshake advances inside its reads and
//! writes, and encrypted bytes the socket did not take wait in rustls
//! until [`TlsConn::flush_tls`] (the event loop calls it when it writes
//! a client's output, and keeps the client writable while it returns
//! false).

use std::io::{self, Read, Write};
use std::ops::DerefMut;
use std::path::Path;
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{
    ClientConfig, ClientConnection, ConnectionCommon, DigitallySignedStruct, RootCertStore,
    ServerConfig, ServerConnection, SideData, SignatureScheme, SupportedCipherSuite,
    SupportedProtocolVersion,
};

use crate::config::tls::{AuthClients, TlsSettings};
use crate::config::Config;

/// The configurations built from one set of `tls-*` settings: the
/// server's (for the TLS listener) and the client's (for a replica's
/// master link).
#[derive(Clone)]
pub struct TlsContext {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl std::fmt::Debug for TlsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsContext")
    }
}

impl TlsContext {
    /// Reads the files `config` names and builds both configurations
    /// (Redis's `tlsConfigure`): all or nothing, the error says what
    /// failed. Relative paths are inside `dir`.
    pub fn build(config: &Config) -> Result<TlsContext, String> {
        let s = &config.tls;
        if s.cert_file.is_empty() {
            return Err("No tls-cert-file configured!".into());
        }
        if s.key_file.is_empty() {
            return Err("No tls-key-file configured!".into());
        }
        let has_ca = !s.ca_cert_file.is_empty() || !s.ca_cert_dir.is_empty();
        if (s.auth_clients != AuthClients::No || s.replication) && !has_ca {
            return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!".into());
        }
        let dir = config.dir.as_path();
        let versions = protocols(&s.protocols)?;
        let provider = Arc::new(provider(s)?);
        let roots = Arc::new(roots(s, dir)?);
        let (certs, key) = cert_and_key(dir, &s.cert_file, &s.key_file, &s.key_file_pass)?;

        let verifier = match s.auth_clients {
            AuthClients::No => WebPkiClientVerifier::no_client_auth(),
            mode => {
                let builder =
                    WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone());
                let builder = if mode == AuthClients::Optional {
                    builder.allow_unauthenticated()
                } else {
                    builder
                };
                builder
                    .build()
                    .map_err(|e| format!("Failed to configure CA certificate(s): {e}"))?
            }
        };
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("Failed to configure TLS: {e}"))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(|e| {
                format!(
                    "Failed to load certificate: {}: {e}",
                    path_in(dir, &s.cert_file).display()
                )
            })?;
        server.ignore_client_order = s.prefer_server_ciphers;
        server.session_storage = if s.session_caching {
            // OpenSSL reads a cache size of 0 as "no limit".
            let size = if s.session_cache_size == 0 {
                usize::MAX >> 1
            } else {
                s.session_cache_size as usize
            };
            ServerSessionMemoryCache::new(size)
        } else {
            server.send_tls13_tickets = 0;
            Arc::new(NoServerSessionStorage {})
        };

        // The client side: the master's certificate checked against the
        // CA; `tls-client-cert-file` shown, else the server's own.
        let (client_certs, client_key) =
            if !s.client_cert_file.is_empty() && !s.client_key_file.is_empty() {
                cert_and_key(
                    dir,
                    &s.client_cert_file,
                    &s.client_key_file,
                    &s.client_key_file_pass,
                )?
            } else {
                (certs, key)
            };
        let client = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("Failed to configure TLS: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly { roots, provider }))
            .with_client_auth_cert(client_certs, client_key)
            .map_err(|e| format!("Failed to load the client certificate: {e}"))?;
        Ok(TlsContext {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// A server-side session over an accepted socket.
    pub fn accept(&self, sock: TcpStream) -> io::Result<TlsStream> {
        let conn = ServerConnection::new(self.server.clone()).map_err(io::Error::other)?;
        Ok(TlsConn::new(sock, conn))
    }

    /// A client-side session over a socket connected (or connecting) to
    /// `host` (a replica's master link).
    pub fn connect(&self, sock: TcpStream, host: &str) -> io::Result<TlsClientStream> {
        // The name is sent as SNI only (never checked, as Redis does not
        // check it); an address or a name rustls refuses goes as an IP.
        let name = ServerName::try_from(host.to_string())
            .unwrap_or_else(|_| ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
        let conn = ClientConnection::new(self.client.clone(), name).map_err(io::Error::other)?;
        Ok(TlsConn::new(sock, conn))
    }
}

/// A TLS session on the server side (a client's connection).
pub type TlsStream = TlsConn<ServerConnection>;
/// A TLS session on the client side (a replica's master link).
pub type TlsClientStream = TlsConn<ClientConnection>;

/// Encrypted output rustls keeps per connection beyond what the socket
/// took (its default; the client's output buffer holds the rest).
const TLS_BUFFER_LIMIT: usize = 64 * 1024;

/// A TLS session over a non-blocking socket.
pub struct TlsConn<C> {
    sock: TcpStream,
    conn: C,
}

impl<C> std::fmt::Debug for TlsConn<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConn").field("sock", &self.sock).finish()
    }
}

impl<C, S> TlsConn<C>
where
    C: DerefMut<Target = ConnectionCommon<S>>,
    S: SideData,
{
    fn new(sock: TcpStream, mut conn: C) -> TlsConn<C> {
        conn.set_buffer_limit(Some(TLS_BUFFER_LIMIT));
        TlsConn { sock, conn }
    }

    /// The socket underneath.
    pub fn sock(&self) -> &TcpStream {
        &self.sock
    }

    /// The socket underneath, to register with the event loop.
    pub fn sock_mut(&mut self) -> &mut TcpStream {
        &mut self.sock
    }

    /// Sends what rustls holds: Ok(true) when nothing is left to send and
    /// the handshake is over (a reply written during the handshake waits
    /// in rustls until it ends), Ok(false) when the socket is full.
    pub fn flush_tls(&mut self) -> io::Result<bool> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(!self.conn.is_handshaking())
    }

    /// Whether rustls still holds output (or the handshake is not over).
    pub fn unsent(&self) -> bool {
        self.conn.wants_write() || self.conn.is_handshaking()
    }
}

impl<C, S> Read for TlsConn<C>
where
    C: DerefMut<Target = ConnectionCommon<S>>,
    S: SideData,
{
    /// Fills `buf` from the plaintext rustls holds and from the socket
    /// until `buf` is full or the socket has nothing more: a short read
    /// means the socket is drained, as on a plain socket (the event loop
    /// is edge-triggered and relies on it).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut filled = 0;
        let done = |filled: usize, e: io::Error| if filled > 0 { Ok(filled) } else { Err(e) };
        loop {
            while filled < buf.len() {
                match self.conn.reader().read(&mut buf[filled..]) {
                    // The peer's close_notify.
                    Ok(0) => return Ok(filled),
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return done(filled, e),
                }
            }
            if filled == buf.len() {
                return Ok(filled);
            }
            match self.conn.read_tls(&mut self.sock) {
                Ok(0) => return Ok(filled),
                Ok(_) => {
                    if let Err(e) = self.conn.process_new_packets() {
                        // The alert rustls queued goes out before the close.
                        let _ = self.conn.write_tls(&mut self.sock);
                        return done(filled, io::Error::new(io::ErrorKind::InvalidData, e));
                    }
                    // Handshake messages (and replies written before the
                    // handshake ended) go out now; what the socket does
                    // not take waits for the next flush.
                    if let Err(e) = self.flush_tls() {
                        return done(filled, e);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return done(filled, e),
            }
        }
    }
}

impl<C, S> Write for TlsConn<C>
where
    C: DerefMut<Target = ConnectionCommon<S>>,
    S: SideData,
{
    /// Encrypts what rustls's buffer takes and sends what the socket
    /// takes; WouldBlock when rustls's buffer is full and the socket too.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut n = self.conn.writer().write(buf)?;
        self.flush_tls()?;
        if n == 0 {
            n = self.conn.writer().write(buf)?;
            if n == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.flush_tls()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_tls().map(|_| ())
    }
}

/// Checks a master's certificate chain against the CA but not its name
/// (Redis's replica checks the chain only: a master is often reached by
/// an address its certificate does not list).
#[derive(Debug)]
struct ChainOnly {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// `path`, inside `dir` when relative.
fn path_in(dir: &Path, path: &str) -> std::path::PathBuf {
    dir.join(path)
}

/// A certificate chain and its key, from PEM files; `pass` decrypts an
/// encrypted key.
fn cert_and_key(
    dir: &Path,
    cert_file: &str,
    key_file: &str,
    pass: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let cert_path = path_in(dir, cert_file);
    let failed_cert = |e: &dyn std::fmt::Display| {
        format!("Failed to load certificate: {}: {e}", cert_path.display())
    };
    let certs = CertificateDer::pem_file_iter(&cert_path)
        .map_err(|e| failed_cert(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed_cert(&e))?;
    if certs.is_empty() {
        return Err(failed_cert(&"no certificate in the file"));
    }
    let key_path = path_in(dir, key_file);
    let key = private_key(&key_path, pass)
        .map_err(|e| format!("Failed to load private key: {}: {e}", key_path.display()))?;
    Ok((certs, key))
}

/// The private key of a PEM file: an `ENCRYPTED PRIVATE KEY` (PKCS#8,
/// what OpenSSL 3 writes for `genrsa -aes256` or `pkcs8 -topk8`) is
/// decrypted with `pass`; any other key is read as it is, the password
/// unused (as OpenSSL does with a key that is not encrypted).
fn private_key(path: &Path, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    const ENCRYPTED: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let Some(start) = text.find(ENCRYPTED) else {
        return PrivateKeyDer::from_pem_slice(text.as_bytes()).map_err(|e| e.to_string());
    };
    if pass.is_empty() {
        return Err("the key is encrypted and no password is set (tls-key-file-pass)".into());
    }
    let (_, der) = pkcs8::der::pem::decode_vec(&text.as_bytes()[start..])
        .map_err(|e| format!("an unreadable encrypted key: {e}"))?;
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
        .map_err(|e| format!("an unreadable encrypted key: {e}"))?;
    let plain = info
        .decrypt(pass.as_bytes())
        .map_err(|e| format!("cannot decrypt the key ({e}): a wrong password?"))?;
    Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()))
}

/// The CA certificates of `tls-ca-cert-file` and of every file in
/// `tls-ca-cert-dir` (files that hold no certificate are skipped, as
/// OpenSSL skips them).
fn roots(s: &TlsSettings, dir: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let failed = |what: &Path, e: &dyn std::fmt::Display| {
        format!(
            "Failed to configure CA certificate(s) file/directory: {}: {e}",
            what.display()
        )
    };
    let mut add_file = |path: &Path, must: bool| -> Result<(), String> {
        let certs = match CertificateDer::pem_file_iter(path) {
            Ok(iter) => iter.collect::<Result<Vec<_>, _>>(),
            Err(e) => Err(e),
        };
        let certs = match certs {
            Ok(c) => c,
            Err(_) if !must => return Ok(()),
            Err(e) => return Err(failed(path, &e)),
        };
        if must && certs.is_empty() {
            return Err(failed(path, &"no certificate in the file"));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| failed(path, &e))?;
        }
        Ok(())
    };
    if !s.ca_cert_file.is_empty() {
        add_file(&path_in(dir, &s.ca_cert_file), true)?;
    }
    if !s.ca_cert_dir.is_empty() {
        let ca_dir = path_in(dir, &s.ca_cert_dir);
        let entries = std::fs::read_dir(&ca_dir).map_err(|e| failed(&ca_dir, &e))?;
        for entry in entries {
            let path = entry.map_err(|e| failed(&ca_dir, &e))?.path();
            if path.is_file() {
                add_file(&path, false)?;
            }
        }
    }
    Ok(roots)
}

/// `tls-protocols` (Redis's `parseProtocolsConfig`): empty means TLS 1.2
/// and 1.3.
fn protocols(text: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    if words.is_empty() {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    }
    let mut versions = Vec::new();
    for word in words {
        let version = match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" => &rustls::version::TLS12,
            "tlsv1.3" => &rustls::version::TLS13,
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                    "{word} is specified in tls-protocols but not supported: TLS 1.2 and 1.3 only"
                ))
            }
            _ => {
                return Err("Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.".into())
            }
        };
        if !versions.contains(&version) {
            versions.push(version);
        }
    }
    Ok(versions)
}

/// The suites rustls offers, with their OpenSSL and IANA names.
fn suite_names() -> Vec<(&'static str, &'static str, SupportedCipherSuite)> {
    use rustls::crypto::ring::cipher_suite as cs;
    vec![
        (
            "TLS_AES_256_GCM_SHA384",
            "TLS13_AES_256_GCM_SHA384",
            cs::TLS13_AES_256_GCM_SHA384,
        ),
        (
            "TLS_AES_128_GCM_SHA256",
            "TLS13_AES_128_GCM_SHA256",
            cs::TLS13_AES_128_GCM_SHA256,
        ),
        (
            "TLS_CHACHA20_POLY1305_SHA256",
            "TLS13_CHACHA20_POLY1305_SHA256",
            cs::TLS13_CHACHA20_POLY1305_SHA256,
        ),
        (
            "ECDHE-ECDSA-AES256-GCM-SHA384",
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            "ECDHE-ECDSA-AES128-GCM-SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            "ECDHE-ECDSA-CHACHA20-POLY1305",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
        (
            "ECDHE-RSA-AES256-GCM-SHA384",
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            "ECDHE-RSA-AES128-GCM-SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            "ECDHE-RSA-CHACHA20-POLY1305",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
    ]
}

/// The ring provider with the suites `tls-ciphers` (TLS 1.2) and
/// `tls-ciphersuites` (TLS 1.3) name, in their order; an empty setting
/// keeps rustls's suites of that version.
fn provider(s: &TlsSettings) -> Result<CryptoProvider, String> {
    let names = suite_names();
    let pick = |setting: &str,
                text: &str,
                tls13: bool|
     -> Result<Vec<SupportedCipherSuite>, String> {
        let of_version =
            |suite: &SupportedCipherSuite| matches!(suite, SupportedCipherSuite::Tls13(_)) == tls13;
        if text.trim().is_empty() {
            return Ok(names.iter().map(|n| n.2).filter(of_version).collect());
        }
        let mut picked = Vec::new();
        for word in text.split([':', ' ']).filter(|w| !w.is_empty()) {
            let found = names
                .iter()
                .find(|(openssl, iana, suite)| {
                    (word.eq_ignore_ascii_case(openssl) || word.eq_ignore_ascii_case(iana))
                        && of_version(suite)
                })
                .map(|n| n.2);
            let Some(suite) = found else {
                let known: Vec<&str> = names
                    .iter()
                    .filter(|n| of_version(&n.2))
                    .map(|n| n.0)
                    .collect();
                return Err(format!(
                    "Failed to configure {setting}: unknown or unsupported suite '{word}' (supported: {})",
                    known.join(":")
                ));
            };
            if !picked.contains(&suite) {
                picked.push(suite);
            }
        }
        Ok(picked)
    };
    let mut suites = pick("ciphersuites", &s.ciphersuites, true)?;
    suites.extend(pick("ciphers", &s.ciphers, false)?);
    // ring's provider is deprecated for lacking post-quantum key
    // exchange; aws-lc-rs, which has it, needs cmake and a C toolchain to
    // build. Classical ECDHE is what Redis's OpenSSL builds offer too.
    #[allow(deprecated)]
    let base = rustls::crypto::ring::default_provider();
    Ok(CryptoProvider {
        cipher_suites: suites,
        ..base
    })
}
