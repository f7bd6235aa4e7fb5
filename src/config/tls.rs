//! The `tls-*` settings (docs/security.md, "TLS"): Redis 7.0's names,
//! defaults and ranges. The server builds its TLS configuration from
//! them (`server::tls`); here they are only stored and shown.

use super::params::{Kind, Param};

/// `tls-auth-clients` words, in Redis's order.
pub const AUTH_CLIENTS_WORDS: &[&str] = &["no", "yes", "optional"];

/// Whether a TLS client must show a certificate (`tls-auth-clients`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthClients {
    /// None is asked for.
    No,
    /// One must be shown and verify against the CA.
    #[default]
    Yes,
    /// One shown is verified; none is fine.
    Optional,
}

/// The TLS settings (a field of [`Config`](super::Config)). Empty strings
/// stand for "not set", as Redis's `EMPTY_STRING_IS_NULL` settings do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// `tls-port` (0: no TLS listener).
    pub port: u16,
    /// `tls-cert-file`: the server's certificate chain (PEM).
    pub cert_file: String,
    /// `tls-key-file`: the server's private key (PEM).
    pub key_file: String,
    /// `tls-key-file-pass`: the password of an encrypted key.
    pub key_file_pass: String,
    /// `tls-client-cert-file`: the certificate a replica shows its master.
    pub client_cert_file: String,
    /// `tls-client-key-file`.
    pub client_key_file: String,
    /// `tls-client-key-file-pass`.
    pub client_key_file_pass: String,
    /// `tls-dh-params-file` (no effect: ECDHE only).
    pub dh_params_file: String,
    /// `tls-ca-cert-file`.
    pub ca_cert_file: String,
    /// `tls-ca-cert-dir`.
    pub ca_cert_dir: String,
    /// `tls-auth-clients`.
    pub auth_clients: AuthClients,
    /// `tls-protocols` (empty: TLS 1.2 and 1.3).
    pub protocols: String,
    /// `tls-ciphers` (TLS 1.2 suites, OpenSSL names; empty: rustls's).
    pub ciphers: String,
    /// `tls-ciphersuites` (TLS 1.3 suites; empty: rustls's).
    pub ciphersuites: String,
    /// `tls-prefer-server-ciphers`.
    pub prefer_server_ciphers: bool,
    /// `tls-session-caching`.
    pub session_caching: bool,
    /// `tls-session-cache-size`.
    pub session_cache_size: u32,
    /// `tls-session-cache-timeout` (seconds; kept for CONFIG GET).
    pub session_cache_timeout: u32,
    /// `tls-replication`: the master link uses TLS.
    pub replication: bool,
    /// `tls-cluster` (no effect: hozon has no cluster; Redis too accepts
    /// it outside cluster mode).
    pub cluster: bool,
}

impl TlsSettings {
    /// Whether the server needs a TLS configuration (Redis's test before
    /// `tlsConfigure`).
    pub fn enabled(&self) -> bool {
        self.port != 0 || self.replication
    }

    /// Whether a change from `old` to `new` needs the TLS configuration
    /// built again: any `tls-*` setting but the port, or `dir` (relative
    /// paths are inside it).
    pub fn rebuild_needed(old: &super::Config, new: &super::Config) -> bool {
        let strip = |c: &super::Config| TlsSettings {
            port: 0,
            ..c.tls.clone()
        };
        strip(old) != strip(new) || (new.tls.enabled() && old.dir != new.dir)
    }
}

/// A string setting stored in a [`TlsSettings`] field.
macro_rules! tls_str {
    ($name:expr, $field:ident) => {
        Param {
            name: $name,
            alias: None,
            flags: 0,
            default: "",
            kind: Kind::Str {
                get: |c| c.tls.$field.clone().into_bytes(),
                set: |c, v| {
                    c.tls.$field = String::from_utf8_lossy(v).into_owned();
                    Ok(())
                },
            },
            unsupported: None,
        }
    };
}

/// A `yes`/`no` setting stored in a [`TlsSettings`] field.
macro_rules! tls_bool {
    ($name:expr, $default:expr, $field:ident) => {
        Param {
            name: $name,
            alias: None,
            flags: 0,
            default: $default,
            kind: Kind::Bool {
                get: |c| c.tls.$field,
                set: |c, v| c.tls.$field = v,
            },
            unsupported: None,
        }
    };
}

/// A number within `0..=INT_MAX` stored in a [`TlsSettings`] field.
macro_rules! tls_int {
    ($name:expr, $default:expr, $max:expr, $field:ident, $ty:ty) => {
        Param {
            name: $name,
            alias: None,
            flags: 0,
            default: $default,
            kind: Kind::Int {
                min: 0,
                max: $max as i128,
                memory: false,
                unsigned: false,
                get: |c| c.tls.$field as i128,
                set: |c, v| c.tls.$field = v as $ty,
            },
            unsupported: None,
        }
    };
}

/// `tls-port`.
pub(super) const TLS_PORT: Param = tls_int!("tls-port", "0", 65535, port, u16);

/// `tls-cert-file`.
pub(super) const TLS_CERT_FILE: Param = tls_str!("tls-cert-file", cert_file);

/// `tls-key-file`.
pub(super) const TLS_KEY_FILE: Param = tls_str!("tls-key-file", key_file);

/// `tls-key-file-pass`.
pub(super) const TLS_KEY_FILE_PASS: Param = tls_str!("tls-key-file-pass", key_file_pass);

/// `tls-client-cert-file`.
pub(super) const TLS_CLIENT_CERT_FILE: Param = tls_str!("tls-client-cert-file", client_cert_file);

/// `tls-client-key-file`.
pub(super) const TLS_CLIENT_KEY_FILE: Param = tls_str!("tls-client-key-file", client_key_file);

/// `tls-client-key-file-pass`.
pub(super) const TLS_CLIENT_KEY_FILE_PASS: Param =
    tls_str!("tls-client-key-file-pass", client_key_file_pass);

/// `tls-dh-params-file`.
pub(super) const TLS_DH_PARAMS_FILE: Param = tls_str!("tls-dh-params-file", dh_params_file);

/// `tls-ca-cert-file`.
pub(super) const TLS_CA_CERT_FILE: Param = tls_str!("tls-ca-cert-file", ca_cert_file);

/// `tls-ca-cert-dir`.
pub(super) const TLS_CA_CERT_DIR: Param = tls_str!("tls-ca-cert-dir", ca_cert_dir);

/// `tls-auth-clients`.
pub(super) const TLS_AUTH_CLIENTS: Param = Param {
    name: "tls-auth-clients",
    alias: None,
    flags: 0,
    default: "yes",
    kind: Kind::Enum {
        values: AUTH_CLIENTS_WORDS,
        get: |c| c.tls.auth_clients as usize,
        set: |c, i| {
            c.tls.auth_clients = match i {
                0 => AuthClients::No,
                1 => AuthClients::Yes,
                _ => AuthClients::Optional,
            }
        },
    },
    unsupported: None,
};

/// `tls-protocols`.
pub(super) const TLS_PROTOCOLS: Param = tls_str!("tls-protocols", protocols);

/// `tls-ciphers`.
pub(super) const TLS_CIPHERS: Param = tls_str!("tls-ciphers", ciphers);

/// `tls-ciphersuites`.
pub(super) const TLS_CIPHERSUITES: Param = tls_str!("tls-ciphersuites", ciphersuites);

/// `tls-prefer-server-ciphers`.
pub(super) const TLS_PREFER_SERVER_CIPHERS: Param =
    tls_bool!("tls-prefer-server-ciphers", "no", prefer_server_ciphers);

/// `tls-session-caching`.
pub(super) const TLS_SESSION_CACHING: Param =
    tls_bool!("tls-session-caching", "yes", session_caching);

/// `tls-session-cache-size`.
pub(super) const TLS_SESSION_CACHE_SIZE: Param = tls_int!(
    "tls-session-cache-size",
    "20480",
    i32::MAX,
    session_cache_size,
    u32
);

/// `tls-session-cache-timeout`.
pub(super) const TLS_SESSION_CACHE_TIMEOUT: Param = tls_int!(
    "tls-session-cache-timeout",
    "300",
    i32::MAX,
    session_cache_timeout,
    u32
);

/// `tls-replication`.
pub(super) const TLS_REPLICATION: Param = tls_bool!("tls-replication", "no", replication);

/// `tls-cluster`.
pub(super) const TLS_CLUSTER: Param = tls_bool!("tls-cluster", "no", cluster);

#[cfg(test)]
mod tests {
    use super::super::params::lookup;
    use super::super::Config;
    use super::*;

    #[test]
    fn defaults_are_redis_defaults() {
        let c = Config::default();
        assert_eq!(c.tls.port, 0);
        assert_eq!(c.tls.auth_clients, AuthClients::Yes);
        assert!(c.tls.session_caching);
        assert_eq!(c.tls.session_cache_size, 20480);
        assert_eq!(c.tls.session_cache_timeout, 300);
        assert!(!c.tls.enabled());
        assert_eq!(lookup(b"tls-auth-clients").unwrap().get(&c), b"yes");
        assert_eq!(lookup(b"tls-protocols").unwrap().get(&c), b"");
    }
}
