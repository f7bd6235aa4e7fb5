//! `replica-announce-ip` and `replica-announce-port`: a hozon replica
//! sends them in its handshake, so a redis-server master lists it under
//! the announced address exactly as it lists a redis-server replica with
//! the same settings; CONFIG GET/SET and the `slave-` aliases as Redis's.

use testkit::harness::{start_redis, Conn};

use crate::{call, hozon_replica, info_field, wait_caught_up, Value};

/// The master's `slaveN` line of the replica announcing `port`, without
/// the offset and lag that move.
fn slave_line_for(master: &mut Conn, port: &str) -> Option<String> {
    (0..4).find_map(|i| {
        let line = info_field(master, "replication", &format!("slave{i}"))?;
        let address: Vec<&str> = line.split(',').take(3).collect();
        (address.get(1) == Some(&format!("port={port}").as_str())).then(|| address.join(","))
    })
}

#[test]
fn the_master_lists_a_replica_under_its_announced_address() {
    let master = start_redis(&[]);
    let mut m = Conn::connect(master.port);
    let port = master.port.to_string();
    let announce = ["--replica-announce-ip", "10.1.2.3"];
    let redis_replica = start_redis(
        &[
            &["--replicaof", "127.0.0.1", &port][..],
            &announce,
            &["--replica-announce-port", "4567"],
        ]
        .concat(),
    );
    let hozon_replica = hozon_replica(
        &master,
        &[&announce[..], &["--slave-announce-port", "4568"]].concat(),
    );
    let mut r = Conn::connect(redis_replica.port);
    let mut h = Conn::connect(hozon_replica.port);
    wait_caught_up(&mut m, &mut r);
    wait_caught_up(&mut m, &mut h);
    let redis_line = slave_line_for(&mut m, "4567").expect("the redis replica's slave line");
    let hozon_line = slave_line_for(&mut m, "4568").expect("the hozon replica's slave line");
    assert_eq!(redis_line, "ip=10.1.2.3,port=4567,state=online");
    assert_eq!(hozon_line, "ip=10.1.2.3,port=4568,state=online");
    for conn in [&mut r, &mut h] {
        for (name, expected) in [
            ("replica-announce-ip", "10.1.2.3"),
            ("slave-announce-ip", "10.1.2.3"),
        ] {
            assert_eq!(
                call(conn, &["CONFIG", "GET", name]),
                Value::Array(vec![
                    Value::Bulk(name.as_bytes().to_vec()),
                    Value::Bulk(expected.as_bytes().to_vec())
                ])
            );
        }
        assert!(matches!(
            call(conn, &["CONFIG", "SET", "replica-announce-port", "65536"]),
            Value::Error(_)
        ));
    }
}
