//! Test certificates for TLS (docs/security.md, "TLS"): a CA, server
//! and client certificates signed by it, and a client certificate from
//! another CA, made with openssl by the commands docs/security.md shows.
//! Without openssl the tests that need them fail.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A CA, a server certificate and a client certificate signed by it, and
/// a client certificate from another CA: PEM files in a temporary
/// directory.
pub struct Certs {
    dir: tempfile::TempDir,
}

/// Runs a shell command line in `dir`; panics with its output on failure.
fn sh(dir: &Path, script: &str) {
    let out = Command::new("sh")
        .arg("-ec")
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("run sh (openssl is needed to make test certificates)");
    assert!(
        out.status.success(),
        "making test certificates failed (is openssl installed?):\n{script}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Certs {
    /// Makes the files with openssl, as docs/security.md "Setting it up"
    /// shows.
    pub fn generate() -> Certs {
        let dir = tempfile::tempdir().expect("temp dir for certificates");
        sh(
            dir.path(),
            "printf 'keyUsage = digitalSignature, keyEncipherment\\nsubjectAltName = DNS:localhost, IP:127.0.0.1\\n' > leaf.ext
             for ca in ca other-ca; do
               openssl genrsa -out $ca.key 2048 2>/dev/null
               openssl req -x509 -new -nodes -sha256 -key $ca.key -days 3650 \
                 -subj \"/O=hozon test/CN=$ca\" -out $ca.crt
             done
             leaf() { # name ca
               openssl genrsa -out $1.key 2048 2>/dev/null
               openssl req -new -sha256 -key $1.key -subj \"/O=hozon test/CN=$1\" |
                 openssl x509 -req -sha256 -CA $2.crt -CAkey $2.key -CAcreateserial \
                   -days 365 -extfile leaf.ext -out $1.crt 2>/dev/null
             }
             leaf server ca
             leaf server2 ca
             leaf client ca
             leaf stranger other-ca",
        );
        Certs { dir }
    }

    /// The path of `name` (`ca.crt`, `server.key`…) as a string.
    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    /// The directory holding the files.
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// The server flags for a TLS port `tls_port` with these files.
    pub fn server_args(&self, tls_port: u16) -> Vec<String> {
        vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            self.path("server.crt"),
            "--tls-key-file".into(),
            self.path("server.key"),
            "--tls-ca-cert-file".into(),
            self.path("ca.crt"),
        ]
    }
}
