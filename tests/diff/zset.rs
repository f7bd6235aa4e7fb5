//! Differential tests: sorted sets (ZADD … ZSCAN), RESP2 and RESP3.
//!
//! Sorted-set replies are ordered, so almost everything is compared byte
//! for byte. The exceptions are marked in scripts with a leading `~`
//! (compared as a multiset): ZSCAN over a hash table, ZRANDMEMBER samples.
//! Random commands are compared where Redis is deterministic and checked
//! for size, distinctness and membership otherwise.

use std::collections::BTreeSet;

use quickcheck::{Arbitrary, Gen, TestResult};

use crate::harness::{
    array_elements, bulk_payloads, check_both_protocols, check_owned, compare_sequence,
    del_command, identical, quickcheck_ops, show, with_thread_pair, Pair,
};

/// `ZADD key score member …` for members `prefix0..prefixN` with scores
/// from `score(i)`.
fn zadd_many(key: &str, n: usize, prefix: &str, score: impl Fn(usize) -> String) -> Vec<String> {
    let mut args = vec!["ZADD".to_string(), key.to_string()];
    for i in 0..n {
        args.push(score(i));
        args.push(format!("{prefix}{i}"));
    }
    args
}

#[test]
fn zadd_options_flags_and_errors() {
    check_both_protocols(
        r#"
        ZADD z 1 a 2 b 3 c
        ZADD z 1 a
        ZADD z CH 5 a 2 b 9 d
        ZRANGE z 0 -1 WITHSCORES
        ZADD z NX 100 a 4 e
        ZADD z XX 100 a 4 f
        ZADD z XX CH 100 a 4 f
        ZADD z GT CH 50 a 200 b
        ZADD z LT CH 60 a 1 b
        ZADD z XX GT CH 1000 a
        ZADD z xx lt ch 0 a
        ZRANGE z 0 -1 WITHSCORES
        ZADD z INCR 5 a
        ZADD z INCR NX 5 a
        ZADD z INCR XX 5 nosuch
        ZADD z INCR GT -1 a
        ZADD z INCR LT -1 a
        ZADD z INCR GT 1 a
        ZADD z NX XX 1 a
        ZADD z NX GT 1 a
        ZADD z NX LT 1 a
        ZADD z GT LT 1 a
        ZADD z INCR 1 a 2 b
        ZADD z 1
        ZADD z 1 a 2
        ZADD z NX
        ZADD z CH XX
        ZADD z abc a
        ZADD z nan a
        ZADD z 1e400 a
        ZADD z 1e-400 a
        ZADD z " 1" a
        ZADD z "1 " a
        ZADD z 1 a x b
        ZADD z "" a
        ZADD z inf a -INF b +inf c 0x10 d 1e3 e .5 f 5. g
        ZRANGE z 0 -1 WITHSCORES
        ZADD z INCR -inf a
        ZADD z INCR +inf b
        ZSCORE z a
        ZADD newkey XX 1 a
        EXISTS newkey
        ZADD newkey XX INCR 1 a
        EXISTS newkey
        ZADD newkey NX INCR 3 a
        ZADD newkey GT 1 b
        ZRANGE newkey 0 -1 WITHSCORES
        SET str x
        ZADD str 1 a
        ZADD str abc a
        ZADD str 1 a 2
        "#,
    );
}

#[test]
fn zincrby_and_score_formatting() {
    check_both_protocols(
        r#"
        ZINCRBY z 1.1 a
        ZINCRBY z 0.1 b
        ZINCRBY z 0.2 b
        ZSCORE z b
        ZINCRBY z -0 c
        ZSCORE z c
        ZADD z INCR -0 d
        ZSCORE z d
        ZADD z -0 e
        ZSCORE z e
        ZADD z 100000000000000000 big 1e19 bigger 0.00001 tiny 3.0 three
        ZRANGE z 0 -1 WITHSCORES
        ZMSCORE z big bigger tiny three nosuch
        ZINCRBY z abc a
        ZINCRBY z 1 a b
        ZINCRBY z nx a
        ZINCRBY z incr a
        ZINCRBY z 1e400 a
        ZADD inf inf a
        ZINCRBY inf -inf a
        ZINCRBY inf 1 a
        ZSCORE inf a
        ZINCRBY nokey 2.5 m
        ZSCORE nokey m
        SET str x
        ZINCRBY str 1 a
        "#,
    );
}

#[test]
fn negative_zero_is_kept_only_in_the_skiplist_encoding() {
    let mut p = Pair::new();
    let long = "x".repeat(70);
    p.script(&format!(
        r#"
            ZADD lp -0 a
            ZSCORE lp a
            ZADD sk -0 {long}
            ZADD sk -0 a
            OBJECT ENCODING sk
            ZSCORE sk a
            ZRANGE sk 0 -1 WITHSCORES
            ZSCAN sk 0 MATCH a
            ZUNION 2 lp sk WEIGHTS -1 1 WITHSCORES
            ZUNIONSTORE st 1 lp WEIGHTS -1
            ZSCORE st a
            ZRANGESTORE st2 sk 0 0
            ZSCORE st2 a
            "#
    ));
}

#[test]
fn range_by_rank() {
    check_both_protocols(
        r#"
        ZADD z 1 a 2 b 3 c 4 d 5 e
        ZRANGE z 0 -1
        ZRANGE z 0 -1 WITHSCORES
        ZRANGE z 1 3 withscores
        ZRANGE z -2 -1
        ZRANGE z -100 100
        ZRANGE z 3 1
        ZRANGE z 5 10
        ZRANGE z -1 -2
        ZRANGE z 0 0 REV
        ZRANGE z 0 1 REV WITHSCORES
        ZRANGE z -3 -1 REV
        ZREVRANGE z 0 -1
        ZREVRANGE z 0 -1 WITHSCORES
        ZREVRANGE z 1 2
        ZREVRANGE z 10 20
        ZRANGE z 0 -1 LIMIT 0 1
        ZRANGE z 0 -1 LIMIT 0 -1
        ZREVRANGE z 0 -1 LIMIT 0 1
        ZRANGE z a b
        ZRANGE z 0 1.5
        ZRANGE z 0 -1 WITHSCORES extra
        ZRANGE z 0 -1 LIMIT 0
        ZRANGE z 0 -1 LIMIT x 1
        ZREVRANGE z 0 -1 REV
        ZREVRANGE z 0 -1 BYSCORE
        ZRANGE z 0 -1 BYSCORE BYLEX
        ZRANGE z 0 -1 REV REV
        ZRANGE nokey 0 -1
        ZRANGE nokey 0 -1 WITHSCORES
        ZRANGE nokey a b
        ZREVRANGE nokey 0 -1
        ZRANGE z 0
        ZREVRANGE z 0
        SET str x
        ZRANGE str 0 -1
        ZRANGE str a b
        "#,
    );
}

#[test]
fn range_by_score() {
    check_both_protocols(
        r#"
        ZADD z -inf ninf 1 a 2 b 2 bb 3 c 4.5 d 10 e +inf pinf
        ZRANGEBYSCORE z -inf +inf
        ZRANGEBYSCORE z -inf +inf WITHSCORES
        ZRANGEBYSCORE z 2 3
        ZRANGEBYSCORE z (2 3
        ZRANGEBYSCORE z 2 (3
        ZRANGEBYSCORE z (2 (3
        ZRANGEBYSCORE z (1 (2
        ZRANGEBYSCORE z 3 2
        ZRANGEBYSCORE z 2 2
        ZRANGEBYSCORE z (2 2
        ZRANGEBYSCORE z -inf (-inf
        ZRANGEBYSCORE z +inf +inf
        ZRANGEBYSCORE z 100 200
        ZRANGEBYSCORE z -200 -100
        ZRANGEBYSCORE z "" 2
        ZRANGEBYSCORE z " 2" 3
        ZRANGEBYSCORE z "( 2" 3
        ZRANGEBYSCORE z ( 3
        ZRANGEBYSCORE z (1e400 +inf
        ZRANGEBYSCORE z -1e400 0x2
        ZRANGEBYSCORE z 1 2 LIMIT 0 1
        ZRANGEBYSCORE z -inf +inf LIMIT 2 3
        ZRANGEBYSCORE z -inf +inf LIMIT 2 -1
        ZRANGEBYSCORE z -inf +inf LIMIT 2 0
        ZRANGEBYSCORE z -inf +inf LIMIT -1 5
        ZRANGEBYSCORE z -inf +inf LIMIT 100 5
        ZRANGEBYSCORE z -inf +inf LIMIT 7 5
        ZRANGEBYSCORE z -inf +inf LIMIT 8 5
        ZRANGEBYSCORE z 2 3 LIMIT 1 10 WITHSCORES
        ZRANGEBYSCORE z 2 3 WITHSCORES LIMIT 1 10
        ZRANGEBYSCORE z 2 3 LIMIT 5 1
        ZREVRANGEBYSCORE z +inf -inf
        ZREVRANGEBYSCORE z 3 2 WITHSCORES
        ZREVRANGEBYSCORE z (3 (1
        ZREVRANGEBYSCORE z 2 3
        ZREVRANGEBYSCORE z +inf -inf LIMIT 1 2
        ZREVRANGEBYSCORE z +inf -inf LIMIT 1 -1 WITHSCORES
        ZRANGE z 2 3 BYSCORE
        ZRANGE z (2 +inf BYSCORE LIMIT 1 2 WITHSCORES
        ZRANGE z +inf (2 BYSCORE REV
        ZRANGE z 3 2 REV BYSCORE LIMIT 0 1
        ZRANGE z 2 3 BYSCORE REV
        ZCOUNT z -inf +inf
        ZCOUNT z 2 3
        ZCOUNT z (2 3
        ZCOUNT z 3 2
        ZCOUNT z (2 (2
        ZCOUNT z 1e400 inf
        ZCOUNT nokey 0 1
        ZRANGEBYSCORE z a 1
        ZRANGEBYSCORE z 1 b
        ZRANGEBYSCORE z nan 1
        ZRANGEBYSCORE z (nan 1
        ZRANGEBYSCORE z "1 " 2
        ZRANGEBYSCORE z 1 2 LIMIT
        ZRANGEBYSCORE z 1 2 LIMIT 1
        ZRANGEBYSCORE z 1 2 LIMIT a 1
        ZRANGEBYSCORE z 1 2 LIMIT 1 b
        ZRANGEBYSCORE z 1 2 REV
        ZRANGEBYSCORE z 1 2 BYSCORE
        ZRANGEBYSCORE z 1 2 WITHSCORE
        ZCOUNT z a 1
        ZRANGEBYSCORE nokey 0 1
        ZRANGEBYSCORE nokey a 1
        SET str x
        ZRANGEBYSCORE str 0 1
        ZCOUNT str 0 1
        ZCOUNT str a b
        "#,
    );
}

#[test]
fn range_by_lex() {
    check_both_protocols(
        r#"
        ZADD z 0 a 0 b 0 c 0 d 0 e 0 f 0 "" 0 aa 0 ab
        ZRANGEBYLEX z - +
        ZRANGEBYLEX z [b [d
        ZRANGEBYLEX z (b [d
        ZRANGEBYLEX z [b (d
        ZRANGEBYLEX z (b (d
        ZRANGEBYLEX z [a (b
        ZRANGEBYLEX z [ (a
        ZRANGEBYLEX z ( +
        ZRANGEBYLEX z - [c
        ZRANGEBYLEX z [c +
        ZRANGEBYLEX z + -
        ZRANGEBYLEX z - -
        ZRANGEBYLEX z + +
        ZRANGEBYLEX z [d [b
        ZRANGEBYLEX z (b (b
        ZRANGEBYLEX z [b [b
        ZRANGEBYLEX z - + LIMIT 2 3
        ZRANGEBYLEX z - + LIMIT 2 -1
        ZRANGEBYLEX z - + LIMIT -2 3
        ZRANGEBYLEX z - + LIMIT 100 3
        ZRANGEBYLEX z - + LIMIT 0 0
        ZREVRANGEBYLEX z + -
        ZREVRANGEBYLEX z [d [b
        ZREVRANGEBYLEX z (d (b LIMIT 1 1
        ZREVRANGEBYLEX z [b [d
        ZRANGE z [b [d BYLEX
        ZRANGE z [d [b BYLEX REV
        ZRANGE z - + BYLEX LIMIT 1 2
        ZRANGE z - + BYLEX REV LIMIT 1 2
        ZLEXCOUNT z - +
        ZLEXCOUNT z [b [d
        ZLEXCOUNT z (b (d
        ZLEXCOUNT z [d [b
        ZLEXCOUNT z + -
        ZLEXCOUNT nokey - +
        ZRANGEBYLEX z a b
        ZRANGEBYLEX z [a b
        ZRANGEBYLEX z +a [b
        ZRANGEBYLEX z "" +
        ZRANGEBYLEX z - + WITHSCORES
        ZRANGE z - + BYLEX WITHSCORES
        ZRANGEBYLEX z - + LIMIT 1
        ZRANGEBYLEX z - + LIMIT a 1
        ZLEXCOUNT z a b
        ZLEXCOUNT z 1 2
        ZRANGEBYLEX nokey - +
        ZRANGEBYLEX nokey a b
        ZREMRANGEBYLEX z [aa [ab
        ZREMRANGEBYLEX z (e +
        ZREMRANGEBYLEX z + -
        ZREMRANGEBYLEX z a b
        ZRANGE z 0 -1
        ZREMRANGEBYLEX z - +
        EXISTS z
        SET str x
        ZRANGEBYLEX str - +
        ZLEXCOUNT str - +
        ZREMRANGEBYLEX str - +
        "#,
    );
}

#[test]
fn lex_bounds_with_nul_bytes_and_mixed_scores_in_a_listpack() {
    let mut p = Pair::new();
    p.check(&["ZADD", "z", "0", "a", "0", "b", "0", "c"]);
    p.check_bytes(&[b"ZRANGEBYLEX", b"z", b"-\x00x", b"+"]);
    p.check_bytes(&[b"ZRANGEBYLEX", b"z", b"[a\x00", b"+"]);
    p.check_bytes(&[b"ZRANGEBYSCORE", b"z", b"0\x00junk", b"1"]);
    // Mixed scores: Redis scans a listpack linearly, which this mirrors.
    p.script(
        r#"
        ZADD m 1 d 2 a 3 c 4 b 5 e
        ZRANGEBYLEX m [b [d
        ZRANGEBYLEX m - [c
        ZRANGEBYLEX m [c +
        ZRANGEBYLEX m [b + LIMIT 1 5
        ZREVRANGEBYLEX m [d [b
        ZLEXCOUNT m [b [d
        ZREMRANGEBYLEX m [a [c
        ZRANGE m 0 -1
        "#,
    );
}

#[test]
fn zrangestore_variants_and_destination_handling() {
    check_both_protocols(
        r#"
        ZADD src 1 a 2 b 3 c 4 d 5 e
        ZRANGESTORE dst src 0 -1
        ZRANGE dst 0 -1 WITHSCORES
        OBJECT ENCODING dst
        ZRANGESTORE dst src 1 2 REV
        ZRANGE dst 0 -1 WITHSCORES
        ZRANGESTORE dst src 2 4 BYSCORE LIMIT 1 1
        ZRANGE dst 0 -1 WITHSCORES
        ZRANGESTORE dst src +inf (2 BYSCORE REV
        ZRANGE dst 0 -1 WITHSCORES
        ZRANGESTORE dst src [b [d BYLEX
        ZRANGE dst 0 -1 WITHSCORES
        ZRANGESTORE dst src (d - BYLEX REV LIMIT 0 2
        ZRANGE dst 0 -1 WITHSCORES
        ZRANGESTORE dst src 10 20
        EXISTS dst
        ZRANGESTORE dst src 0 0
        ZRANGESTORE dst nokey 0 -1
        EXISTS dst
        ZRANGESTORE dst nokey 0 -1
        SET dst string
        EXPIRE dst 100
        ZRANGESTORE dst src 0 1
        TYPE dst
        TTL dst
        SET dst string
        ZRANGESTORE dst src 5 6
        EXISTS dst
        ZRANGESTORE src src 1 2
        ZRANGE src 0 -1
        ZRANGESTORE dst src 0 -1 WITHSCORES
        ZRANGESTORE dst src 0 -1 LIMIT 0 1
        ZRANGESTORE dst src a b
        ZRANGESTORE dst src a b BYSCORE
        ZRANGESTORE dst src a b BYLEX
        ZRANGESTORE dst src 0
        SET str x
        ZRANGESTORE dst str 0 -1
        "#,
    );
}

#[test]
fn cardinality_ranks_and_scores() {
    check_both_protocols(
        r#"
        ZADD z 1 a 2 b 2 c 3 d
        ZCARD z
        ZCARD nokey
        ZRANK z a
        ZRANK z c
        ZRANK z nosuch
        ZREVRANK z a
        ZREVRANK z d
        ZREVRANK z nosuch
        ZRANK nokey a
        ZREVRANK nokey a
        ZSCORE z b
        ZSCORE z nosuch
        ZSCORE nokey a
        ZMSCORE z a nosuch d
        ZMSCORE nokey a b
        ZMSCORE z
        ZRANK z
        ZRANK z a b
        ZSCORE z
        ZCARD
        ZCARD z z
        SET str x
        ZCARD str
        ZRANK str a
        ZREVRANK str a
        ZSCORE str a
        ZMSCORE str a
        "#,
    );
}

#[test]
fn removal_commands_delete_empty_keys() {
    check_both_protocols(
        r#"
        ZADD z 1 a 2 b 3 c 4 d 5 e 6 f
        ZREM z a nosuch a
        ZREM z nosuch
        ZREM nokey a
        ZREMRANGEBYRANK z 0 0
        ZREMRANGEBYRANK z -1 -1
        ZREMRANGEBYRANK z 5 10
        ZREMRANGEBYRANK z 2 1
        ZRANGE z 0 -1
        ZREMRANGEBYSCORE z (3 4
        ZREMRANGEBYSCORE z 10 20
        ZREMRANGEBYSCORE z 5 1
        ZRANGE z 0 -1 WITHSCORES
        ZREMRANGEBYRANK z 0 -1
        EXISTS z
        ZADD z 1 a 2 b
        ZREM z a b c
        EXISTS z
        ZADD z 1 a 2 b
        ZREMRANGEBYSCORE z -inf +inf
        EXISTS z
        ZREMRANGEBYRANK nokey 0 -1
        ZREMRANGEBYSCORE nokey 0 1
        ZREMRANGEBYRANK z a 1
        ZREMRANGEBYRANK z 0 b
        ZREMRANGEBYSCORE z a 1
        ZREMRANGEBYSCORE nokey a 1
        ZREMRANGEBYRANK z 0
        ZREM z
        SET str x
        ZREM str a
        ZREMRANGEBYRANK str 0 1
        ZREMRANGEBYSCORE str 0 1
        "#,
    );
}

#[test]
fn pops_and_zmpop() {
    check_both_protocols(
        r#"
        ZADD z 1 a 2 b 3 c 4 d 5 e 6 f
        ZPOPMIN z
        ZPOPMAX z
        ZPOPMIN z 2
        ZPOPMAX z 1
        ZPOPMIN z 0
        ZPOPMAX z 100
        EXISTS z
        ZPOPMIN z
        ZPOPMIN z 5
        ZPOPMIN z 0
        ZPOPMIN z -1
        ZPOPMIN z abc
        ZPOPMIN z 1 2
        ZADD z 1 a
        ZPOPMIN z -1
        ZPOPMAX z 0
        ZADD z 1 a 2 b 3 c
        ZMPOP 1 z MIN
        ZMPOP 2 nokey z MAX COUNT 10
        EXISTS z
        ZMPOP 2 nokey z MAX COUNT 10
        ZMPOP 1 z MIN COUNT 1
        ZADD z 1 a 2 b 3 c
        ZMPOP 1 z min count 2
        ZMPOP 0 z MIN
        ZMPOP -1 z MIN
        ZMPOP a z MIN
        ZMPOP 1 z
        ZMPOP 2 z MIN
        ZMPOP 1 z MIDDLE
        ZMPOP 1 z MIN COUNT
        ZMPOP 1 z MIN COUNT 0
        ZMPOP 1 z MIN COUNT -1
        ZMPOP 1 z MIN COUNT a
        ZMPOP 1 z MIN COUNT 1 COUNT 1
        ZMPOP 1 z MIN extra
        ZMPOP 1 z MIN
        SET str x
        ZPOPMIN str
        ZPOPMAX str 2
        ZMPOP 2 nokey str MIN
        ZMPOP 2 z str MIN
        ZPOPMIN
        ZMPOP 1
        "#,
    );
}

#[test]
fn set_operations_weights_and_aggregates() {
    check_both_protocols(
        r#"
        ZADD z1 1 a 2 b 3 c
        ZADD z2 10 b 20 c 30 d
        SADD s1 a d x
        SADD s2 1 2 3
        ZADD z3 1 1 5 3 7 9
        ZUNION 2 z1 z2
        ZUNION 2 z1 z2 WITHSCORES
        ZUNION 2 z1 z2 WEIGHTS 2 0.5 WITHSCORES
        ZUNION 2 z1 z2 AGGREGATE MIN WITHSCORES
        ZUNION 2 z1 z2 AGGREGATE max WITHSCORES
        ZUNION 3 z1 z2 s1 WITHSCORES
        ZUNION 2 s2 z3 WITHSCORES
        ZUNION 2 z1 nokey WITHSCORES
        ZUNION 1 nokey
        ZINTER 2 z1 z2 WITHSCORES
        ZINTER 2 z1 z2 WEIGHTS 1 -1 WITHSCORES
        ZINTER 2 z1 z2 AGGREGATE MAX WITHSCORES
        ZINTER 2 z1 s1 WITHSCORES
        ZINTER 2 s2 z3 WITHSCORES
        ZINTER 2 z1 nokey
        ZINTER 2 z1 z1 WITHSCORES
        ZDIFF 2 z1 z2
        ZDIFF 2 z1 z2 WITHSCORES
        ZDIFF 3 z1 z2 s1 WITHSCORES
        ZDIFF 2 z1 z1
        ZDIFF 1 nokey
        ZDIFF 2 s1 z1 WITHSCORES
        ZINTERCARD 2 z1 z2
        ZINTERCARD 2 z1 z2 LIMIT 1
        ZINTERCARD 2 z1 z2 LIMIT 0
        ZINTERCARD 2 z1 s1
        ZINTERCARD 1 nokey
        ZADD inf1 inf a -inf b
        ZADD inf2 -inf a inf b
        ZUNION 2 inf1 inf2 WITHSCORES
        ZINTER 2 inf1 inf2 WITHSCORES
        ZUNION 2 inf1 inf2 WEIGHTS 0 1 WITHSCORES
        ZINTER 2 inf1 inf2 WEIGHTS 1 0 AGGREGATE MIN WITHSCORES
        ZINTER 2 inf1 inf2 WEIGHTS 1 0 AGGREGATE MAX WITHSCORES
        ZUNIONSTORE dst 2 z1 z2
        ZRANGE dst 0 -1 WITHSCORES
        OBJECT ENCODING dst
        ZINTERSTORE dst 2 z1 z2 WEIGHTS 1 2
        ZRANGE dst 0 -1 WITHSCORES
        ZDIFFSTORE dst 2 z1 z2
        ZRANGE dst 0 -1 WITHSCORES
        ZINTERSTORE dst 2 z1 nokey
        EXISTS dst
        ZINTERSTORE dst 2 z1 nokey
        SET dst x
        EXPIRE dst 100
        ZUNIONSTORE dst 1 z1
        TTL dst
        TYPE dst
        ZUNIONSTORE z1 2 z1 z2 AGGREGATE MIN
        ZRANGE z1 0 -1 WITHSCORES
        ZUNION 0 z1
        ZUNION -1 z1
        ZUNION a z1
        ZUNION 3 z1 z2
        ZUNION 2 z1 z2 WEIGHTS 1
        ZUNION 2 z1 z2 WEIGHTS 1 a
        ZUNION 2 z1 z2 WEIGHTS 1 nan
        ZUNION 2 z1 z2 AGGREGATE avg
        ZUNION 2 z1 z2 AGGREGATE
        ZUNION 2 z1 z2 WITHSCORES WITHSCORES
        ZUNION 2 z1 z2 extra
        ZUNIONSTORE dst 2 z1 z2 WITHSCORES
        ZUNIONSTORE dst 0 z1
        ZINTERSTORE dst 0 z1
        ZDIFFSTORE dst 0 z1
        ZDIFF 2 z1 z2 WEIGHTS 1 1
        ZDIFF 2 z1 z2 AGGREGATE SUM
        ZDIFFSTORE dst 2 z1 z2 WITHSCORES
        ZINTERCARD 0 z1
        ZINTERCARD 2 z1 z2 LIMIT -1
        ZINTERCARD 2 z1 z2 LIMIT a
        ZINTERCARD 2 z1 z2 WITHSCORES
        ZINTERCARD 2 z1 z2 WEIGHTS 1 1
        ZINTERCARD 2 z1 z2 LIMIT
        SET str x
        ZUNION 2 z1 str
        ZINTER 2 str z1 WEIGHTS a b
        ZDIFF 2 z1 str
        ZUNIONSTORE dst 2 z1 str
        ZINTERCARD 2 z1 str
        ZUNION 1
        ZUNIONSTORE dst 1
        "#,
    );
}

#[test]
fn set_operations_over_large_and_hashtable_inputs() {
    let mut p = Pair::new();
    check_owned(
        &mut p,
        &zadd_many("big1", 500, "m", |i| (i % 37).to_string()),
    );
    check_owned(
        &mut p,
        &zadd_many("big2", 300, "m", |i| format!("{}.5", i % 11)),
    );
    let mut sadd = vec!["SADD".to_string(), "hs".to_string()];
    sadd.extend((0..200).map(|i| format!("m{}", i * 2)));
    check_owned(&mut p, &sadd);
    p.script(
        r#"
        ZUNION 3 big1 big2 hs WITHSCORES
        ZINTER 3 big1 big2 hs WEIGHTS 1 2 3 WITHSCORES
        ZDIFF 3 big1 big2 hs WITHSCORES
        ZINTERCARD 3 big1 big2 hs
        ZUNIONSTORE u 3 big1 big2 hs AGGREGATE MAX
        OBJECT ENCODING u
        ZRANGE u 0 -1 WITHSCORES
        ZINTERSTORE i 2 big1 hs
        OBJECT ENCODING i
        ZINTERSTORE i2 2 big1 big2
        OBJECT ENCODING i2
        ZDIFFSTORE d 2 big1 big2
        OBJECT ENCODING d
        ZRANGE d 0 -1 WITHSCORES
        "#,
    );
}

#[test]
fn encoding_boundaries_listpack_to_skiplist() {
    let mut p = Pair::new();
    check_owned(&mut p, &zadd_many("z", 128, "m", |i| i.to_string()));
    p.check(&["OBJECT", "ENCODING", "z"]);
    p.check(&["ZADD", "z", "1000", "extra"]);
    p.check(&["OBJECT", "ENCODING", "z"]);
    p.check(&["ZREM", "z", "extra", "m0", "m1"]);
    p.check(&["OBJECT", "ENCODING", "z"]);
    let member64 = "y".repeat(64);
    let member65 = "y".repeat(65);
    p.script(&format!(
        r#"
            ZADD v 1 {member64}
            OBJECT ENCODING v
            ZADD v 2 {member65}
            OBJECT ENCODING v
            ZREM v {member65}
            OBJECT ENCODING v
            ZADD w 1 {member65}
            OBJECT ENCODING w
            ZADD w2 1 a 2 {member65}
            OBJECT ENCODING w2
            ZRANGE w2 0 -1 WITHSCORES
            ZRANGESTORE small z 0 9
            OBJECT ENCODING small
            ZRANGESTORE lp z 0 127
            OBJECT ENCODING lp
            ZRANGESTORE sk z 0 128
            OBJECT ENCODING sk
            ZRANGESTORE bs z 0 +inf BYSCORE
            OBJECT ENCODING bs
            ZRANGESTORE bs2 z 0 200 BYSCORE
            OBJECT ENCODING bs2
            ZUNIONSTORE u 1 v
            OBJECT ENCODING u
            ZUNIONSTORE u 1 w
            OBJECT ENCODING u
            CONFIG SET zset-max-listpack-entries 4
            ZADD c 1 a 2 b 3 c 4 d
            OBJECT ENCODING c
            ZADD c 5 e
            OBJECT ENCODING c
            CONFIG SET zset-max-listpack-entries 0
            ZADD c0 1 a
            OBJECT ENCODING c0
            CONFIG SET zset-max-listpack-entries 128
            CONFIG SET zset-max-listpack-value 2
            ZADD cv 1 ab
            OBJECT ENCODING cv
            ZADD cv2 1 abc
            OBJECT ENCODING cv2
            CONFIG SET zset-max-listpack-value 64
            "#
    ));
    // Every command over both encodings of the same content.
    check_owned(
        &mut p,
        &zadd_many("small", 100, "k", |i| (i / 3).to_string()),
    );
    check_owned(
        &mut p,
        &zadd_many("large", 100, "k", |i| (i / 3).to_string()),
    );
    check_owned(
        &mut p,
        &zadd_many("large", 1, &"x".repeat(100), |_| "1000".to_string()),
    );
    p.check(&["ZREM", "large", &format!("{}0", "x".repeat(100))]);
    p.check(&["OBJECT", "ENCODING", "large"]);
    for key in ["small", "large"] {
        p.script(&format!(
            r#"
                ZRANGE {key} 10 20 WITHSCORES
                ZREVRANGE {key} 5 9 WITHSCORES
                ZRANGEBYSCORE {key} (5 10 LIMIT 2 4 WITHSCORES
                ZREVRANGEBYSCORE {key} 10 (5 LIMIT 2 4
                ZRANGEBYLEX {key} [k1 (k3
                ZCOUNT {key} 3 7
                ZLEXCOUNT {key} - +
                ZRANK {key} k50
                ZREVRANK {key} k50
                ZRANDMEMBER {key} 1000 WITHSCORES
                ZPOPMIN {key} 3
                ZPOPMAX {key} 3
                ZREMRANGEBYRANK {key} 0 4
                ZREMRANGEBYSCORE {key} 10 12
                ZRANGE {key} 0 -1 WITHSCORES
                "#
        ));
    }
}

#[test]
fn large_sets_rank_and_range_correctness() {
    let mut p = Pair::new();
    const N: usize = 10_000;
    // Scores collide often (i % 1000), so member order breaks ties.
    for chunk in 0..10 {
        let mut args = vec!["ZADD".to_string(), "big".to_string()];
        for i in chunk * 1000..(chunk + 1) * 1000 {
            let k = (i * 7919) % N;
            args.push(((k % 1000) as f64 / 4.0).to_string());
            args.push(format!("member:{k}"));
        }
        check_owned(&mut p, &args);
    }
    p.check(&["ZCARD", "big"]);
    p.check(&["OBJECT", "ENCODING", "big"]);
    for k in (0..N).step_by(397) {
        let m = format!("member:{k}");
        p.check(&["ZRANK", "big", &m]);
        p.check(&["ZREVRANK", "big", &m]);
        p.check(&["ZSCORE", "big", &m]);
    }
    for start in [0, 1, 999, 5000, 9990, 9999] {
        let s = start.to_string();
        let e = (start + 25).to_string();
        p.check(&["ZRANGE", "big", &s, &e, "WITHSCORES"]);
        p.check(&["ZREVRANGE", "big", &s, &e, "WITHSCORES"]);
    }
    p.script(
        r#"
        ZRANGE big -30 -1 WITHSCORES
        ZRANGEBYSCORE big 100 (100.5 WITHSCORES
        ZRANGEBYSCORE big (100 101 LIMIT 5 7
        ZREVRANGEBYSCORE big 200 199 LIMIT 3 30 WITHSCORES
        ZRANGE big 10 20 BYSCORE LIMIT 100 10
        ZCOUNT big 0 0
        ZCOUNT big (0 (249.75
        ZCOUNT big -inf +inf
        ZCOUNT big 125.1 125.2
        ZRANGEBYLEX big [member:1 (member:2 LIMIT 0 5
        ZREMRANGEBYRANK big 100 199
        ZRANGE big 95 105 WITHSCORES
        ZREMRANGEBYSCORE big 10 (20
        ZCARD big
        ZRANGE big 0 -1 BYSCORE LIMIT 4000 20 WITHSCORES
        ZPOPMIN big 5
        ZPOPMAX big 5
        ZRANK big member:5000
        ZRANGESTORE part big 1000 1999
        ZRANGE part 0 9 WITHSCORES
        ZINTERSTORE both 2 big part WEIGHTS 1 -1
        ZRANGE both 0 9 WITHSCORES
        ZCARD both
        "#,
    );
    // The full ordering, compared in one reply.
    p.check(&["ZRANGE", "big", "0", "-1", "WITHSCORES"]);
    // Equal scores only: lex queries on a large set.
    let mut args = vec!["ZADD".to_string(), "lex".to_string()];
    for i in 0..3000 {
        args.push("0".into());
        args.push(format!("w{:05}", (i * 31) % 3000));
    }
    check_owned(&mut p, &args);
    p.script(
        r#"
        ZRANGEBYLEX lex [w01000 (w01010
        ZREVRANGEBYLEX lex (w02000 [w01990 LIMIT 2 3
        ZLEXCOUNT lex [w00500 [w02500
        ZLEXCOUNT lex (w00500 (w02500
        ZRANGEBYLEX lex - + LIMIT 2990 20
        ZREMRANGEBYLEX lex [w00100 (w00200
        ZLEXCOUNT lex - +
        ZRANK lex w00250
        "#,
    );
}

#[test]
fn zrandmember_deterministic_cases_and_properties() {
    check_both_protocols(
        r#"
        ZADD z 1 a 2 b 3 c
        ZRANDMEMBER z 3
        ZRANDMEMBER z 10 WITHSCORES
        ZRANDMEMBER z 0
        ZRANDMEMBER z 0 WITHSCORES
        ZRANDMEMBER nokey
        ZRANDMEMBER nokey 5
        ZRANDMEMBER nokey -5 WITHSCORES
        ZRANDMEMBER z a
        ZRANDMEMBER z 1.5
        ZRANDMEMBER z 1 WITHSCORE
        ZRANDMEMBER z 1 WITHSCORES extra
        ZRANDMEMBER z -9223372036854775808
        ZRANDMEMBER z 9223372036854775807 WITHSCORES
        ZRANDMEMBER z -4611686018427387904 WITHSCORES
        SET str x
        ZRANDMEMBER str
        ZRANDMEMBER str 1
        "#,
    );
    let mut p = Pair::new();
    check_owned(&mut p, &zadd_many("big", 300, "m", |i| i.to_string()));
    p.check(&[
        "ZADD", "small", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
    ]);
    for key in ["small", "big"] {
        let all: BTreeSet<Vec<u8>> = bulk_payloads(&p.redis(&["ZRANGE", key, "0", "-1"]))
            .into_iter()
            .collect();
        let single = p.hozon(&["ZRANDMEMBER", key]);
        assert!(all.contains(&bulk_payloads(&[b"*1\r\n".as_slice(), &single].concat())[0]));
        for count in ["1", "2", "4", "50", "200"] {
            let reply = p.hozon(&["ZRANDMEMBER", key, count]);
            let got = bulk_payloads(&reply);
            let want = count.parse::<usize>().unwrap().min(all.len());
            assert_eq!(got.len(), want, "ZRANDMEMBER {key} {count}");
            let distinct: BTreeSet<Vec<u8>> = got.iter().cloned().collect();
            assert_eq!(
                distinct.len(),
                want,
                "distinct members for ZRANDMEMBER {key} {count}"
            );
            assert!(distinct.is_subset(&all));
        }
        let reply = p.hozon(&["ZRANDMEMBER", key, "-20", "WITHSCORES"]);
        let got = bulk_payloads(&reply);
        assert_eq!(got.len(), 40);
        for pair in got.chunks(2) {
            assert!(all.contains(&pair[0]));
            let score = p.hozon(&["ZSCORE", key, std::str::from_utf8(&pair[0]).unwrap()]);
            assert_eq!(
                bulk_payloads(&[b"*1\r\n".as_slice(), &score].concat())[0],
                pair[1]
            );
        }
    }
    // RESP3 nests [member, score] pairs.
    p.resp3();
    let reply = p.hozon(&["ZRANDMEMBER", "small", "-3", "WITHSCORES"]);
    assert!(reply.starts_with(b"*3\r\n*2\r\n$"), "{}", show(&reply));
    let reply = p.hozon(&["ZRANDMEMBER", "big", "3", "WITHSCORES"]);
    assert!(reply.starts_with(b"*3\r\n*2\r\n$"), "{}", show(&reply));
}

#[test]
fn zscan_listpack_and_hashtable() {
    check_both_protocols(
        r#"
        ZADD z 1 a 2.5 b 100000000000000000 c 1e19 d -inf e
        ZSCAN z 0
        ZSCAN z 0 COUNT 1
        ZSCAN z 0 MATCH [ab]
        ZSCAN z 0 MATCH * COUNT 100
        ZSCAN z 123
        ZSCAN nokey 0
        ZSCAN z abc
        ZSCAN z -1
        ZSCAN z 0 COUNT 0
        ZSCAN z 0 COUNT a
        ZSCAN z 0 MATCH
        ZSCAN z 0 TYPE zset
        ZSCAN z 0 NOVALUES
        SET str x
        ZSCAN str 0
        ZSCAN str abc
        "#,
    );
    let mut p = Pair::new();
    check_owned(
        &mut p,
        &zadd_many("big", 1000, "member", |i| format!("{}.25", i % 50)),
    );
    for (pattern, count) in [("*", "10"), ("member1*", "7"), ("*9", "1000")] {
        let mut collected: [BTreeSet<Vec<u8>>; 2] = [BTreeSet::new(), BTreeSet::new()];
        for (side, set) in collected.iter_mut().enumerate() {
            let mut cursor = "0".to_string();
            let mut rounds = 0;
            loop {
                let args = ["ZSCAN", "big", &cursor, "MATCH", pattern, "COUNT", count];
                let reply = if side == 0 {
                    p.redis(&args)
                } else {
                    p.hozon(&args)
                };
                let parts = array_elements(&reply);
                cursor = String::from_utf8(
                    bulk_payloads(&[b"*1\r\n".as_slice(), &parts[0]].concat())[0].clone(),
                )
                .expect("cursor is ASCII");
                let items = bulk_payloads(&parts[1]);
                for pair in items.chunks(2) {
                    let mut entry = pair[0].clone();
                    entry.push(b'=');
                    entry.extend_from_slice(&pair[1]);
                    set.insert(entry);
                }
                rounds += 1;
                assert!(rounds < 10_000, "ZSCAN does not terminate");
                if cursor == "0" {
                    break;
                }
            }
        }
        assert_eq!(
            collected[0], collected[1],
            "ZSCAN MATCH {pattern} COUNT {count}"
        );
    }
}

#[test]
fn wrong_arity_errors() {
    check_both_protocols(
        r#"
        ZADD z
        ZADD z 1
        ZINCRBY z 1
        ZREM z
        ZCARD
        ZCOUNT z 1
        ZLEXCOUNT z -
        ZRANGE z 0
        ZRANGESTORE d z 0
        ZREVRANGE z 0
        ZRANGEBYSCORE z 0
        ZREVRANGEBYSCORE z 0
        ZRANGEBYLEX z -
        ZREVRANGEBYLEX z +
        ZREMRANGEBYRANK z 0
        ZREMRANGEBYSCORE z 0
        ZREMRANGEBYLEX z -
        ZSCORE z
        ZMSCORE z
        ZRANK z
        ZREVRANK z
        ZSCAN z
        ZPOPMIN
        ZPOPMAX
        ZMPOP 1 z
        ZRANDMEMBER
        ZUNION 1
        ZINTER 1
        ZDIFF 1
        ZINTERCARD 1
        ZUNIONSTORE d 1
        ZINTERSTORE d 1
        ZDIFFSTORE d 1
        "#,
    );
}

#[test]
fn command_info_for_the_sorted_set_family() {
    let mut p = Pair::new();
    for name in [
        "zadd",
        "zincrby",
        "zrem",
        "zremrangebyscore",
        "zremrangebyrank",
        "zremrangebylex",
        "zunionstore",
        "zinterstore",
        "zdiffstore",
        "zunion",
        "zinter",
        "zintercard",
        "zdiff",
        "zrange",
        "zrangestore",
        "zrangebyscore",
        "zrevrangebyscore",
        "zrangebylex",
        "zrevrangebylex",
        "zcount",
        "zlexcount",
        "zrevrange",
        "zcard",
        "zscore",
        "zmscore",
        "zrank",
        "zrevrank",
        "zscan",
        "zpopmin",
        "zpopmax",
        "zmpop",
        "zrandmember",
    ] {
        // Name, arity, flags, first key, last key, step.
        let (r, h) = p.both(&["COMMAND", "INFO", name]);
        let (r, h) = (array_elements(&r), array_elements(&h));
        let (r, h) = (array_elements(&r[0]), array_elements(&h[0]));
        assert_eq!(
            r[..6],
            h[..6],
            "COMMAND INFO {name}: redis {} hozon {}",
            show(&r.concat()),
            show(&h.concat())
        );
    }
}

#[test]
fn leaderboard_use_case() {
    check_both_protocols(
        r#"
        ZADD board 1500 alice 1200 bob 1800 carol 1200 dave
        ZINCRBY board 250 bob
        ZINCRBY board 50.5 alice
        ZINCRBY board 100 erin
        ZREVRANGE board 0 2 WITHSCORES
        ZREVRANK board bob
        ZREVRANK board dave
        ZREVRANK board nobody
        ZRANK board dave
        ZSCORE board alice
        ZMSCORE board alice bob zed
        ZREVRANGEBYSCORE board +inf 1500 WITHSCORES LIMIT 0 10
        ZCOUNT board 1500 +inf
        ZRANGE board 0 -1 REV WITHSCORES
        ZREM board dave
        ZCARD board
        "#,
    );
    // The same on a large board (skiplist encoding).
    let mut p = Pair::new();
    check_owned(
        &mut p,
        &zadd_many("board", 2000, "player", |i| ((i * 37) % 1500).to_string()),
    );
    for i in (0..2000).step_by(97) {
        check_owned(
            &mut p,
            &[
                "ZINCRBY".into(),
                "board".into(),
                (i % 13).to_string(),
                format!("player{i}"),
            ],
        );
    }
    p.script(
        r#"
        ZREVRANGE board 0 9 WITHSCORES
        ZREVRANK board player42
        ZREVRANK board player1999
        ZRANK board player0
        ZSCORE board player97
        ZREVRANGEBYSCORE board +inf 1490 WITHSCORES LIMIT 0 5
        ZREVRANGE board 990 1010
        "#,
    );
}

#[test]
fn sliding_window_rate_limit_use_case() {
    let mut p = Pair::new();
    // Requests at times 1000..1300 (ms), window of 100 ms, limit 50.
    let mut now = 1000;
    while now < 1300 {
        let window_start = (now - 100).to_string();
        let t = now.to_string();
        p.check(&["ZREMRANGEBYSCORE", "rate:user1", "-inf", &window_start]);
        p.check(&["ZCARD", "rate:user1"]);
        p.check(&["ZADD", "rate:user1", &t, &format!("req-{t}")]);
        p.check(&["EXPIRE", "rate:user1", "10"]);
        p.check(&["ZRANGE", "rate:user1", "0", "0", "WITHSCORES"]);
        now += 3;
    }
    p.script(
        r#"
        OBJECT ENCODING rate:user1
        ZCARD rate:user1
        TTL rate:user1
        ZCOUNT rate:user1 (1200 +inf
        ZREMRANGEBYSCORE rate:user1 -inf +inf
        EXISTS rate:user1
        "#,
    );
    // A window large enough to reach the skiplist encoding.
    for now in 0..400 {
        let t = now.to_string();
        p.check(&["ZADD", "rate:big", &t, &format!("req-{t}")]);
        p.check(&[
            "ZREMRANGEBYSCORE",
            "rate:big",
            "-inf",
            &format!("({}", now - 250),
        ]);
    }
    p.check(&["ZCARD", "rate:big"]);
    p.check(&["OBJECT", "ENCODING", "rate:big"]);
    p.check(&["ZRANGE", "rate:big", "0", "4", "WITHSCORES"]);
}

// ---------------------------------------------------------------------------
// Random command sequences.

const KEYS: &[&str] = &["a", "b", "c"];
const MEMBERS: &[&str] = &["x", "y", "z", "xx", "1", "10", "", "w"];
const SCORES: &[&str] = &[
    "0", "1", "-1", "2.5", "1e3", "-inf", "+inf", "-0", "0.1", "3",
];
const SCORE_BOUNDS: &[&str] = &[
    "-inf", "+inf", "0", "(0", "1", "(1", "2.5", "(3", "-1", "1e3",
];
const LEX_BOUNDS: &[&str] = &["-", "+", "[x", "(x", "[y", "(xx", "[", "[1", "(z"];
const INDEXES: &[&str] = &["0", "1", "-1", "-2", "2", "5", "-10", "100"];

#[derive(Clone, Debug)]
struct Op(Vec<String>);

fn pick<'a>(g: &mut Gen, items: &[&'a str]) -> &'a str {
    g.choose(items).expect("non-empty choice")
}

fn keys(g: &mut Gen) -> Vec<String> {
    let n = 1 + usize::arbitrary(g) % 3;
    (0..n).map(|_| pick(g, KEYS).to_string()).collect()
}

fn limit(g: &mut Gen) -> Vec<String> {
    if bool::arbitrary(g) {
        vec![
            "LIMIT".into(),
            pick(g, &["0", "1", "2", "-1"]).into(),
            pick(g, &["1", "2", "-1", "0"]).into(),
        ]
    } else {
        Vec::new()
    }
}

fn withscores(g: &mut Gen) -> Vec<String> {
    if bool::arbitrary(g) {
        vec!["WITHSCORES".into()]
    } else {
        Vec::new()
    }
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let key = pick(g, KEYS).to_string();
        let member = pick(g, MEMBERS).to_string();
        let s = |g: &mut Gen| pick(g, SCORE_BOUNDS).to_string();
        let l = |g: &mut Gen| pick(g, LEX_BOUNDS).to_string();
        let i = |g: &mut Gen| pick(g, INDEXES).to_string();
        let words: Vec<String> = match u8::arbitrary(g) % 30 {
            0..=4 => {
                let mut v = vec!["ZADD".into(), key];
                for opt in ["NX", "XX", "GT", "LT", "CH", "INCR"] {
                    if u8::arbitrary(g) % 6 == 0 {
                        v.push(opt.into());
                    }
                }
                let pairs = 1 + usize::arbitrary(g) % 3;
                for _ in 0..pairs {
                    v.push(pick(g, SCORES).into());
                    v.push(pick(g, MEMBERS).into());
                }
                v
            }
            5 => vec!["ZINCRBY".into(), key, pick(g, SCORES).into(), member],
            6 => {
                let mut v = vec!["ZREM".into(), key];
                v.extend((0..1 + usize::arbitrary(g) % 3).map(|_| pick(g, MEMBERS).to_string()));
                v
            }
            7 => vec!["ZSCORE".into(), key, member],
            8 => vec!["ZMSCORE".into(), key, member, pick(g, MEMBERS).into()],
            9 => vec!["ZCARD".into(), key],
            10 => vec![pick(g, &["ZRANK", "ZREVRANK"]).into(), key, member],
            11 => {
                let mut v = vec![pick(g, &["ZRANGE", "ZREVRANGE"]).into(), key, i(g), i(g)];
                v.extend(withscores(g));
                v
            }
            12 => {
                let mut v = vec!["ZRANGEBYSCORE".into(), key, s(g), s(g)];
                v.extend(withscores(g));
                v.extend(limit(g));
                v
            }
            13 => {
                let mut v = vec!["ZREVRANGEBYSCORE".into(), key, s(g), s(g)];
                v.extend(withscores(g));
                v.extend(limit(g));
                v
            }
            14 => {
                let mut v = vec![
                    pick(g, &["ZRANGEBYLEX", "ZREVRANGEBYLEX"]).into(),
                    key,
                    l(g),
                    l(g),
                ];
                v.extend(limit(g));
                v
            }
            15 => {
                let by = pick(g, &["", "BYSCORE", "BYLEX"]);
                let (min, max) = match by {
                    "BYSCORE" => (s(g), s(g)),
                    "BYLEX" => (l(g), l(g)),
                    _ => (i(g), i(g)),
                };
                let mut v = vec!["ZRANGE".into(), key, min, max];
                if !by.is_empty() {
                    v.push(by.into());
                }
                if bool::arbitrary(g) {
                    v.push("REV".into());
                }
                if by != "BYLEX" {
                    v.extend(withscores(g));
                }
                if !by.is_empty() {
                    v.extend(limit(g));
                }
                v
            }
            16 => vec!["ZCOUNT".into(), key, s(g), s(g)],
            17 => vec!["ZLEXCOUNT".into(), key, l(g), l(g)],
            18 => vec!["ZREMRANGEBYRANK".into(), key, i(g), i(g)],
            19 => vec!["ZREMRANGEBYSCORE".into(), key, s(g), s(g)],
            20 => vec!["ZREMRANGEBYLEX".into(), key, l(g), l(g)],
            21 => {
                let mut v = vec![pick(g, &["ZPOPMIN", "ZPOPMAX"]).into(), key];
                if bool::arbitrary(g) {
                    v.push(pick(g, &["0", "1", "2", "10"]).into());
                }
                v
            }
            22 => {
                let ks = keys(g);
                let mut v = vec!["ZMPOP".into(), ks.len().to_string()];
                v.extend(ks);
                v.push(pick(g, &["MIN", "MAX"]).into());
                if bool::arbitrary(g) {
                    v.extend(["COUNT".into(), pick(g, &["1", "2", "10"]).into()]);
                }
                v
            }
            23 | 24 => {
                let cmd = pick(
                    g,
                    &[
                        "ZUNION",
                        "ZINTER",
                        "ZDIFF",
                        "ZUNIONSTORE",
                        "ZINTERSTORE",
                        "ZDIFFSTORE",
                    ],
                );
                let store = cmd.ends_with("STORE");
                let ks = keys(g);
                let mut v = vec![cmd.to_string()];
                if store {
                    v.push(pick(g, KEYS).into());
                }
                v.push(ks.len().to_string());
                v.extend(ks.iter().cloned());
                if cmd != "ZDIFF" && cmd != "ZDIFFSTORE" {
                    if bool::arbitrary(g) {
                        v.push("WEIGHTS".into());
                        v.extend(
                            ks.iter()
                                .map(|_| pick(g, &["1", "2", "-1", "0.5", "0"]).to_string()),
                        );
                    }
                    if bool::arbitrary(g) {
                        v.extend(["AGGREGATE".into(), pick(g, &["SUM", "MIN", "MAX"]).into()]);
                    }
                }
                if !store {
                    v.extend(withscores(g));
                }
                v
            }
            25 => {
                let by = pick(g, &["", "BYSCORE", "BYLEX"]);
                let (min, max) = match by {
                    "BYSCORE" => (s(g), s(g)),
                    "BYLEX" => (l(g), l(g)),
                    _ => (i(g), i(g)),
                };
                let mut v = vec!["ZRANGESTORE".into(), pick(g, KEYS).into(), key, min, max];
                if !by.is_empty() {
                    v.push(by.into());
                    v.extend(limit(g));
                }
                v
            }
            26 => vec![
                "ZRANDMEMBER".into(),
                key,
                pick(g, &["0", "100", "-0"]).into(),
                "WITHSCORES".into(),
            ],
            27 => vec!["ZSCAN".into(), key, "0".into()],
            28 => vec!["SADD".into(), key, member],
            _ => vec!["DEL".into(), key],
        };
        Op(words)
    }
}

/// Lex commands are only meaningful when all scores in a key are equal;
/// Redis leaves them unspecified otherwise and its skip-list answer
/// depends on random node levels. Small keys are listpacks, where both
/// scan linearly, so every reply is compared.
fn random_sequence_matches(ops: Vec<Op>, resp3: bool) -> TestResult {
    let mut all = vec![del_command(KEYS)];
    all.extend(ops.into_iter().map(|op| op.0));
    for key in KEYS {
        all.push(vec!["TYPE".into(), key.to_string()]);
        all.push(vec!["OBJECT".into(), "ENCODING".into(), key.to_string()]);
    }
    with_thread_pair(resp3, |p| compare_sequence(p, &all, 0, identical))
}

#[test]
fn random_command_sequences_match_redis_resp2() {
    quickcheck_ops(40, 150, |ops: Vec<Op>| random_sequence_matches(ops, false));
}

#[test]
fn random_command_sequences_match_redis_resp3() {
    quickcheck_ops(40, 100, |ops: Vec<Op>| random_sequence_matches(ops, true));
}

// ---------------------------------------------------------------------------
// Random command sequences on large (skiplist-encoded) sets.

/// A command against `big` (mixed scores, past the listpack limits) or
/// `lex` (all scores 0, so lex ranges are well defined).
#[derive(Clone, Debug)]
struct BigOp(Vec<String>);

fn big_member(g: &mut Gen) -> String {
    format!("m{}", u16::arbitrary(g) % 400)
}

fn big_score(g: &mut Gen) -> String {
    pick(
        g,
        &["0", "1", "2", "3", "5", "7.5", "10", "-3", "100", "42"],
    )
    .to_string()
}

fn big_bound(g: &mut Gen) -> String {
    let v = pick(
        g,
        &[
            "-inf", "+inf", "0", "1", "2", "3", "5", "7.5", "10", "-3", "50", "100",
        ],
    );
    if bool::arbitrary(g) && !v.ends_with("inf") {
        format!("({v}")
    } else {
        v.to_string()
    }
}

fn big_index(g: &mut Gen) -> String {
    pick(
        g,
        &[
            "0", "1", "-1", "10", "-10", "100", "150", "-150", "399", "1000",
        ],
    )
    .to_string()
}

fn lex_bound(g: &mut Gen) -> String {
    match u8::arbitrary(g) % 6 {
        0 => "-".into(),
        1 => "+".into(),
        2 | 3 => format!("[{}", big_member(g)),
        _ => format!("({}", big_member(g)),
    }
}

impl Arbitrary for BigOp {
    fn arbitrary(g: &mut Gen) -> BigOp {
        let words: Vec<String> = match u8::arbitrary(g) % 22 {
            0..=2 => {
                let mut v = vec!["ZADD".to_string(), "big".into()];
                if u8::arbitrary(g) % 4 == 0 {
                    v.push(pick(g, &["NX", "XX", "GT", "LT", "CH"]).into());
                }
                for _ in 0..1 + usize::arbitrary(g) % 5 {
                    v.push(big_score(g));
                    v.push(big_member(g));
                }
                v
            }
            3 => vec!["ZINCRBY".into(), "big".into(), big_score(g), big_member(g)],
            4 => vec!["ZREM".into(), "big".into(), big_member(g), big_member(g)],
            5 => vec![
                pick(g, &["ZRANK", "ZREVRANK", "ZSCORE"]).into(),
                "big".into(),
                big_member(g),
            ],
            6 | 7 => {
                let mut v = vec![
                    pick(g, &["ZRANGE", "ZREVRANGE"]).into(),
                    "big".into(),
                    big_index(g),
                    big_index(g),
                ];
                v.extend(withscores(g));
                v
            }
            8 | 9 => {
                let cmd = pick(g, &["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"]);
                let mut v = vec![cmd.into(), "big".into(), big_bound(g), big_bound(g)];
                v.extend(withscores(g));
                if bool::arbitrary(g) {
                    v.extend(["LIMIT".into(), big_index(g), big_index(g)]);
                }
                v
            }
            10 => vec!["ZCOUNT".into(), "big".into(), big_bound(g), big_bound(g)],
            11 => vec![
                "ZREMRANGEBYSCORE".into(),
                "big".into(),
                big_bound(g),
                big_bound(g),
            ],
            12 => vec![
                "ZREMRANGEBYRANK".into(),
                "big".into(),
                big_index(g),
                big_index(g),
            ],
            13 => vec![
                pick(g, &["ZPOPMIN", "ZPOPMAX"]).into(),
                "big".into(),
                pick(g, &["1", "3", "20"]).into(),
            ],
            14 => {
                let mut v = vec!["ZADD".to_string(), "lex".into()];
                for _ in 0..1 + usize::arbitrary(g) % 5 {
                    v.push("0".into());
                    v.push(big_member(g));
                }
                v
            }
            15 => vec!["ZREM".into(), "lex".into(), big_member(g)],
            16 | 17 => {
                let cmd = pick(g, &["ZRANGEBYLEX", "ZREVRANGEBYLEX"]);
                let mut v = vec![cmd.into(), "lex".into(), lex_bound(g), lex_bound(g)];
                if bool::arbitrary(g) {
                    v.extend(["LIMIT".into(), big_index(g), big_index(g)]);
                }
                v
            }
            18 => vec!["ZLEXCOUNT".into(), "lex".into(), lex_bound(g), lex_bound(g)],
            19 => vec![
                "ZREMRANGEBYLEX".into(),
                "lex".into(),
                lex_bound(g),
                lex_bound(g),
            ],
            20 => vec!["ZRANK".into(), "lex".into(), big_member(g)],
            _ => vec![
                pick(g, &["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]).into(),
                "out".into(),
                "2".into(),
                "big".into(),
                "lex".into(),
            ],
        };
        BigOp(words)
    }
}

fn random_big_sequence_matches(ops: Vec<BigOp>) -> TestResult {
    let mut all: Vec<Vec<String>> = vec![
        vec!["DEL".into(), "big".into(), "lex".into(), "out".into()],
        zadd_many("big", 300, "m", |i| ((i * 13) % 40).to_string()),
        zadd_many("lex", 300, "m", |_| "0".to_string()),
    ];
    all.extend(ops.into_iter().map(|op| op.0));
    for key in ["big", "lex", "out"] {
        all.push(vec![
            "ZRANGE".into(),
            key.into(),
            "0".into(),
            "-1".into(),
            "WITHSCORES".into(),
        ]);
        all.push(vec!["OBJECT".into(), "ENCODING".into(), key.into()]);
    }
    with_thread_pair(false, |p| compare_sequence(p, &all, 3, identical))
}

#[test]
fn random_command_sequences_on_large_sets_match_redis() {
    quickcheck_ops(60, 40, random_big_sequence_matches);
}
