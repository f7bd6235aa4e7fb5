use super::*;
use crate::rand::Rng;
use crate::types::list::End;
use crate::types::List;
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use std::collections::BTreeMap;

/// A value in comparable form (tests use strings and lists).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Canon {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
    Other(String),
}

fn canon(value: &Value) -> Canon {
    match value {
        Value::Str(s) => Canon::Str(s.to_vec()),
        Value::List(l) => Canon::List(l.iter().map(|e| e.to_vec()).collect()),
        other => Canon::Other(format!("{other:?}")),
    }
}

/// (database, key) → (value, expiry).
type Image = BTreeMap<(usize, Vec<u8>), (Canon, Option<i64>)>;
/// One database of the model: key → (value, expiry).
type ModelDb = BTreeMap<Vec<u8>, (Canon, Option<i64>)>;

fn image(keyspace: &Keyspace) -> Image {
    let mut out = Image::new();
    for (index, db) in keyspace.iter().enumerate() {
        for (key, value) in db.iter() {
            out.insert((index, key.to_vec()), (canon(value), db.expire_at(key)));
        }
    }
    out
}

/// One step; panics on a record emitted twice.
fn step(keyspace: &mut Keyspace, max_records: usize, out: &mut Image) -> bool {
    keyspace.capture_step(max_records, &mut |db, key, value, at| {
        let previous = out.insert((db, key.to_vec()), (canon(value), at));
        assert!(
            previous.is_none(),
            "db {db} key {:?} emitted twice",
            String::from_utf8_lossy(key)
        );
    })
}

fn finish(keyspace: &mut Keyspace, max_records: usize, out: &mut Image) {
    for _ in 0..1_000_000 {
        if step(keyspace, max_records, out) {
            assert!(!keyspace.is_capturing());
            for db in keyspace.iter() {
                assert!(db.capture.is_none(), "capture state left behind");
                assert!(!db.main.is_resize_paused(), "resizing left paused");
            }
            return;
        }
    }
    panic!("capture did not finish");
}

fn string(s: &str) -> Value {
    Value::Str(Blob::new(s.as_bytes()))
}

fn list(items: &[&str]) -> Value {
    let mut l = List::new();
    for item in items {
        l.push(End::Tail, item.as_bytes());
    }
    Value::List(Box::new(l))
}

fn filled(dbs: usize, keys_per_db: usize) -> Keyspace {
    let mut ks = Keyspace::new(dbs);
    for index in 0..dbs {
        let db = ks.db_mut(index);
        for k in 0..keys_per_db {
            let key = format!("k{k}");
            if k % 3 == 0 {
                db.insert_new(key.as_bytes(), list(&["a", "b"]));
            } else {
                db.insert_new(key.as_bytes(), string(&format!("v{index}-{k}")));
            }
            if k % 5 == 0 {
                db.set_expire(key.as_bytes(), 1_000 + k as i64);
            }
        }
    }
    ks
}

#[test]
fn no_capture_step_is_done_at_once() {
    let mut ks = filled(2, 10);
    let mut out = Image::new();
    assert!(step(&mut ks, 10, &mut out));
    assert!(out.is_empty());
}

#[test]
fn unmodified_keyspace_is_emitted_once_each() {
    let mut ks = filled(3, 500);
    let expected = image(&ks);
    ks.begin_capture();
    let mut out = Image::new();
    finish(&mut ks, 7, &mut out);
    assert_eq!(out, expected);
    assert_eq!(image(&ks), expected);
}

#[test]
fn writes_before_the_cursor_emit_the_old_state() {
    let mut ks = filled(1, 2_000);
    let expected = image(&ks);
    ks.begin_capture();
    let mut out = Image::new();
    step(&mut ks, 100, &mut out);
    let db = ks.db_mut(0);
    for k in 0..2_000 {
        let key = format!("k{k}");
        match k % 6 {
            0 => {
                db.remove(key.as_bytes());
            }
            1 => db.set(key.as_bytes(), string("new"), false),
            2 => {
                if let Some(Value::List(l)) = db.get_mut(key.as_bytes()) {
                    l.push(End::Head, b"z");
                }
            }
            3 => {
                db.set_expire(key.as_bytes(), 5);
            }
            4 => {
                db.remove_expire(key.as_bytes());
            }
            _ => {
                db.remove(key.as_bytes());
                db.insert_new(key.as_bytes(), string("again"));
            }
        }
        db.insert_new(format!("new{k}").as_bytes(), string("fresh"));
    }
    finish(&mut ks, 100, &mut out);
    assert_eq!(out, expected);
}

#[test]
fn capture_started_in_the_middle_of_a_resize_is_exact() {
    let mut ks = Keyspace::new(1);
    let mut k = 0;
    while !(ks.db(0).main.is_rehashing() && ks.db(0).len() > 3_000) {
        ks.db_mut(0)
            .insert_new(format!("k{k}").as_bytes(), string("v"));
        k += 1;
    }
    let expected = image(&ks);
    ks.begin_capture();
    assert!(
        ks.db(0).main.is_rehashing(),
        "rehashing is paused, not finished"
    );
    let mut out = Image::new();
    let mut round = 0;
    while !step(&mut ks, 50, &mut out) {
        // Delete and recreate keys: recreated ones land in the new
        // table, at another position than the one they were saved from.
        let db = ks.db_mut(0);
        for j in 0..20 {
            let key = format!("k{}", (round * 37 + j * 11) % k);
            if db.remove(key.as_bytes()).is_some() {
                db.insert_new(key.as_bytes(), string("recreated"));
            }
        }
        round += 1;
    }
    assert_eq!(out, expected);
}

#[test]
fn flush_swap_and_clear_keep_the_capture_exact() {
    let mut ks = filled(4, 1_000);
    let expected = image(&ks);
    ks.begin_capture();
    let mut out = Image::new();
    step(&mut ks, 300, &mut out);
    // FLUSHDB as src/command/keys.rs does it: take the database out,
    // read it, drop it.
    let flushed = std::mem::take(ks.db_mut(0));
    assert_eq!(flushed.len(), 1_000);
    drop(flushed);
    ks.db_mut(0).insert_new(b"after-flush", string("x"));
    // SWAPDB.
    let (a, b) = ks.two_dbs_mut(1, 2);
    a.swap(b);
    ks.db_mut(1).set(b"k1", string("changed after swap"), false);
    ks.db_mut(2).remove(b"k2");
    // FLUSHALL-style clear in place.
    ks.db_mut(3).clear();
    ks.db_mut(3).insert_new(b"k1", string("new"));
    finish(&mut ks, 300, &mut out);
    assert_eq!(out, expected);
}

#[test]
fn a_database_held_outside_the_keyspace_delays_completion() {
    let mut ks = filled(2, 100);
    let expected = image(&ks);
    ks.begin_capture();
    let held = std::mem::take(ks.db_mut(1));
    let mut out = Image::new();
    for _ in 0..100 {
        assert!(!step(&mut ks, 1_000, &mut out), "finished without db 1");
    }
    // Put back (like a second swap), then finish.
    *ks.db_mut(1) = held;
    finish(&mut ks, 1_000, &mut out);
    assert_eq!(out, expected);
}

#[test]
fn overload_forces_a_resize_and_stays_exact() {
    let mut ks = filled(1, 64);
    let expected = image(&ks);
    let buckets = ks.db(0).main.bucket_count();
    ks.begin_capture();
    let mut out = Image::new();
    step(&mut ks, 5, &mut out);
    for k in 0..buckets * FORCE_RESIZE_RATIO {
        ks.db_mut(0)
            .set(format!("grow{k}").as_bytes(), string("g"), false);
    }
    assert!(
        !ks.db(0).main.is_resize_paused(),
        "escape hatch resumed resizing"
    );
    // Once a resize frozen by the capture (if any) completes, the next
    // insert grows the table to fit in one go.
    ks.db_mut(0).rehash_for(std::time::Duration::from_secs(1));
    ks.db_mut(0).insert_new(b"one more", string("x"));
    ks.db_mut(0).rehash_for(std::time::Duration::from_secs(1));
    let main = &ks.db(0).main;
    assert!(main.bucket_count() >= main.len(), "table grew to fit");
    for k in 0..64 {
        ks.db_mut(0).remove(format!("k{k}").as_bytes());
    }
    finish(&mut ks, 5, &mut out);
    assert_eq!(out, expected);
}

#[test]
fn bookkeeping_is_proportional_to_touched_keys() {
    let mut ks = filled(1, 20_000);
    ks.begin_capture();
    for k in 0..50 {
        ks.db_mut(0)
            .set(format!("k{k}").as_bytes(), string("x"), false);
        ks.db_mut(0)
            .insert_new(format!("n{k}").as_bytes(), string("x"));
    }
    let part = ks.db(0).capture.as_ref().expect("capturing");
    let skipped: usize = part.skip.values().map(Vec::len).sum();
    assert!(
        skipped <= 100,
        "{skipped} skip entries for 100 touched keys"
    );
    assert!(part.early.len() <= 50);
    // Visited positions drop their skip lists.
    let mut out = Image::new();
    let half = part.end_position / 2;
    while ks.db(0).capture.as_ref().expect("capturing").next_position < half {
        step(&mut ks, 100, &mut out);
    }
    let part = ks.db(0).capture.as_ref().expect("capturing");
    assert!(part.skip.keys().all(|&p| p >= part.next_position));
    assert!(part.skip.values().map(Vec::len).sum::<usize>() < skipped);
    finish(&mut ks, 1_000, &mut out);
    assert_eq!(out.len(), 20_000);
}

#[test]
fn end_capture_aborts_and_resumes_resizing() {
    let mut ks = filled(2, 300);
    ks.begin_capture();
    let held = std::mem::take(ks.db_mut(1));
    ks.db_mut(0).set(b"k1", string("x"), false);
    ks.end_capture();
    assert!(!ks.is_capturing());
    assert!(ks.db(0).capture.is_none());
    assert!(!ks.db(0).main.is_resize_paused());
    // A database taken out during the aborted capture drops its stale
    // part when written to or stepped over.
    *ks.db_mut(1) = held;
    ks.db_mut(1).set(b"k2", string("y"), false);
    assert!(ks.db(1).capture.is_none());
    assert!(!ks.db(1).main.is_resize_paused());
    // A new capture sees the current state.
    let expected = image(&ks);
    ks.begin_capture();
    ks.begin_capture();
    let mut out = Image::new();
    finish(&mut ks, 64, &mut out);
    assert_eq!(out, expected);
}

#[test]
fn dropping_the_keyspace_releases_everything_a_held_database_could_pin() {
    let mut ks = filled(3, 100);
    ks.begin_capture();
    let mut held = std::mem::take(ks.db_mut(1));
    let part = held.capture.as_ref().expect("captured");
    let shared = Arc::clone(part.shared.as_ref().expect("live"));
    drop(ks);
    assert!(
        shared.retired().is_empty(),
        "dropped databases kept by the ended capture"
    );
    // The held database drops its stale part on its next write.
    held.set(b"k1", string("x"), false);
    assert!(held.capture.is_none());
    assert!(!held.main.is_resize_paused());
}

#[test]
fn keyspace_clone_does_not_share_the_capture() {
    let mut ks = filled(1, 100);
    ks.begin_capture();
    let copy = ks.clone();
    assert!(!copy.is_capturing());
    assert!(copy.db(0).capture.is_none());
    drop(copy);
    let expected = image(&ks);
    let mut out = Image::new();
    finish(&mut ks, 10, &mut out);
    assert_eq!(out, expected);
}

// ---- property test --------------------------------------------------

const DBS: usize = 3;
const KEYS: u16 = 400;

#[derive(Debug, Clone)]
enum Op {
    Set {
        db: u8,
        key: u16,
        list: bool,
        keep_ttl: bool,
    },
    Append {
        db: u8,
        key: u16,
    },
    Remove {
        db: u8,
        key: u16,
    },
    Expire {
        db: u8,
        key: u16,
        at: u16,
    },
    Persist {
        db: u8,
        key: u16,
    },
    Move {
        from: u8,
        to: u8,
        key: u16,
    },
    Grow {
        db: u8,
        count: u16,
    },
    Flush {
        db: u8,
    },
    Clear {
        db: u8,
    },
    Swap {
        a: u8,
        b: u8,
    },
    Step {
        records: u8,
    },
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let db = u8::arbitrary(g) % DBS as u8;
        let key = u16::arbitrary(g) % KEYS;
        match u8::arbitrary(g) % 40 {
            0..=5 => Op::Set {
                db,
                key,
                list: bool::arbitrary(g),
                keep_ttl: bool::arbitrary(g),
            },
            6..=10 => Op::Append { db, key },
            11..=14 => Op::Remove { db, key },
            15..=17 => Op::Expire {
                db,
                key,
                at: u16::arbitrary(g),
            },
            18..=19 => Op::Persist { db, key },
            20..=21 => Op::Move {
                from: db,
                to: u8::arbitrary(g) % DBS as u8,
                key,
            },
            22 => Op::Grow {
                db,
                count: u16::arbitrary(g) % 700,
            },
            23 => Op::Flush { db },
            24 => Op::Clear { db },
            25 => Op::Swap {
                a: db,
                b: u8::arbitrary(g) % DBS as u8,
            },
            _ => Op::Step {
                records: u8::arbitrary(g) % 64,
            },
        }
    }
}

#[derive(Debug, Clone)]
struct Scenario {
    /// Seed of the keyspace present when the capture begins.
    seed: u64,
    ops: Vec<Op>,
}

impl Arbitrary for Scenario {
    fn arbitrary(g: &mut Gen) -> Scenario {
        let len = usize::arbitrary(g) % 600;
        Scenario {
            seed: u64::arbitrary(g),
            ops: (0..len).map(|_| Op::arbitrary(g)).collect(),
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Scenario>> {
        let seed = self.seed;
        Box::new(self.ops.shrink().map(move |ops| Scenario { seed, ops }))
    }
}

fn key_name(key: u16) -> Vec<u8> {
    format!("key:{key}").into_bytes()
}

/// A keyspace of random sizes (some tables caught mid-resize), with
/// strings, lists and TTLs.
fn initial(seed: u64) -> Keyspace {
    let mut rng = Rng::with_seed(seed);
    let mut ks = Keyspace::new(DBS);
    for index in 0..DBS {
        let db = ks.db_mut(index);
        let inserts = rng.below(u64::from(KEYS) + 200);
        for _ in 0..inserts {
            let key = key_name(rng.below(u64::from(KEYS) + 200) as u16);
            let value = if rng.below(3) == 0 {
                list(&["x", "y", "z"])
            } else {
                string(&format!("s{}", rng.below(1000)))
            };
            db.set(&key, value, false);
            if rng.below(4) == 0 {
                db.set_expire(&key, rng.below(5_000) as i64);
            }
        }
        for _ in 0..rng.below(u64::from(KEYS)) {
            db.remove(&key_name(rng.below(u64::from(KEYS) + 200) as u16));
        }
    }
    ks
}

fn apply(ks: &mut Keyspace, op: &Op, grown: &mut u64, out: &mut Image) {
    match *op {
        Op::Set {
            db,
            key,
            list: is_list,
            keep_ttl,
        } => {
            let value = if is_list {
                list(&["l"])
            } else {
                string(&format!("set{key}"))
            };
            ks.db_mut(db as usize).set(&key_name(key), value, keep_ttl);
        }
        Op::Append { db, key } => match ks.db_mut(db as usize).get_mut(&key_name(key)) {
            Some(Value::Str(s)) => {
                let mut bytes = s.to_vec();
                bytes.push(b'+');
                *s = Blob::new(&bytes);
            }
            Some(Value::List(l)) => l.push(End::Head, b"+"),
            _ => {}
        },
        Op::Remove { db, key } => {
            ks.db_mut(db as usize).remove(&key_name(key));
        }
        Op::Expire { db, key, at } => {
            ks.db_mut(db as usize)
                .set_expire(&key_name(key), i64::from(at));
        }
        Op::Persist { db, key } => {
            ks.db_mut(db as usize).remove_expire(&key_name(key));
        }
        Op::Move { from, to, key } => {
            if from != to {
                let key = key_name(key);
                let (src, dst) = ks.two_dbs_mut(from as usize, to as usize);
                if src.contains(&key) && !dst.contains(&key) {
                    let at = src.expire_at(&key);
                    let value = src.remove(&key).expect("checked present");
                    dst.insert_new(&key, value);
                    if let Some(at) = at {
                        dst.set_expire(&key, at);
                    }
                }
            }
        }
        Op::Grow { db, count } => {
            for _ in 0..count {
                *grown += 1;
                let key = format!("grown:{grown}");
                ks.db_mut(db as usize)
                    .insert_new(key.as_bytes(), string("g"));
            }
        }
        Op::Flush { db } => {
            let flushed = std::mem::take(ks.db_mut(db as usize));
            let _ = flushed.iter().count();
        }
        Op::Clear { db } => ks.db_mut(db as usize).clear(),
        Op::Swap { a, b } => {
            if a != b {
                let (x, y) = ks.two_dbs_mut(a as usize, b as usize);
                x.swap(y);
            }
        }
        Op::Step { records } => {
            step(ks, usize::from(records), out);
        }
    }
}

/// The same operation on a plain model of the live keyspace.
fn apply_model(model: &mut [ModelDb], op: &Op, grown: &mut u64) {
    match *op {
        Op::Set {
            db,
            key,
            list: is_list,
            keep_ttl,
        } => {
            let value = if is_list {
                Canon::List(vec![b"l".to_vec()])
            } else {
                Canon::Str(format!("set{key}").into_bytes())
            };
            let m = &mut model[db as usize];
            let ttl = if keep_ttl {
                m.get(&key_name(key)).and_then(|(_, at)| *at)
            } else {
                None
            };
            m.insert(key_name(key), (value, ttl));
        }
        Op::Append { db, key } => {
            if let Some((value, _)) = model[db as usize].get_mut(&key_name(key)) {
                match value {
                    Canon::Str(s) => s.push(b'+'),
                    Canon::List(l) => l.insert(0, b"+".to_vec()),
                    Canon::Other(_) => {}
                }
            }
        }
        Op::Remove { db, key } => {
            model[db as usize].remove(&key_name(key));
        }
        Op::Expire { db, key, at } => {
            if let Some((_, ttl)) = model[db as usize].get_mut(&key_name(key)) {
                *ttl = Some(i64::from(at));
            }
        }
        Op::Persist { db, key } => {
            if let Some((_, ttl)) = model[db as usize].get_mut(&key_name(key)) {
                *ttl = None;
            }
        }
        Op::Move { from, to, key } => {
            let key = key_name(key);
            if from != to
                && model[from as usize].contains_key(&key)
                && !model[to as usize].contains_key(&key)
            {
                let entry = model[from as usize].remove(&key).expect("present");
                model[to as usize].insert(key, entry);
            }
        }
        Op::Grow { db, count } => {
            for _ in 0..count {
                *grown += 1;
                model[db as usize].insert(
                    format!("grown:{grown}").into_bytes(),
                    (Canon::Str(b"g".to_vec()), None),
                );
            }
        }
        Op::Flush { db } | Op::Clear { db } => model[db as usize].clear(),
        Op::Swap { a, b } => model.swap(a as usize, b as usize),
        Op::Step { .. } => {}
    }
}

fn capture_is_exact(scenario: Scenario) -> TestResult {
    let mut ks = initial(scenario.seed);
    let expected = image(&ks);
    let mut model: Vec<ModelDb> = vec![ModelDb::new(); DBS];
    for ((db, key), entry) in &expected {
        model[*db].insert(key.clone(), entry.clone());
    }
    ks.begin_capture();
    let mut out = Image::new();
    let (mut grown, mut grown_model) = (0, 0);
    for op in &scenario.ops {
        apply(&mut ks, op, &mut grown, &mut out);
        apply_model(&mut model, op, &mut grown_model);
    }
    finish(&mut ks, 13, &mut out);
    assert_eq!(out, expected, "captured image differs from the start");
    // The hooks did not change what the writes did.
    let mut live = Image::new();
    for (db, m) in model.iter().enumerate() {
        for (key, entry) in m {
            live.insert((db, key.clone()), entry.clone());
        }
    }
    assert_eq!(image(&ks), live, "live keyspace differs from the model");
    for (index, db) in ks.iter().enumerate() {
        for (key, _) in db.iter() {
            assert!(db.contains(key), "db {index}: lookup after capture");
        }
    }
    TestResult::passed()
}

#[test]
fn random_writes_during_a_capture_never_change_what_it_emits() {
    QuickCheck::new()
        .tests(300)
        .quickcheck(capture_is_exact as fn(Scenario) -> TestResult);
}
