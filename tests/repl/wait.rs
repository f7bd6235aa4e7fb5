//! WAIT on the master (docs/replication.md §3.6; issue 25 step 7): counts
//! the online replicas that acknowledged the client's last write, blocks
//! for them (asking with GETACK), times out with the count so far, answers
//! at once inside MULTI, and is refused on a replica.

use crate::harness::{ok, start_replica, wait_synced, Master, SyncMode, Value};

fn wait_counts_replicas(master: Master) {
    let m = master.start(&SyncMode::Disk.args());
    let mut c = m.conn();
    assert_eq!(ok(&mut c, &["WAIT", "0", "0"]), Value::Int(0));
    ok(&mut c, &["SET", "k", "0"]);
    assert_eq!(ok(&mut c, &["WAIT", "1", "100"]), Value::Int(0));

    let r1 = start_replica(&m, &[]);
    wait_synced(&m, &[&r1]);
    ok(&mut c, &["SET", "k", "1"]);
    assert_eq!(ok(&mut c, &["WAIT", "1", "0"]), Value::Int(1));
    // The deadline gives the count so far (WAIT 1 0 first, so it does not
    // depend on how fast the replica ACKs).
    ok(&mut c, &["SET", "k", "2"]);
    assert_eq!(ok(&mut c, &["WAIT", "1", "0"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["WAIT", "2", "100"]), Value::Int(1));

    let r2 = start_replica(&m, &[]);
    wait_synced(&m, &[&r1, &r2]);
    ok(&mut c, &["SET", "k", "3"]);
    assert_eq!(ok(&mut c, &["WAIT", "2", "0"]), Value::Int(2));

    // A stopped replica does not acknowledge: the count at the deadline.
    let pid = r2.process.pid() as i32;
    // SAFETY: signals to a child process this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    ok(&mut c, &["SET", "k", "4"]);
    let one = ok(&mut c, &["WAIT", "1", "0"]);
    let stopped = ok(&mut c, &["WAIT", "2", "100"]);
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert_eq!((one, stopped), (Value::Int(1), Value::Int(1)));
    assert_eq!(ok(&mut c, &["WAIT", "2", "0"]), Value::Int(2));

    // Inside MULTI it never blocks. (The count is Redis's quirk: right
    // after a WAIT that blocked, Redis 7.0.15 answers 0 here, its woff
    // including the GETACK it sent; so only the shape is checked.)
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["SET", "k", "5"]);
    ok(&mut c, &["WAIT", "3", "0"]);
    let replies = ok(&mut c, &["EXEC"]);
    assert!(
        matches!(replies.items(), [Value::Simple(_), Value::Int(0..=2)]),
        "{replies:?}"
    );

    let mut rc = r1.conn();
    assert_eq!(
        rc.call(&[b"WAIT", b"1", b"0"]),
        b"-ERR WAIT cannot be used with replica instances. Please also note that since \
          Redis 4.0 if a replica is configured to be writable (which is not the default) \
          writes to replicas are just local and are not propagated.\r\n"
            .to_vec()
    );
}

#[test]
fn wait_counts_replicas_redis_master() {
    wait_counts_replicas(Master::Redis);
}

#[test]
fn wait_counts_replicas_hozon_master() {
    wait_counts_replicas(Master::Hozon);
}
