//! Access records (format 1.4): each key's LRU idle time or LFU counter.

use super::*;
use crate::keyspace::{access, KeyAccess};
use crate::persist::snapshot::format::{FLAG_ACCESS, FORMAT_MINOR_WITH_ACCESS};
use crate::persist::snapshot::writer::save_keyspace_with_header;
use crate::rdb::writer::KeyAccessRecord;

/// A keyspace of strings and one list long enough to split across small
/// blocks, key `k<i>` with access field `field(i)`.
fn keyspace_with_access(field: &dyn Fn(usize) -> u32) -> Keyspace {
    let mut ks = Keyspace::new(16);
    for i in 0..50usize {
        let key = format!("k{i}");
        let value = if i == 7 {
            let mut l = List::new();
            for j in 0..400 {
                l.push(End::Tail, format!("element-{j}").as_bytes());
            }
            Value::List(Box::new(l))
        } else {
            Value::Str(Blob::new(format!("value-{i}").as_bytes()))
        };
        ks.db_mut(i % 3).insert_new(key.as_bytes(), value);
        if i % 4 == 0 {
            ks.db_mut(i % 3)
                .set_expire(key.as_bytes(), NOW_MS + 1_000_000);
        }
        assert!(ks.db_mut(i % 3).set_access(key.as_bytes(), field(i)));
    }
    ks
}

fn save_with(ks: &Keyspace, key_access: KeyAccessRecord, block_bytes: usize) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tempdir");
    let header = HeaderInfo::new(NOW_MS, ks.db_count()).with_key_access(key_access);
    save_keyspace_with_header(
        ks,
        header,
        Arc::new(RealIo),
        dir.path(),
        "dump.hoz",
        block_bytes,
    )
    .expect("save");
    RealIo
        .map(&dir.path().join("dump.hoz"))
        .expect("map")
        .to_vec()
}

fn accesses(data: &[u8]) -> BTreeMap<Vec<u8>, Option<KeyAccess>> {
    let loaded = load(data, &read(1, limits(), NOW_MS)).expect("load");
    loaded.keys().map(|k| (k.key.to_vec(), k.access)).collect()
}

#[test]
fn lru_idle_times_round_trip_in_whole_and_split_values() {
    let clock = access::lru_clock(NOW_MS);
    let ks = keyspace_with_access(&|i| clock - 10 * i as u32);
    for block_bytes in [1 << 20, 256] {
        let data = save_with(&ks, KeyAccessRecord::Idle { clock }, block_bytes);
        assert_eq!(
            u16::from_le_bytes([data[10], data[11]]),
            FORMAT_MINOR_WITH_ACCESS
        );
        assert_ne!(le_u32(&data, 12) & FLAG_ACCESS, 0);
        let got = accesses(&data);
        assert_eq!(got.len(), 50);
        for i in 0..50u64 {
            assert_eq!(
                got[format!("k{i}").as_bytes()],
                Some(KeyAccess::Idle(10 * i)),
                "k{i}, blocks of {block_bytes}"
            );
        }
        if block_bytes == 256 {
            let summary = read_summary(&data).expect("summary");
            assert!(summary.stats.split_values > 0, "the list is split");
        }
    }
}

#[test]
fn lfu_counters_round_trip_and_load_into_applies_them() {
    let minutes = access::lfu_minutes(NOW_MS);
    let ks = keyspace_with_access(&|i| (minutes << 8) | (i as u32 + 3));
    let record = KeyAccessRecord::Freq {
        minutes,
        decay_time: 1,
    };
    let data = save_with(&ks, record, 256);
    for (key, a) in accesses(&data) {
        let i: u32 = std::str::from_utf8(&key[1..]).unwrap().parse().unwrap();
        assert_eq!(a, Some(KeyAccess::Freq(i as u8 + 3)));
    }
    // Loaded under LFU, each key has its counter; under LRU, a new key's
    // field (the record does not apply).
    let now = crate::clock::now_ms();
    let mut lfu = Keyspace::new(16).with_access_mode(true, now);
    load_into(&data, &mut lfu, &read(0, limits(), NOW_MS)).expect("load_into");
    let field = lfu.db(7 % 3).access(b"k7").expect("k7");
    assert_eq!(field & 0xff, 10);
    assert_eq!(field >> 8, access::lfu_minutes(crate::clock::now_ms()));
    let mut lru = Keyspace::new(16).with_access_mode(false, now);
    load_into(&data, &mut lru, &read(0, limits(), NOW_MS)).expect("load_into");
    let field = lru.db(1).access(b"k1").expect("k1");
    assert!(access::idle_ms(access::lru_clock(crate::clock::now_ms()), field) <= 2000);
}

#[test]
fn without_a_policy_no_record_and_the_old_format() {
    let ks = keyspace_with_access(&|i| i as u32);
    let data = save_with(&ks, KeyAccessRecord::None, 256);
    assert_eq!(u16::from_le_bytes([data[10], data[11]]), 1, "a 1.1 file");
    assert_eq!(le_u32(&data, 12) & FLAG_ACCESS, 0);
    assert!(accesses(&data).values().all(Option::is_none));
    // An LRU load of a file without records: idle from the load.
    let now = crate::clock::now_ms();
    let mut lru = Keyspace::new(16).with_access_mode(false, now);
    load_into(&data, &mut lru, &read(0, limits(), NOW_MS)).expect("load_into");
    let field = lru.db(2).access(b"k2").expect("k2");
    assert!(access::idle_ms(access::lru_clock(crate::clock::now_ms()), field) <= 2000);
}
