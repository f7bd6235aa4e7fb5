//! Scenario 4: what the master reports while a replica is online: INFO
//! replication (fields, order, the slave line), ROLE, INFO stats, CLIENT
//! LIST; and the replica's view of the same ids.

use crate::fake_replica::FakeReplica;
use crate::harness::{
    info, info_int, ok, script, start_replica, wait_synced, wait_until, Conn, Master, SyncMode,
    Value, PATIENCE,
};

/// INFO replication's field names in order.
fn field_names(conn: &mut Conn) -> Vec<String> {
    ok(conn, &["INFO", "replication"])
        .text()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, _)| k.to_string())
        .collect()
}

/// `ip=…,port=…,state=…,offset=…,lag=…` as pairs, in order.
fn slave_line(line: &str) -> Vec<(String, String)> {
    line.split(',')
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .unwrap_or_else(|| panic!("slave line {line:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn info_and_role_with_replica(master: Master) {
    let m = master.start(&SyncMode::Disk.args());
    let mut c = m.conn();
    let before = info(&mut c, "replication");
    assert_eq!(before["role"], "master");
    assert_eq!(before["connected_slaves"], "0");
    assert_eq!(before["repl_backlog_active"], "0");
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 0);
    script(&mut c, "SET a 1\nSELECT 2\nSET b 2");

    let r = start_replica(&m, &[]);
    wait_synced(&m, &[&r]);
    script(&mut c, "SET c 3");
    wait_synced(&m, &[&r]);
    // The replica's ACK (once a second) reaches the slave line and ROLE.
    let (fields, slave) = wait_until(PATIENCE, "the replica's ACK of the master's offset", || {
        let fields = info(&mut c, "replication");
        let Some(line) = fields.get("slave0") else {
            return Err(format!("no slave0 line: {fields:?}"));
        };
        let slave = slave_line(line);
        let acked = slave.iter().find(|(k, _)| k == "offset").map(|(_, v)| v);
        match (acked, fields.get("master_repl_offset")) {
            (Some(a), Some(o)) if a == o => Ok((fields.clone(), slave)),
            _ => Err(format!(
                "slave0:{line} master_repl_offset:{:?}",
                fields.get("master_repl_offset")
            )),
        }
    });
    let offset: i64 = fields["master_repl_offset"].parse().expect("offset");
    // Replicas are not counted as clients (this connection is the one).
    assert_eq!(info_int(&mut c, "clients", "connected_clients"), 1);
    let names: Vec<&str> = slave.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["ip", "port", "state", "offset", "lag"]);
    assert_eq!(slave[0].1, "127.0.0.1");
    assert_eq!(slave[1].1, r.port().to_string());
    assert_eq!(slave[2].1, "online");
    let lag: i64 = slave[4].1.parse().expect("lag is an integer");
    assert!(lag >= 0, "lag={lag}");

    assert_eq!(
        field_names(&mut c),
        [
            "role",
            "connected_slaves",
            "slave0",
            "master_failover_state",
            "master_replid",
            "master_replid2",
            "master_repl_offset",
            "second_repl_offset",
            "repl_backlog_active",
            "repl_backlog_size",
            "repl_backlog_first_byte_offset",
            "repl_backlog_histlen",
        ]
    );
    assert_eq!(fields["role"], "master");
    assert_eq!(fields["connected_slaves"], "1");
    assert_eq!(fields["master_failover_state"], "no-failover");
    assert!(offset > 0, "master_repl_offset:{offset}");
    assert_eq!(fields["master_replid2"], "0".repeat(40));
    assert_eq!(fields["second_repl_offset"], "-1");
    assert_eq!(fields["repl_backlog_active"], "1");
    assert_eq!(fields["repl_backlog_size"], "1048576");
    // The backlog was created at the first sync, when the offset was 0.
    assert_eq!(fields["repl_backlog_first_byte_offset"], "1");
    assert_eq!(fields["repl_backlog_histlen"], offset.to_string());

    // The replica follows the master's history.
    let mut rc = r.conn();
    let ri = info(&mut rc, "replication");
    assert_eq!(ri["role"], "slave");
    assert_eq!(ri["master_host"], "127.0.0.1");
    assert_eq!(ri["master_port"], m.port().to_string());
    assert_eq!(ri["master_link_status"], "up");
    assert_eq!(ri["master_replid"], fields["master_replid"]);

    // ROLE: ["master", offset, [[ip, "port", "acked offset"]]].
    wait_until(PATIENCE, "ROLE to show the replica's ACK", || {
        let role = ok(&mut c, &["ROLE"]);
        let offset = info_int(&mut c, "replication", "master_repl_offset");
        let bulk = |s: String| Value::Bulk(s.into_bytes());
        let expected = Value::Array(vec![
            bulk("master".into()),
            Value::Int(offset),
            Value::Array(vec![Value::Array(vec![
                bulk("127.0.0.1".into()),
                bulk(r.port().to_string()),
                bulk(offset.to_string()),
            ])]),
        ]);
        if role == expected {
            Ok(())
        } else {
            Err(format!("ROLE {role:?}, expected {expected:?}"))
        }
    });

    let stats = info(&mut c, "stats");
    assert_eq!(stats["sync_full"], "1");
    assert_eq!(stats["sync_partial_ok"], "0");
    assert_eq!(stats["sync_partial_err"], "0");
    let out: i64 = stats["total_net_repl_output_bytes"].parse().expect("bytes");
    assert!(out > 0, "total_net_repl_output_bytes:{out}");

    // CLIENT LIST: the replica's connection, flag S.
    let replicas = ok(&mut c, &["CLIENT", "LIST", "TYPE", "replica"]).text();
    let lines: Vec<&str> = replicas.lines().collect();
    assert_eq!(lines.len(), 1, "{replicas}");
    assert!(lines[0].contains(" flags=S "), "{}", lines[0]);

    // The replica leaves: no slave line, the backlog stays.
    drop(r);
    wait_until(PATIENCE, "the master to see the replica gone", || {
        let f = info(&mut c, "replication");
        match (f["connected_slaves"].as_str(), f.contains_key("slave0")) {
            ("0", false) => Ok(()),
            s => Err(format!("{s:?}")),
        }
    });
    assert_eq!(info(&mut c, "replication")["repl_backlog_active"], "1");
    assert_eq!(
        ok(&mut c, &["ROLE"]).items()[2],
        Value::Array(vec![]),
        "ROLE still lists a replica"
    );
}

#[test]
fn info_and_role_redis_master() {
    info_and_role_with_replica(Master::Redis);
}

#[test]
fn info_and_role_hozon_master() {
    info_and_role_with_replica(Master::Hozon);
}

/// A replica's `REPLCONF ip-address` and `listening-port` are what INFO and
/// ROLE show; `CLIENT LIST/KILL TYPE replica|slave` find its connection.
fn announced_address_and_client_type(master: Master) {
    let m = master.start(&SyncMode::Disk.args());
    let mut c = m.conn();
    let mut f = FakeReplica::connect(m.port());
    f.send(&["REPLCONF", "ip-address", "10.9.8.7"]);
    assert_eq!(f.line(), "+OK");
    let start = f.attach(7777);
    let line: String = wait_until(PATIENCE, "the announced address", || {
        let fields = info(&mut c, "replication");
        match fields.get("slave0") {
            Some(l) if l.starts_with("ip=10.9.8.7,port=7777,state=online,") => Ok(l.clone()),
            other => Err(format!("slave0: {other:?}")),
        }
    });
    assert!(line.contains(",lag="), "{line}");
    // ROLE shows the ACKed offset (the fake ACKed its start once).
    let bulk = |s: &str| Value::Bulk(s.as_bytes().to_vec());
    let expected = Value::Array(vec![Value::Array(vec![
        bulk("10.9.8.7"),
        bulk("7777"),
        bulk(&start.to_string()),
    ])]);
    wait_until(PATIENCE, "ROLE with the announced address", || {
        let role = ok(&mut c, &["ROLE"]);
        match role.items()[2] == expected {
            true => Ok(()),
            false => Err(format!("{role:?}")),
        }
    });
    for kind in ["replica", "slave"] {
        let listed = ok(&mut c, &["CLIENT", "LIST", "TYPE", kind]).text();
        assert_eq!(listed.lines().count(), 1, "TYPE {kind}: {listed}");
    }
    assert_eq!(ok(&mut c, &["CLIENT", "LIST", "TYPE", "master"]).text(), "");
    assert_eq!(
        ok(&mut c, &["CLIENT", "KILL", "TYPE", "master"]),
        Value::Int(0)
    );
    assert_eq!(
        ok(&mut c, &["CLIENT", "KILL", "TYPE", "slave"]),
        Value::Int(1)
    );
    f.until_closed();
    wait_until(PATIENCE, "no replica left", || {
        match info_int(&mut c, "replication", "connected_slaves") {
            0 => Ok(()),
            n => Err(format!("connected_slaves:{n}")),
        }
    });
}

#[test]
fn announced_address_redis_master() {
    announced_address_and_client_type(Master::Redis);
}

#[test]
fn announced_address_hozon_master() {
    announced_address_and_client_type(Master::Hozon);
}
