//! SORT … STORE is logged as received (Redis propagates it so): replayed
//! from the AOF, with its BY and GET patterns reading the other keys, it
//! rebuilds the same list, and a SORT that stored nothing deletes the
//! destination after a restart too.

use std::sync::Arc;

use hozon::config::AppendFsync;
use hozon::persist::io::RealIo;

use crate::common::{dump, durable_config, open, run};

#[test]
fn sort_store_replays_to_the_same_lists() {
    let dir = tempfile::tempdir().unwrap();
    let config = || durable_config(dir.path(), AppendFsync::Always);
    let before = {
        let mut engine = open(config(), Arc::new(RealIo));
        let mut s = engine.new_session();
        for words in [
            &["RPUSH", "ids", "3", "1", "2", "5", "4"][..],
            &[
                "MSET", "w_1", "9", "w_2", "7", "w_3", "8", "w_4", "1", "w_5", "2",
            ],
            &["HSET", "o_1", "name", "one"],
            &["HSET", "o_3", "name", "three"],
            &["SADD", "set", "delta", "alpha", "charlie"],
            &[
                "SORT",
                "ids",
                "BY",
                "w_*",
                "GET",
                "#",
                "GET",
                "o_*->name",
                "STORE",
                "by_weight",
            ],
            &["SORT", "ids", "DESC", "LIMIT", "1", "3", "STORE", "desc"],
            &["SORT", "set", "BY", "nosort", "STORE", "alpha"],
            &["SET", "gone", "x"],
            &["SORT", "nosuch", "STORE", "gone"],
        ] {
            let reply = run(&mut engine, &mut s, words);
            assert!(
                !matches!(reply, hozon::Reply::Error(_)),
                "{words:?}: {reply:?}"
            );
        }
        dump(&mut engine)
    };
    assert!(before.keys().any(|(_, k)| k == "by_weight"));
    assert!(!before.keys().any(|(_, k)| k == "gone"));
    let mut reopened = open(config(), Arc::new(RealIo));
    assert_eq!(dump(&mut reopened), before);
}
