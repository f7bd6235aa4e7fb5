//! Differential tests: where ACL users are kept, against redis-server —
//! the ACL file (`aclfile`, ACL SAVE, ACL LOAD with its all-or-nothing
//! errors and the connections it closes), `user` lines in the
//! configuration file and CONFIG REWRITE, `acl-pubsub-default`, and the
//! configurations both servers refuse to start with.

use std::path::{Path, PathBuf};
use std::process::Command;

use testkit::harness::{
    hozon_server_path, redis_server_path, show, start_from_config, unused_port, Conn, Pair,
    ServerProcess,
};

use super::acl::{check_described, check_users, login, normalize, script_on};

const USERS: &str = "user alice on allcommands allkeys &* >alice\n\
                     user bob on -@all +@set +acl ~set* &* >bob\n\
                     user default on nopass ~* &* +@all\n";

/// Two data directories holding `users.acl` with `content`, and a pair of
/// servers started in them with `aclfile users.acl` (relative: Redis finds
/// it in `dir`, so error messages name the same file on both) and `extra`.
fn acl_file_pair(content: &str, extra: &[&str]) -> (Pair, [tempfile::TempDir; 2]) {
    let dirs = [tempdir(), tempdir()];
    for d in &dirs {
        std::fs::write(d.path().join("users.acl"), content).expect("write the ACL file");
    }
    let args = |d: &tempfile::TempDir| -> Vec<String> {
        let mut v: Vec<String> = ["--dir", path_str(d.path()), "--aclfile", "users.acl"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let (ra, ha) = (args(&dirs[0]), args(&dirs[1]));
    let ra: Vec<&str> = ra.iter().map(String::as_str).collect();
    let ha: Vec<&str> = ha.iter().map(String::as_str).collect();
    (Pair::with_args(&ra, &ha), dirs)
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn acl_file(dir: &tempfile::TempDir) -> String {
    let bytes = std::fs::read(dir.path().join("users.acl")).expect("read the ACL file");
    String::from_utf8(normalize(&bytes)).expect("utf-8")
}

fn append(dirs: &[tempfile::TempDir; 2], text: &str) {
    for d in dirs {
        let path = d.path().join("users.acl");
        let mut content = std::fs::read(&path).expect("read");
        content.extend_from_slice(text.as_bytes());
        std::fs::write(&path, content).expect("write");
    }
}

#[track_caller]
fn assert_closed(conns: [&mut testkit::harness::Conn; 2], why: &str) {
    for c in conns {
        assert!(c.try_call(&[b"PING"]).is_none(), "{why}");
    }
}

#[test]
fn without_an_acl_file_load_and_save_are_refused_alike() {
    let mut p = Pair::new();
    p.script(
        "ACL LOAD\nACL SAVE\nACL LOAD extra\nCONFIG GET aclfile\nCONFIG SET aclfile /tmp/x.acl",
    );
}

#[test]
fn the_acl_file_is_loaded_at_startup_saved_and_loaded_again() {
    let (mut p, dirs) = acl_file_pair(USERS, &[]);
    check_users(&mut p);
    p.script("CONFIG GET aclfile");
    let (mut ar, mut ah) = login(&p, "alice", "alice");
    let (mut br, mut bh) = login(&p, "bob", "bob");
    script_on(
        &mut br,
        &mut bh,
        "SADD set 1 2 3\nSET key value\nACL WHOAMI",
    );

    // SAVE writes what ACL LIST shows, one `user` line each.
    p.script("ACL SETUSER eve +get allkeys >eve on\nACL SETUSER harry on nopass resetchannels &test +@all ~*\nACL SAVE");
    assert_eq!(acl_file(&dirs[0]), acl_file(&dirs[1]));
    assert!(
        acl_file(&dirs[1]).contains("user eve on #"),
        "{}",
        acl_file(&dirs[1])
    );

    // LOAD closes every connection of a user other than default, the
    // caller's too when it is one (after its reply).
    let (mut er, mut eh) = login(&p, "eve", "eve");
    script_on(&mut ar, &mut ah, "ACL LOAD");
    assert_closed([&mut ar, &mut ah], "the caller (alice) is disconnected");
    assert_closed([&mut br, &mut bh], "bob is disconnected");
    assert_closed([&mut er, &mut eh], "eve is disconnected");
    p.script("PING");
    check_users(&mut p);
    let (mut er, mut eh) = login(&p, "eve", "eve");
    script_on(&mut er, &mut eh, "SET key value\nGET key");
    let (mut hr, mut hh) = login(&p, "harry", "anything");
    script_on(&mut hr, &mut hh, "PUBLISH test bar\nPUBLISH test1 bar");
}

#[test]
fn a_bad_acl_file_changes_nothing_and_every_error_is_reported() {
    let (mut p, dirs) = acl_file_pair(USERS, &[]);
    let (mut br, mut bh) = login(&p, "bob", "bob");
    // Each case spoils a good file; LOAD answers the same errors and
    // changes nothing.
    let cases = [
        "user alice on nopass ~* -@all\n",
        "user default on nopass ~* -@all\n",
        "user carol on +nosuchcommand +@nosuchcategory >c\n",
        "user dave on ~* allkeys ~more\nuser erin on >x <y\nuser frank on #abc\n",
        "# a comment\nnotauser x\nuser\n",
    ];
    for case in cases {
        for d in &dirs {
            std::fs::write(d.path().join("users.acl"), USERS).expect("write");
        }
        append(&dirs, case);
        let (r, h) = p.both(&["ACL", "LOAD"]);
        assert_eq!(
            show(&r),
            show(&h),
            "ACL LOAD of a file ending with {case:?}"
        );
        assert!(r.starts_with(b"-ERR "), "{}", show(&r));
        check_described(&mut p, "ACL LIST");
        script_on(&mut br, &mut bh, "ACL WHOAMI\nSADD set 4");
    }
    // An unmatched parenthesis: Redis 7.0.15 crashes (it reads an
    // uninitialized count); hozon reports the line and changes nothing.
    std::fs::write(
        dirs[1].path().join("users.acl"),
        format!("{USERS}user gina on (~x* +get\n"),
    )
    .expect("write");
    let reply = p.hozon(&["ACL", "LOAD"]);
    assert_eq!(
        show(&reply),
        show(b"-ERR users.acl:4: Unmatched parenthesis in selector definition.WARNING: ACL errors detected, no change to the previously active ACL rules was performed\r\n")
    );
    // Blank lines, CRLF and repeated spaces are fine.
    for d in &dirs {
        std::fs::write(
            d.path().join("users.acl"),
            "\r\n\nuser  zed on  >z ~z*  +get\r\n\n",
        )
        .expect("write");
    }
    p.script("ACL LOAD");
    check_users(&mut p);
}

#[test]
fn acl_pubsub_default_sets_the_channels_new_users_start_with() {
    // No default line in the file: the stock default user (all channels).
    let (mut p, _dirs) = acl_file_pair("user alice on >a +@all ~*\n", &[]);
    check_users(&mut p);
    p.script(
        "CONFIG GET acl-pubsub-default\n\
         CONFIG SET acl-pubsub-default allchannels\n\
         ACL SETUSER mydefault\n\
         ACL SETUSER onechannel &test\n\
         CONFIG SET acl-pubsub-default resetchannels\n\
         ACL GETUSER mydefault\n\
         ACL SETUSER onechannel &test\n\
         ACL GETUSER onechannel\n\
         CONFIG SET acl-pubsub-default nosuch\n\
         CONFIG GET acl-pubsub-default",
    );
    let (mut p, _dirs) = acl_file_pair(USERS, &["--acl-pubsub-default", "allchannels"]);
    p.script(
        "ACL SETUSER default reset on nopass ~* +@all\n\
         PUBLISH hello world\n\
         CONFIG SET acl-pubsub-default resetchannels\n\
         ACL SETUSER default reset on nopass ~* +@all\n\
         PUBLISH hello world\n\
         ACL SETUSER n1 (+get ~x)\n\
         ACL GETUSER n1",
    );
}

/// Starts `binary` from `dir/s.conf` holding the port, `dir` and `body`.
fn start_from(binary: &str, name: &'static str, dir: &Path, body: &str) -> ServerProcess {
    for _ in 0..5 {
        let port = unused_port();
        let conf = dir.join("s.conf");
        let text = format!(
            "port {port}\nbind 127.0.0.1\nsave \"\"\nappendonly no\ndir {}\n{body}",
            path_str(dir)
        );
        std::fs::write(&conf, text).expect("write the configuration");
        if let Some(server) = start_from_config(binary, name, port, &conf) {
            return server;
        }
    }
    panic!("could not start {name}");
}

/// Both servers started from a configuration file with `body` (CONFIG
/// REWRITE needs one), each in its own directory.
fn config_file_pair(body: &str) -> (Pair, [tempfile::TempDir; 2], [PathBuf; 2]) {
    let dirs = [tempdir(), tempdir()];
    let files = [dirs[0].path().join("s.conf"), dirs[1].path().join("s.conf")];
    let p = pair_from(&dirs, body);
    (p, dirs, files)
}

fn pair_from(dirs: &[tempfile::TempDir; 2], body: &str) -> Pair {
    let redis_server = start_from(&redis_server_path(), "redis-server", dirs[0].path(), body);
    let hozon_server = start_from(hozon_server_path(), "hozon-server", dirs[1].path(), body);
    Pair {
        r: Conn::connect(redis_server.port),
        h: Conn::connect(hozon_server.port),
        redis_server,
        hozon_server,
    }
}

/// Restarts hozon from its (rewritten) configuration file.
fn restart_hozon(dir: &Path) -> (ServerProcess, Conn) {
    let conf = dir.join("s.conf");
    let text = std::fs::read_to_string(&conf).expect("read");
    let port: u16 = text
        .lines()
        .find_map(|l| l.strip_prefix("port "))
        .expect("a port line")
        .trim()
        .parse()
        .expect("a port");
    let server = start_from_config(hozon_server_path(), "hozon-server", port, &conf)
        .expect("hozon restarts from its rewritten file");
    let conn = Conn::connect(server.port);
    (server, conn)
}

/// The `user` lines of a configuration file, normalized.
fn user_lines(file: &Path) -> Vec<String> {
    let text = std::fs::read(file).expect("read the configuration");
    String::from_utf8(normalize(&text))
        .expect("utf-8")
        .lines()
        .filter(|l| l.starts_with("user "))
        .map(str::to_string)
        .collect()
}

#[test]
fn user_lines_of_the_configuration_define_users_and_config_rewrite_keeps_them() {
    let (mut p, _dirs, files) = config_file_pair(
        "user default on nopass ~* +@all -flushdb\n\
         user app on >secret ~app:* &app:* +@all -@dangerous\n\
         user ro on nopass %R~* +@read (~log:* +xadd)\n",
    );
    check_users(&mut p);
    p.script("FLUSHDB\nSUBSCRIBE foo");
    let (mut ar, mut ah) = login(&p, "app", "secret");
    script_on(&mut ar, &mut ah, "SET app:1 x\nSET other x\nFLUSHALL");
    p.script("ACL SETUSER late on >l +get ~*\nACL DELUSER app\nCONFIG REWRITE");
    assert_eq!(user_lines(&files[0]), user_lines(&files[1]));
    assert_eq!(
        user_lines(&files[1]).len(),
        3,
        "{:?}",
        user_lines(&files[1])
    );

    // Restarted from the rewritten file, hozon has the same users.
    let before = p.hozon(&["ACL", "LIST"]);
    let Pair { hozon_server, .. } = p;
    drop(hozon_server);
    let (_server, mut h) = restart_hozon(_dirs[1].path());
    assert_eq!(
        show(&normalize(&h.call(&[b"ACL", b"LIST"]))),
        show(&normalize(&before))
    );
    let refused = h.call(&[b"FLUSHDB"]);
    assert!(refused.starts_with(b"-NOPERM"), "{}", show(&refused));
}

#[test]
fn with_an_acl_file_config_rewrite_removes_user_lines() {
    let dirs = [tempdir(), tempdir()];
    for d in &dirs {
        std::fs::write(d.path().join("users.acl"), USERS).expect("write");
    }
    let mut p = pair_from(&dirs, "aclfile users.acl\n");
    check_users(&mut p);
    p.script("ACL SETUSER x on\nCONFIG REWRITE");
    for d in &dirs {
        let text = std::fs::read_to_string(d.path().join("s.conf")).expect("read");
        assert!(text.contains("aclfile"), "{text}");
        assert!(user_lines(&d.path().join("s.conf")).is_empty(), "{text}");
    }
}

/// Runs a server binary with `args`: its exit status and what it
/// printed, or None for the status when it was still running after 10 s
/// (it started: then it is killed).
fn run_to_exit(program: &str, args: &[&str]) -> (Option<i32>, String) {
    let dir = tempdir();
    let log = dir.path().join("out");
    let file = std::fs::File::create(&log).expect("log file");
    let mut child = Command::new(program)
        .args(args)
        .stdout(file.try_clone().expect("clone"))
        .stderr(file)
        .spawn()
        .expect("run the server");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    (code, std::fs::read_to_string(&log).unwrap_or_default())
}

#[test]
fn both_servers_refuse_to_start_with_bad_user_settings() {
    let dir = tempdir();
    let acl = dir.path().join("users.acl");
    std::fs::write(&acl, "user a on\nuser a off\n").expect("write");
    let good = dir.path().join("good.acl");
    std::fs::write(&good, USERS).expect("write");
    let missing = dir.path().join("missing.acl");
    let port = unused_port().to_string();
    let port = port.as_str();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--user", "foo", "--user", "foo"], "Duplicate user found"),
        (vec!["--user", "default", "--user", "default"], "Duplicate user found"),
        (vec!["--user", "foo", "on", "+nosuch"], "Unknown command or category name in ACL"),
        (vec!["--user", "foo", "on", "~a", "allkeys", "~b"], "Adding a pattern after the * pattern"),
        (vec!["--user", "foo on"], "Spaces not allowed in ACL usernames"),
        (
            vec!["--aclfile", path_str(&good), "--user", "foo"],
            "Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid",
        ),
        (
            vec!["--aclfile", path_str(&missing)],
            "Aborting Redis startup because of ACL errors: Error loading ACLs, opening file",
        ),
        (
            vec!["--aclfile", path_str(&acl)],
            "WARNING: Duplicate user 'a' found on line 2.",
        ),
    ];
    for (args, phrase) in cases {
        let args = [&["--port", port, "--save", ""], &args[..]].concat();
        for (program, name) in [
            (redis_server_path(), "redis-server"),
            (hozon_server_path().to_string(), "hozon-server"),
        ] {
            let (code, out) = run_to_exit(&program, &args);
            assert_eq!(code, Some(1), "{name} {args:?} must exit with 1: {out}");
            assert!(out.contains(phrase), "{name} {args:?}: {out}");
        }
    }
}
