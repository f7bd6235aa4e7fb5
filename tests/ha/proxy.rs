//! twemproxy (Debian's `nutcracker`) in front of three hozon servers,
//! ketama distribution with `{}` hash tags: a workload through the proxy
//! reads back through it; each key is on exactly one shard (checked on
//! the shards directly), keys sharing a hash tag share a shard; a shard
//! SIGKILLed and restarted on its own AOF comes back with its keys, and
//! the proxy serves them again.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use testkit::harness::{hozon_server_path, start_hozon, start_on_port, unused_port, Conn};

use crate::{call, Value};

const NUTCRACKER: &str = "/usr/sbin/nutcracker";

/// A running nutcracker (killed on drop).
struct Proxy {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_proxy(dir: &Path, shards: &[u16]) -> Proxy {
    assert!(
        Path::new(NUTCRACKER).exists(),
        "{NUTCRACKER} is missing: install Debian's nutcracker (scripts/test does)"
    );
    for _ in 0..5 {
        let (port, stats) = (unused_port(), unused_port());
        let conf = dir.join(format!("nutcracker-{port}.yml"));
        let log = dir.join(format!("nutcracker-{port}.log"));
        let servers: String = shards
            .iter()
            .enumerate()
            .map(|(i, p)| format!("   - 127.0.0.1:{p}:1 shard{i}\n"))
            .collect();
        std::fs::write(
            &conf,
            format!(
                "alpha:\n  listen: 127.0.0.1:{port}\n  hash: fnv1a_64\n  distribution: ketama\n  \
                 hash_tag: \"{{}}\"\n  redis: true\n  auto_eject_hosts: false\n  \
                 server_retry_timeout: 500\n  server_failure_limit: 1\n  timeout: 2000\n  \
                 servers:\n{servers}"
            ),
        )
        .expect("write the proxy's config");
        let mut command = Command::new(NUTCRACKER);
        command
            .args(["-c", &conf.to_string_lossy(), "-s", &stats.to_string()])
            .args(["-a", "127.0.0.1", "-o", &log.to_string_lossy()])
            .args([
                "-p",
                &dir.join(format!("nutcracker-{port}.pid")).to_string_lossy(),
            ]);
        if let Some(child) = crate::spawn_listening(command, port) {
            return Proxy { child, port, log };
        }
    }
    panic!("could not start nutcracker");
}

fn dir_arg(dir: &Path) -> String {
    dir.to_string_lossy().into_owned()
}

/// The keys of the workload: plain keys and groups sharing a hash tag.
fn keys() -> Vec<String> {
    let mut keys: Vec<String> = (0..600).map(|i| format!("k:{i}")).collect();
    for user in 0..20 {
        for field in ["name", "mail", "cart"] {
            keys.push(format!("{{user{user}}}:{field}"));
        }
    }
    keys
}

#[test]
fn twemproxy_shards_over_hozon_servers_and_a_restarted_shard_keeps_its_keys() {
    let root = tempfile::tempdir().expect("temp dir");
    let dirs: Vec<PathBuf> = (0..3)
        .map(|i| {
            let d = root.path().join(format!("shard{i}"));
            std::fs::create_dir(&d).expect("mkdir");
            d
        })
        .collect();
    let mut shards: Vec<_> = dirs
        .iter()
        .map(|d| {
            start_hozon(&[
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                &dir_arg(d),
            ])
        })
        .collect();
    let ports: Vec<u16> = shards.iter().map(|s| s.port).collect();
    let proxy = start_proxy(root.path(), &ports);
    let mut px = Conn::connect(proxy.port);
    let keys = keys();
    for key in &keys {
        assert_eq!(
            call(&mut px, &["SET", key, &format!("value of {key}")]),
            Value::Simple("OK".into()),
            "SET {key} through the proxy; log: {}",
            std::fs::read_to_string(&proxy.log).unwrap_or_default()
        );
    }
    for key in &keys {
        assert_eq!(
            call(&mut px, &["GET", key]),
            Value::Bulk(format!("value of {key}").into_bytes())
        );
    }
    // Each key on exactly one shard; every shard holds some.
    let mut owner = std::collections::HashMap::new();
    for (i, port) in ports.iter().enumerate() {
        let mut c = Conn::connect(*port);
        for key in &keys {
            if call(&mut c, &["EXISTS", key]) == Value::Int(1) {
                assert!(
                    owner.insert(key.clone(), i).is_none(),
                    "{key} on two shards"
                );
            }
        }
    }
    assert_eq!(owner.len(), keys.len(), "keys missing from every shard");
    for i in 0..ports.len() {
        assert!(
            owner.values().filter(|&&o| o == i).count() > 50,
            "shard {i} holds few keys"
        );
    }
    // Keys sharing a hash tag share a shard.
    for user in 0..20 {
        let tag = format!("{{user{user}}}");
        let homes: std::collections::HashSet<_> = owner
            .iter()
            .filter(|(k, _)| k.starts_with(&tag))
            .map(|(_, o)| *o)
            .collect();
        assert_eq!(homes.len(), 1, "{tag} spread over shards");
    }

    // A shard killed and restarted on its AOF keeps its keys; the proxy
    // serves them again.
    let victim = 1;
    let port = ports[victim];
    drop(shards.remove(victim)); // SIGKILL
    let restarted = start_on_port(
        hozon_server_path(),
        "hozon-server",
        port,
        &["--appendonly", "yes", "--dir", &dir_arg(&dirs[victim])],
    )
    .expect("the shard restarts on its port");
    let mut direct = Conn::connect(restarted.port);
    let mine: Vec<&String> = owner
        .iter()
        .filter(|(_, &o)| o == victim)
        .map(|(k, _)| k)
        .collect();
    for key in &mine {
        assert_eq!(
            call(&mut direct, &["EXISTS", key]),
            Value::Int(1),
            "{key} lost by the restart"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut px = Conn::connect(proxy.port);
    for key in &keys {
        loop {
            let got = call(&mut px, &["GET", key]);
            if got == Value::Bulk(format!("value of {key}").into_bytes()) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "GET {key} through the proxy: {got:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
            px = Conn::connect(proxy.port);
        }
    }
}
