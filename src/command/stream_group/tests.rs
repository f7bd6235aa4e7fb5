use super::*;
use crate::command::test_support::Fixture;
use crate::command::Effect;
use crate::engine::Engine;

/// Replaces the number after each `TIME` with `T`, checking it is a
/// time taken while the test ran.
fn masked(effects: Vec<String>, since_ms: i64) -> Vec<String> {
    let until_ms = crate::engine::now_ms();
    effects
        .into_iter()
        .map(|line| {
            let mut words: Vec<String> = line.split(' ').map(String::from).collect();
            for i in 1..words.len() {
                if words[i - 1] == "TIME" {
                    let t: i64 = words[i].parse().expect("TIME takes an integer");
                    assert!(
                        (since_ms..=until_ms).contains(&t),
                        "time {t} out of the test's window"
                    );
                    words[i] = "T".into();
                }
            }
            words.join(" ")
        })
        .collect()
}

fn fixture_with_entries(n: u64) -> Fixture {
    let mut f = Fixture::new();
    for i in 1..=n {
        f.run(&format!("XADD s {i}-0 f v{i}"));
    }
    f.run("XGROUP CREATE s g 0");
    f.effects();
    f
}

#[test]
fn xreadgroup_logs_one_xclaim_per_entry_and_the_group_id() {
    let since = crate::engine::now_ms();
    let mut f = fixture_with_entries(2);
    let reply = f.run("XREADGROUP GROUP g alice COUNT 5 STREAMS s >");
    assert!(matches!(reply, Reply::Array(ref a) if a.len() == 1));
    assert_eq!(
        masked(f.db0_effects(), since),
        vec![
            "XCLAIM s g alice 0 1-0 TIME T RETRYCOUNT 1 FORCE JUSTID LASTID 1-0",
            "XCLAIM s g alice 0 2-0 TIME T RETRYCOUNT 1 FORCE JUSTID LASTID 2-0",
            "XGROUP SETID s g 2-0 ENTRIESREAD 2",
        ]
    );
    // Nothing new: no effect, null reply.
    assert_eq!(
        f.run("XREADGROUP GROUP g alice STREAMS s >"),
        Reply::NullArray
    );
    assert!(f.db0_effects().is_empty());
    // A history read re-delivers and logs the new count.
    f.run("XREADGROUP GROUP g alice STREAMS s 0");
    assert_eq!(
        masked(f.db0_effects(), since),
        vec![
            "XCLAIM s g alice 0 1-0 TIME T RETRYCOUNT 2 FORCE JUSTID LASTID 2-0",
            "XCLAIM s g alice 0 2-0 TIME T RETRYCOUNT 2 FORCE JUSTID LASTID 2-0",
        ]
    );
}

#[test]
fn xreadgroup_noack_logs_the_consumer_and_the_group_id() {
    let mut f = fixture_with_entries(3);
    f.run("XREADGROUP GROUP g bob NOACK COUNT 2 STREAMS s >");
    assert_eq!(
        f.db0_effects(),
        vec![
            "XGROUP CREATECONSUMER s g bob",
            "XGROUP SETID s g 2-0 ENTRIESREAD 2",
        ]
    );
    // A history read that creates its consumer logs the creation.
    f.run("XREADGROUP GROUP g carol STREAMS s 0");
    assert_eq!(f.db0_effects(), vec!["XGROUP CREATECONSUMER s g carol"]);
}

#[test]
fn xclaim_with_relative_idle_is_logged_with_an_absolute_time() {
    let mut f = fixture_with_entries(2);
    f.run("XREADGROUP GROUP g alice STREAMS s >");
    f.effects();
    let before = crate::engine::now_ms();
    let reply = f.run("XCLAIM s g bob 0 1-0 IDLE 5000 JUSTID");
    assert_eq!(reply, Reply::Array(vec![Reply::bulk(b"1-0")]));
    let effects = f.db0_effects();
    assert_eq!(effects.len(), 1);
    let words: Vec<&str> = effects[0].split(' ').collect();
    assert_eq!(&words[..6], &["XCLAIM", "s", "g", "bob", "0", "1-0"]);
    let time: i64 = words[7].parse().expect("an absolute time");
    assert!(time <= crate::engine::now_ms() - 5000 && time >= before - 5000);
    assert_eq!(
        &words[8..],
        &["RETRYCOUNT", "1", "FORCE", "JUSTID", "LASTID", "2-0"]
    );
    // LASTID alone moves the group: logged as SETID.
    f.run("XCLAIM s g bob 0 9-0 LASTID 5-0");
    assert_eq!(f.db0_effects(), vec!["XGROUP SETID s g 5-0 ENTRIESREAD 2"]);
    // Acknowledgements are logged as received, only when they count.
    f.run("XACK s g 1-0 7-0");
    assert_eq!(f.db0_effects(), vec!["XACK s g 1-0 7-0"]);
    f.run("XACK s g 1-0");
    assert!(f.db0_effects().is_empty());
}

#[test]
fn xautoclaim_logs_claims_and_drops_deleted_entries() {
    let since = crate::engine::now_ms();
    let mut f = fixture_with_entries(3);
    f.run("XREADGROUP GROUP g alice STREAMS s >");
    f.run("XDEL s 2-0");
    f.effects();
    let reply = f.run("XAUTOCLAIM s g bob 0 0 COUNT 10 JUSTID");
    assert_eq!(
        reply,
        Reply::Array(vec![
            Reply::bulk(b"0-0"),
            Reply::Array(vec![Reply::bulk(b"1-0"), Reply::bulk(b"3-0")]),
            Reply::Array(vec![Reply::bulk(b"2-0")]),
        ])
    );
    assert_eq!(
        masked(f.db0_effects(), since),
        vec![
            "XCLAIM s g bob 0 1-0 TIME T RETRYCOUNT 1 FORCE JUSTID LASTID 3-0",
            "XCLAIM s g alice 0 2-0 TIME T RETRYCOUNT 1 FORCE JUSTID LASTID 3-0",
            "XCLAIM s g bob 0 3-0 TIME T RETRYCOUNT 1 FORCE JUSTID LASTID 3-0",
        ]
    );
}

#[test]
fn lag_and_entries_read_follow_redis_estimates() {
    let mut s = Stream::new();
    let fields = || -> crate::types::stream::Fields {
        vec![(Blob::new(b"f"), Blob::new(b"v"))].into_boxed_slice()
    };
    for i in 1..=5 {
        s.append(StreamId::new(i, 0), fields());
    }
    assert_eq!(s.estimate_entries_read(StreamId::new(5, 0)), 5);
    assert_eq!(s.estimate_entries_read(StreamId::new(1, 0)), 1);
    assert_eq!(s.estimate_entries_read(StreamId::new(0, 5)), 0);
    assert_eq!(
        s.estimate_entries_read(StreamId::new(3, 0)),
        ENTRIES_READ_INVALID
    );
    assert_eq!(
        s.estimate_entries_read(StreamId::new(6, 0)),
        ENTRIES_READ_INVALID
    );
    let mut group = ConsumerGroup {
        entries_read: ENTRIES_READ_INVALID,
        ..ConsumerGroup::default()
    };
    assert_eq!(group_lag(&s, &group), Some(5));
    group.last_id = StreamId::new(3, 0);
    assert_eq!(group_lag(&s, &group), None);
    s.remove(StreamId::new(4, 0));
    assert!(range_has_tombstones(&s, StreamId::new(3, 0), StreamId::MAX));
    assert!(!range_has_tombstones(
        &s,
        StreamId::new(5, 0),
        StreamId::MAX
    ));
    group.entries_read = 3;
    assert_eq!(group_lag(&s, &group), None);
    // No deletion after the group's ID: its counter is trusted.
    group.last_id = StreamId::new(5, 0);
    assert_eq!(group_lag(&s, &group), Some(2));
}

/// Replaces the value of every `seen-time` field (replay creates
/// consumers at replay time, as in Redis) with 0.
fn without_seen_time(reply: Reply) -> Reply {
    match reply {
        Reply::Map(pairs) => Reply::Map(
            pairs
                .into_iter()
                .map(|(k, v)| {
                    if k == Reply::bulk(b"seen-time") {
                        (k, Reply::Int(0))
                    } else {
                        (k, without_seen_time(v))
                    }
                })
                .collect(),
        ),
        Reply::Array(items) => Reply::Array(items.into_iter().map(without_seen_time).collect()),
        other => other,
    }
}

fn run_argv(engine: &mut Engine, session: &mut crate::command::Session, argv: &[Vec<u8>]) -> Reply {
    let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    engine.execute(session, &refs)
}

/// A stream exercising every piece of group state.
const SCENARIO: &[&str] = &[
    "XADD s 1-1 a 1",
    "XADD s 2-1 b 2 c 3",
    "XADD s 3-1 d 4",
    "XADD s 4-1 e 5",
    "XADD s 5-1 f 6",
    "XGROUP CREATE s g1 0",
    "XGROUP CREATE s g2 $ ENTRIESREAD 5",
    "XGROUP CREATE s g3 2-1",
    "XGROUP CREATECONSUMER s g1 idle",
    "XREADGROUP GROUP g1 alice COUNT 2 STREAMS s >",
    "XREADGROUP GROUP g1 bob STREAMS s >",
    "XREADGROUP GROUP g1 alice STREAMS s 0",
    "XREADGROUP GROUP g3 carol NOACK STREAMS s >",
    "XCLAIM s g1 carol 0 4-1 IDLE 100 RETRYCOUNT 7",
    "XCLAIM s g1 carol 0 5-1 TIME 12345",
    "XDEL s 3-1",
    "XACK s g1 1-1",
    "XAUTOCLAIM s g1 dave 0 0 COUNT 1",
    "XADD s 6-1 g 7",
    "XGROUP SETID s g2 1-1",
];

#[test]
fn replaying_the_logged_effects_rebuilds_the_same_groups() {
    let (mut a, mut sa) = crate::command::test_support::engine();
    let mut log: Vec<Effect> = Vec::new();
    for line in SCENARIO {
        let reply = crate::command::test_support::run(&mut a, &mut sa, line);
        assert!(!reply.is_error(), "{line}: {reply:?}");
        log.extend(a.take_effects());
    }
    let (mut b, mut sb) = crate::command::test_support::engine();
    for effect in &log {
        let reply = run_argv(&mut b, &mut sb, &effect.argv);
        assert!(!reply.is_error(), "{:?}: {reply:?}", effect.argv);
    }
    let full = "XINFO STREAM s FULL COUNT 0";
    assert_eq!(
        without_seen_time(crate::command::test_support::run(&mut a, &mut sa, full)),
        without_seen_time(crate::command::test_support::run(&mut b, &mut sb, full))
    );
}

#[test]
fn a_rewritten_stream_recreates_groups_pels_consumers_and_ids() {
    let (mut a, mut sa) = crate::command::test_support::engine();
    for line in SCENARIO {
        crate::command::test_support::run(&mut a, &mut sa, line);
    }
    // A second, empty stream with a group; a third whose PEL refers
    // only to deleted entries.
    for line in [
        "XGROUP CREATE empty g $ MKSTREAM",
        "XADD gone 1-0 f v",
        "XGROUP CREATE gone g 0",
        "XREADGROUP GROUP g c STREAMS gone >",
        "XDEL gone 1-0",
    ] {
        crate::command::test_support::run(&mut a, &mut sa, line);
    }
    let (mut b, mut sb) = crate::command::test_support::engine();
    for key in ["s", "empty", "gone"] {
        let value = a
            .core()
            .keyspace
            .db(0)
            .get(key.as_bytes())
            .cloned()
            .expect("the scenario created the key");
        for argv in crate::persist::rewrite::commands_for(key.as_bytes(), &value) {
            let reply = run_argv(&mut b, &mut sb, &argv);
            assert!(!reply.is_error(), "{argv:?}: {reply:?}");
        }
        let full = format!("XINFO STREAM {key} FULL COUNT 0");
        assert_eq!(
            without_seen_time(crate::command::test_support::run(&mut a, &mut sa, &full)),
            without_seen_time(crate::command::test_support::run(&mut b, &mut sb, &full)),
            "{key}"
        );
    }
}

#[test]
fn a_served_blocked_reader_logs_its_claims_and_failures_are_errors() {
    let since = crate::engine::now_ms();
    let (mut engine, mut writer) = crate::command::test_support::engine();
    let mut reader = engine.new_session();
    let run = crate::command::test_support::run;
    run(&mut engine, &mut writer, "XGROUP CREATE s g $ MKSTREAM");
    let blocked = run(
        &mut engine,
        &mut reader,
        "XREADGROUP GROUP g r BLOCK 0 STREAMS s >",
    );
    assert!(reader.blocked.is_some(), "{blocked:?}");
    engine.take_effects();
    run(&mut engine, &mut writer, "XADD s 1-1 f v");
    engine.take_effects();
    let ready = engine.take_ready_keys();
    assert_eq!(ready.len(), 1);
    let reply = engine
        .serve_blocked(&mut reader, 0, b"s")
        .expect("the new entry serves the reader");
    assert_eq!(
        reply,
        Reply::Array(vec![Reply::Array(vec![
            Reply::bulk(b"s"),
            Reply::Array(vec![entry_reply(
                StreamId::new(1, 1),
                &vec![(Blob::new(b"f"), Blob::new(b"v"))].into_boxed_slice()
            )]),
        ])])
    );
    let effects = engine
        .take_effects()
        .into_iter()
        .map(|e| {
            e.argv
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        masked(effects, since),
        vec![
            "XCLAIM s g r 0 1-1 TIME T RETRYCOUNT 1 FORCE JUSTID LASTID 1-1",
            "XGROUP SETID s g 1-1 ENTRIESREAD 1",
        ]
    );
    // The group goes away while the reader waits: NOGROUP.
    run(
        &mut engine,
        &mut reader,
        "XREADGROUP GROUP g r BLOCK 0 STREAMS s >",
    );
    run(&mut engine, &mut writer, "XGROUP DESTROY s g");
    engine.take_ready_keys();
    let reply = engine.serve_blocked(&mut reader, 0, b"s");
    assert_eq!(
        reply,
        Some(Reply::err(
            "NOGROUP the consumer group this client was blocked on no longer exists"
        ))
    );
    // The key goes away: UNBLOCKED.
    run(&mut engine, &mut writer, "XGROUP CREATE s g $");
    run(
        &mut engine,
        &mut reader,
        "XREADGROUP GROUP g r BLOCK 0 STREAMS s >",
    );
    run(&mut engine, &mut writer, "DEL s");
    engine.take_ready_keys();
    let reply = engine.serve_blocked(&mut reader, 0, b"s");
    assert_eq!(
        reply,
        Some(Reply::err("UNBLOCKED the stream key no longer exists"))
    );
    assert!(engine
        .take_effects()
        .iter()
        .all(|e| e.argv[0] != b"XREADGROUP"));
}
