//! Differential tests for blocked XREADGROUP readers and SWAPDB, checked
//! against Redis 7.0: a swap that leaves no stream under a waited-on key
//! fails its readers, one that brings a stream serves or keeps them.

use crate::harness::Pair;
use crate::stream_group::{wait_blocked, Client};

/// Redis's unit/type/stream-cgroups "Blocking XREADGROUP: swapped DB, key
/// doesn't exist" and "… key is not a stream" (Redis's
/// scanDatabaseForDeletedStreams): the readers answer that the key no
/// longer exists; plain XREAD readers keep waiting.
#[test]
fn swapdb_away_from_a_stream_fails_its_blocked_readers() {
    for resp3 in [false, true] {
        let mut p = Pair::new();
        if resp3 {
            p.resp3();
        }
        p.script(
            "SELECT 9\n\
             XADD mystream 666 f v\n\
             XGROUP CREATE mystream mygroup $",
        );
        // Database 4 has no such key.
        let mut a = Client::new(&p, resp3);
        a.call("SELECT 9");
        a.send("XREADGROUP GROUP mygroup Alice BLOCK 0 STREAMS mystream >");
        a.assert_waiting();
        let mut x = Client::new(&p, resp3);
        x.call("SELECT 9");
        x.send("XREAD BLOCK 0 STREAMS mystream $");
        x.assert_waiting();
        wait_blocked(&mut p, 2);
        p.check(&["SWAPDB", "4", "9"]);
        a.reply();
        x.assert_waiting();
        wait_blocked(&mut p, 1);
        // The plain reader is served by the next entry in its database.
        p.check(&["XADD", "mystream", "700", "f", "v"]);
        p.check(&["SELECT", "4"]);
        p.check(&["XADD", "mystream", "800", "f", "v"]);
        x.reply();
        wait_blocked(&mut p, 0);
        // A list in its place: the same error.
        p.script(
            "FLUSHALL\n\
             LPUSH mystream e1\n\
             SELECT 9\n\
             XADD mystream 666 f v\n\
             XGROUP CREATE mystream mygroup $",
        );
        let mut b = Client::new(&p, resp3);
        b.call("SELECT 9");
        b.send("XREADGROUP GROUP mygroup Bob BLOCK 0 STREAMS mystream >");
        b.assert_waiting();
        wait_blocked(&mut p, 1);
        p.check(&["SWAPDB", "4", "9"]);
        b.reply();
        wait_blocked(&mut p, 0);
    }
}
