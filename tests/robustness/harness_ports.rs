//! The test harness itself: a server counts as started only when the
//! process answering on its port is the one the harness started. (A
//! parallel test's server that took the port once made a crash test read
//! another server's data.)

use std::os::unix::fs::PermissionsExt;

use crate::harness::{start_hozon, start_on_port, Conn};

/// A "server" that never listens and stays alive: started on a port where
/// a real server answers, it must not be taken for that server.
#[test]
fn a_server_answering_on_the_port_that_is_not_ours_is_not_taken_for_ours() {
    let theirs = start_hozon(&[]);
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("silent-server");
    std::fs::write(&fake, "#!/bin/sh\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let started = start_on_port(fake.to_str().unwrap(), "silent-server", theirs.port, &[]);
    assert!(
        started.is_none(),
        "the harness took the server on port {} for the one it started",
        theirs.port
    );
    // The server that was there is untouched.
    let mut conn = Conn::connect(theirs.port);
    assert_eq!(conn.call(&[b"PING"]), b"+PONG\r\n");
}
