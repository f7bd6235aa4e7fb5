//! Checks of the suite's own tools: the dataset comparison sees each kind
//! of difference, and reads the dataset alike on redis-server and
//! hozon-server (so a hozon master's failures are replication's).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::dataset::{assert_same_ports, populate, Counters};
use crate::harness::{script, start_hozon, start_redis, Conn};

#[test]
fn dataset_reads_alike_on_redis_and_hozon() {
    let redis = start_redis(&[]);
    let hozon = start_hozon(&[]);
    populate(&mut Conn::connect(redis.port));
    populate(&mut Conn::connect(hozon.port));
    let keys = assert_same_ports(redis.port, hozon.port, Counters::Exact);
    assert!(keys > 2000, "{keys} keys");
}

#[test]
fn comparison_sees_every_kind_of_difference() {
    let changes = [
        "SET s1 other",
        "PEXPIRE ttl_s 95000000",
        "PERSIST h",
        "HSET bighash f1 changed",
        "LSET biglist 700 changed",
        "ZADD bigzset 0.5 m3",
        "SREM bigints 7000",
        "XCLAIM st g1 alice 0 4-1",
        "XGROUP SETID st g2 3-1",
        "XADD st 10-1 x 1",
        "SELECT 9\nSET only_here 1",
        "SELECT 3\nDEL nothing\nSELECT 15\nDEL s15",
    ];
    for change in changes {
        // Both filled now: TTLs are compared within 2 s.
        let a = start_redis(&[]);
        populate(&mut Conn::connect(a.port));
        let b = start_redis(&[]);
        let mut conn = Conn::connect(b.port);
        populate(&mut conn);
        assert_same_ports(a.port, b.port, Counters::Exact);
        script(&mut conn, change);
        let seen = catch_unwind(AssertUnwindSafe(|| {
            assert_same_ports(a.port, b.port, Counters::Exact)
        }));
        assert!(seen.is_err(), "the comparison missed {change:?}");
    }
}
