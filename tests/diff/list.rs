//! Differential tests: lists (LPUSH … LMPOP), RESP2 and RESP3.

use quickcheck::{Arbitrary, Gen, TestResult};

use crate::harness::{
    check_both_protocols, compare_sequence, del_command, identical, quickcheck_ops, show,
    with_thread_pair, Pair,
};

#[test]
fn push_and_pop_at_both_ends() {
    check_both_protocols(
        "LPUSH l a\n\
         LPUSH l b c\n\
         RPUSH l d e f\n\
         LRANGE l 0 -1\n\
         LPUSHX l x\n\
         RPUSHX l y z\n\
         LPUSHX missing x\n\
         RPUSHX missing x y\n\
         LRANGE missing 0 -1\n\
         LLEN l\n\
         LLEN missing\n\
         LPOP l\n\
         RPOP l\n\
         LPOP l 2\n\
         RPOP l 2\n\
         LPOP l 0\n\
         RPOP l 0\n\
         LRANGE l 0 -1\n\
         LPOP l 100\n\
         LLEN l\n\
         LPOP l\n\
         RPOP l\n\
         LPOP l 1\n\
         RPOP l 1\n\
         LPOP l 0\n\
         RPOP l 0\n\
         RPUSH one v\n\
         RPOP one 1\n\
         RPUSH one v\n\
         LPOP one\n\
         GET one\n\
         RPUSH dup a a a\n\
         RPUSH e \"\"\n\
         LPOP e\n\
         LLEN e\n",
    );
}

#[test]
fn pop_count_errors_and_null_shapes() {
    check_both_protocols(
        "RPUSH l a b c\n\
         SET s v\n\
         LPOP l -1\n\
         RPOP l -1\n\
         LPOP l abc\n\
         LPOP l 1.5\n\
         LPOP l 9223372036854775808\n\
         LPOP l 9223372036854775807\n\
         RPUSH l a b c\n\
         LPOP missing -1\n\
         LPOP missing abc\n\
         LPOP missing 0\n\
         RPOP missing 0\n\
         LPOP missing 3\n\
         LPOP missing\n\
         LPOP s\n\
         LPOP s 0\n\
         LPOP s -1\n\
         RPOP s 2\n\
         LPOP l 1 2\n\
         RPOP l 1 2 3\n\
         LPOP\n\
         RPOP\n",
    );
}

#[test]
fn arity_errors() {
    check_both_protocols(
        "LPUSH\nLPUSH k\nRPUSH k\nLPUSHX k\nRPUSHX k\n\
         LLEN\nLLEN a b\n\
         LRANGE k\nLRANGE k 0\nLRANGE k 0 1 2\n\
         LINDEX k\nLINDEX k 0 1\n\
         LSET k 0\nLSET k 0 a b\n\
         LINSERT k BEFORE a\nLINSERT k BEFORE a b c\n\
         LREM k 0\nLREM k 0 a b\n\
         LTRIM k 0\nLTRIM k 0 1 2\n\
         LPOS k\n\
         LMOVE a b LEFT\nLMOVE a b LEFT RIGHT x\n\
         RPOPLPUSH a\nRPOPLPUSH a b c\n\
         LMPOP 1 k\nLMPOP 1\nlmpop\n",
    );
}

#[test]
fn wrong_type_for_every_command() {
    check_both_protocols(
        "SET s v\n\
         RPUSH l a b\n\
         LPUSH s a\nRPUSH s a\nLPUSHX s a\nRPUSHX s a\n\
         LPOP s\nRPOP s\nLPOP s 2\n\
         LLEN s\nLRANGE s 0 -1\nLINDEX s 0\nLINDEX s notanumber\n\
         LSET s 0 a\nLSET s x a\n\
         LINSERT s BEFORE a b\nLINSERT s AFTER a b\n\
         LREM s 0 a\nLTRIM s 0 1\nLPOS s a\nLPOS s a COUNT 0\n\
         LMOVE s l LEFT LEFT\nLMOVE l s LEFT LEFT\nLRANGE l 0 -1\n\
         LMOVE missing s LEFT LEFT\n\
         RPOPLPUSH s l\nRPOPLPUSH l s\nLRANGE l 0 -1\n\
         LMPOP 2 s l LEFT\nLMPOP 2 missing s LEFT\nLMPOP 2 l s LEFT\n\
         GET s\n",
    );
}

/// LRANGE, LINDEX, LSET and LTRIM over every index from well before the
/// head to well past the tail, and the 64-bit extremes.
#[test]
fn index_edge_cases() {
    let mut p = Pair::new();
    let mut extremes = vec!["9223372036854775807", "-9223372036854775808"];
    let small: Vec<String> = (-13..=13).map(|i| i.to_string()).collect();
    extremes.extend(small.iter().map(String::as_str));
    let fill = [
        "RPUSH", "l", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
    ];
    p.check(&fill);
    for resp in [2, 3] {
        if resp == 3 {
            p.resp3();
        }
        for a in &extremes {
            p.check(&["LINDEX", "l", a]);
            p.check(&["LINDEX", "missing", a]);
            for b in &extremes {
                p.check(&["LRANGE", "l", a, b]);
            }
        }
        for a in &extremes {
            p.check(&["LSET", "l", a, "x"]);
            p.check(&["LRANGE", "l", "0", "-1"]);
        }
        for bad in ["a", "1.0", "", " 1", "9223372036854775808", "0x1", "+1"] {
            p.check(&["LINDEX", "l", bad]);
            p.check(&["LRANGE", "l", bad, "1"]);
            p.check(&["LRANGE", "l", "1", bad]);
            p.check(&["LRANGE", "missing", bad, "1"]);
            p.check(&["LSET", "l", bad, "x"]);
            p.check(&["LSET", "missing", bad, "x"]);
            p.check(&["LTRIM", "l", bad, "1"]);
            p.check(&["LTRIM", "missing", "1", bad]);
        }
        p.check(&["LSET", "missing", "0", "x"]);
        for a in &extremes {
            for b in &extremes {
                p.check(&["DEL", "t"]);
                let mut cmd = fill.to_vec();
                cmd[1] = "t";
                p.check(&cmd);
                p.check(&["LTRIM", "t", a, b]);
                p.check(&["LRANGE", "t", "0", "-1"]);
            }
        }
        p.check(&["LTRIM", "missing", "0", "1"]);
        p.check(&["DEL", "l"]);
        p.check(&fill);
    }
}

#[test]
fn linsert_and_lrem() {
    check_both_protocols(
        "RPUSH l a b c b a\n\
         LINSERT l BEFORE b x\n\
         LINSERT l after b y\n\
         LINSERT l Before a first\n\
         LINSERT l AFTER a second\n\
         LRANGE l 0 -1\n\
         LINSERT l BEFORE zz x\n\
         LINSERT l BEFORE c \"\"\n\
         LINSERT l AFTER \"\" empty\n\
         LINSERT missing BEFORE a x\n\
         LINSERT l MIDDLE a x\n\
         LINSERT missing MIDDLE a x\n\
         LRANGE l 0 -1\n\
         LREM l 1 b\n\
         LREM l -1 a\n\
         LRANGE l 0 -1\n\
         RPUSH r x y x y x y x\n\
         LREM r 2 x\n\
         LRANGE r 0 -1\n\
         LREM r -2 y\n\
         LRANGE r 0 -1\n\
         LREM r 0 x\n\
         LRANGE r 0 -1\n\
         LREM r 5 nothing\n\
         LREM r x y\n\
         LREM missing x y\n\
         LREM missing 0 y\n\
         LREM r -9223372036854775808 y\n\
         LLEN r\n\
         RPUSH r y y\n\
         LREM r 9223372036854775807 y\n\
         LLEN r\n\
         RPUSH single only\n\
         LREM single 0 only\n\
         LLEN single\n",
    );
}

#[test]
fn lpos_options_and_errors() {
    check_both_protocols(
        "RPUSH l a b c 1 2 3 c c\n\
         LPOS l c\n\
         LPOS l c RANK 1\n\
         LPOS l c RANK 2\n\
         LPOS l c RANK 3\n\
         LPOS l c RANK 4\n\
         LPOS l c RANK -1\n\
         LPOS l c RANK -3\n\
         LPOS l c RANK -4\n\
         LPOS l c COUNT 0\n\
         LPOS l c COUNT 2\n\
         LPOS l c COUNT 10\n\
         LPOS l c RANK 2 COUNT 2\n\
         LPOS l c RANK -1 COUNT 2\n\
         LPOS l c RANK -2 COUNT 0\n\
         LPOS l c MAXLEN 2\n\
         LPOS l c MAXLEN 3\n\
         LPOS l c MAXLEN 7 COUNT 0\n\
         LPOS l c RANK -1 MAXLEN 1\n\
         LPOS l c RANK -1 MAXLEN 1 COUNT 0\n\
         LPOS l c RANK -1 MAXLEN 3 COUNT 0\n\
         LPOS l c MAXLEN 0 COUNT 0 RANK 1\n\
         LPOS l zz\n\
         LPOS l zz COUNT 0\n\
         LPOS l zz COUNT 1\n\
         LPOS missing c\n\
         LPOS missing c COUNT 0\n\
         LPOS missing c COUNT 1 RANK -1\n\
         LPOS missing c RANK 0\n\
         LPOS l c RANK 0\n\
         LPOS l c RANK x\n\
         LPOS l c RANK 1.0\n\
         LPOS l c COUNT -1\n\
         LPOS l c COUNT x\n\
         LPOS l c MAXLEN -1\n\
         LPOS l c MAXLEN x\n\
         LPOS l c RANK\n\
         LPOS l c COUNT\n\
         LPOS l c MAXLEN\n\
         LPOS l c FOO 1\n\
         LPOS l c rank 1 count 1 maxlen 0 extra\n\
         LPOS l c RANK 2 RANK 1\n\
         LPOS l c COUNT 1 COUNT 0\n\
         LPOS l c RANK 9223372036854775807\n\
         LPOS l c RANK -9223372036854775807\n\
         LPOS l c RANK -9223372036854775808\n\
         LPOS l c RANK -9223372036854775808 COUNT 1\n\
         LPOS l c RANK -9223372036854775808 COUNT 0\n\
         LPOS l c RANK 9223372036854775808\n\
         LPOS l c COUNT 9223372036854775807\n\
         LPOS l c MAXLEN 9223372036854775807\n\
         LPOS l 1\n\
         RPUSH e \"\"\n\
         LPOS e \"\"\n",
    );
}

#[test]
fn lmove_and_rpoplpush_in_every_direction() {
    check_both_protocols(
        "RPUSH src a b c d e f\n\
         LMOVE src dst LEFT LEFT\n\
         LMOVE src dst LEFT RIGHT\n\
         LMOVE src dst RIGHT LEFT\n\
         LMOVE src dst RIGHT RIGHT\n\
         lmove src dst left right\n\
         LRANGE src 0 -1\n\
         LRANGE dst 0 -1\n\
         RPOPLPUSH src dst\n\
         LLEN src\n\
         LRANGE dst 0 -1\n\
         RPOPLPUSH src dst\n\
         LMOVE src dst LEFT LEFT\n\
         LMOVE dst dst LEFT RIGHT\n\
         LMOVE dst dst RIGHT LEFT\n\
         LMOVE dst dst LEFT LEFT\n\
         RPOPLPUSH dst dst\n\
         LRANGE dst 0 -1\n\
         RPUSH single x\n\
         LMOVE single single LEFT RIGHT\n\
         RPOPLPUSH single single\n\
         LRANGE single 0 -1\n\
         LMOVE dst src UP LEFT\n\
         LMOVE dst src LEFT DOWN\n\
         LMOVE missing src UP LEFT\n\
         LMOVE missing dst LEFT LEFT\n\
         LRANGE dst 0 -1\n",
    );
}

#[test]
fn lmpop_options_and_errors() {
    check_both_protocols(
        "RPUSH a 1 2 3\n\
         RPUSH b x y z w\n\
         LMPOP 2 missing a LEFT\n\
         LMPOP 2 missing a RIGHT COUNT 2\n\
         LMPOP 2 a b left count 5\n\
         LMPOP 2 a b RIGHT COUNT 2\n\
         LMPOP 1 b LEFT COUNT 9223372036854775807\n\
         LMPOP 3 a b c LEFT\n\
         LMPOP 1 a LEFT\n\
         RPUSH a 1\n\
         LMPOP 0 a LEFT\n\
         LMPOP -1 a LEFT\n\
         LMPOP x a LEFT\n\
         LMPOP 2 a LEFT\n\
         LMPOP 5 a b LEFT COUNT 1\n\
         LMPOP 9223372036854775807 a LEFT\n\
         LMPOP 9223372036854775806 a LEFT\n\
         LMPOP 1 a MIDDLE\n\
         LMPOP 1 a LEFT COUNT\n\
         LMPOP 1 a LEFT COUNT 0\n\
         LMPOP 1 a LEFT COUNT -1\n\
         LMPOP 1 a LEFT COUNT x\n\
         LMPOP 1 a LEFT COUNT 1 COUNT 1\n\
         LMPOP 1 a LEFT FOO 1\n\
         LMPOP 1 a LEFT 1\n\
         LRANGE a 0 -1\n\
         LMPOP 1 a RIGHT COUNT 1\n\
         LMPOP 1 a RIGHT\n",
    );
}

/// Empty, binary and long elements survive every command unchanged.
#[test]
fn binary_and_long_elements() {
    let mut p = Pair::new();
    let long = vec![b'x'; 100_000];
    let values: [&[u8]; 6] = [
        b"",
        b"\x00",
        b"a\r\nb",
        b"\xff\xfe",
        b"exactly-22-bytes-long!",
        &long,
    ];
    for resp in [2, 3] {
        if resp == 3 {
            p.resp3();
        }
        for v in values {
            p.check_bytes(&[b"RPUSH", b"bin", v]);
            p.check_bytes(&[b"LPUSH", b"bin", v]);
        }
        p.check_bytes(&[b"LRANGE", b"bin", b"0", b"-1"]);
        for v in values {
            p.check_bytes(&[b"LPOS", b"bin", v, b"COUNT", b"0"]);
            p.check_bytes(&[b"LINSERT", b"bin", b"AFTER", v, v]);
        }
        p.check_bytes(&[b"LSET", b"bin", b"3", &long]);
        p.check_bytes(&[b"LINDEX", b"bin", b"3"]);
        p.check_bytes(&[b"LREM", b"bin", b"2", b"\x00"]);
        p.check_bytes(&[b"LMOVE", b"bin", b"bin\x00", b"RIGHT", b"LEFT"]);
        p.check_bytes(&[b"LMPOP", b"2", b"nothing", b"bin\x00", b"LEFT"]);
        p.check_bytes(&[b"LPOP", b"bin", b"3"]);
        p.check_bytes(&[b"RPOP", b"bin", b"3"]);
        p.check_bytes(&[b"LRANGE", b"bin", b"0", b"-1"]);
        p.check_bytes(&[b"DEL", b"bin"]);
    }
}

/// 10,000-element lists: the whole range, positions deep inside, counted
/// pops, trims and removals over many elements.
#[test]
fn large_lists() {
    let mut p = Pair::new();
    let mut cmd: Vec<String> = vec!["RPUSH".into(), "big".into()];
    cmd.extend((0..10_000).map(|i| format!("e{}", i % 1000)));
    let refs: Vec<&str> = cmd.iter().map(String::as_str).collect();
    p.check(&refs);
    for resp in [2, 3] {
        if resp == 3 {
            p.resp3();
        }
        p.script(
            "LLEN big\n\
             LRANGE big 0 -1\n\
             LRANGE big 4990 5010\n\
             LRANGE big -10005 -9990\n\
             LINDEX big 5000\n\
             LINDEX big -5001\n\
             LINDEX big 9999\n\
             LINDEX big 10000\n\
             LPOS big e999 COUNT 0\n\
             LPOS big e500 RANK -3\n\
             LPOS big e500 RANK 5 COUNT 3 MAXLEN 8000\n\
             LSET big 7777 changed\n\
             LINSERT big AFTER changed after\n\
             LINSERT big BEFORE e3 before\n\
             LRANGE big 7770 7790\n",
        );
    }
    p.script(
        "LPOP big 3000\n\
         RPOP big 3000\n\
         LREM big 3 e600\n\
         LREM big -2 e601\n\
         LREM big 0 e602\n\
         LLEN big\n\
         LTRIM big 100 -100\n\
         LLEN big\n\
         LMPOP 1 big RIGHT COUNT 1000\n\
         LRANGE big 0 -1\n\
         LTRIM big 5000 6000\n\
         LLEN big\n",
    );
    let mut lpush: Vec<String> = vec!["LPUSH".into(), "big".into()];
    lpush.extend((0..10_000).map(|i| format!("{i}")));
    let refs: Vec<&str> = lpush.iter().map(String::as_str).collect();
    p.check(&refs);
    for _ in 0..100 {
        p.check(&["RPOPLPUSH", "big", "big"]);
    }
    p.script("LRANGE big 0 -1\nLMOVE big other LEFT RIGHT\nRPOP big 20000\nLLEN big\nLRANGE other 0 -1\n");
}

/// The job-queue use case: producers LPUSH, consumers RPOP; the reliable
/// variant moves each job to a processing list and acknowledges it with
/// LREM.
#[test]
fn queue_use_cases() {
    let mut p = Pair::new();
    let (mut r2, mut h2) = p.connect_more();
    for batch in 0..20 {
        for job in 0..10 {
            let payload = format!("{{\"job\":{},\"batch\":{batch}}}", batch * 10 + job);
            p.check(&["LPUSH", "jobs", &payload]);
        }
        for _ in 0..7 {
            let args: [&[u8]; 2] = [b"RPOP", b"jobs"];
            let (r, h) = (r2.call(&args), h2.call(&args));
            assert_eq!(show(&r), show(&h), "consumer RPOP");
        }
        p.check(&["LLEN", "jobs"]);
    }
    p.check(&["RPOP", "jobs", "100"]);
    p.check(&["RPOP", "jobs"]);

    // Reliable queue: LMOVE to a processing list, then LREM to ack.
    p.script("RPUSH tasks t1 t2 t3 t4 t5");
    for _ in 0..6 {
        p.check(&["LMOVE", "tasks", "processing", "RIGHT", "LEFT"]);
        p.check(&["LRANGE", "processing", "0", "-1"]);
    }
    p.script(
        "LREM processing 1 t1\n\
         LREM processing 1 t1\n\
         RPOPLPUSH processing tasks\n\
         LREM processing 1 t3\n\
         LRANGE processing 0 -1\n\
         LRANGE tasks 0 -1\n\
         LMOVE processing tasks LEFT RIGHT\n\
         LMOVE processing tasks LEFT RIGHT\n\
         LMOVE processing tasks LEFT RIGHT\n\
         LLEN processing\n\
         LRANGE tasks 0 -1\n",
    );
}

// ---------------------------------------------------------------------------
// Random command sequences.

const KEYS: &[&str] = &["a", "b", "s"];
const ELEMENTS: &[&str] = &["x", "y", "z", "1", ""];

/// One list command with arguments from a small space, so sequences hit
/// matches, empty lists, deletions and wrong types often.
#[derive(Debug, Clone)]
struct Op(Vec<String>);

fn pick<T: Copy>(g: &mut Gen, items: &[T]) -> T {
    *g.choose(items).expect("non-empty choice list")
}

/// An element: usually a short one, sometimes one of a few kilobytes so
/// that a handful of them fill hozon's 8 KB chunks and force splits and
/// merges.
fn element(g: &mut Gen) -> String {
    match u8::arbitrary(g) % 10 {
        0 => "L".repeat(3000),
        1 => "M".repeat(5000),
        _ => pick(g, ELEMENTS).to_string(),
    }
}

fn small_int(g: &mut Gen) -> String {
    (i64::from(u8::arbitrary(g) % 15) - 7).to_string()
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let key = pick(g, KEYS).to_string();
        let key2 = pick(g, KEYS).to_string();
        let el = element(g);
        let end = pick(g, &["LEFT", "RIGHT"]).to_string();
        let end2 = pick(g, &["LEFT", "RIGHT"]).to_string();
        let n = small_int(g);
        let m = small_int(g);
        let words: Vec<String> = match u8::arbitrary(g) % 22 {
            0 | 1 => {
                let mut v = vec![pick(g, &["LPUSH", "RPUSH"]).to_string(), key, el];
                if bool::arbitrary(g) {
                    v.push(element(g));
                }
                v
            }
            2 => vec![pick(g, &["LPUSHX", "RPUSHX"]).to_string(), key, el],
            3 | 4 => vec![pick(g, &["LPOP", "RPOP"]).to_string(), key],
            5 => vec![pick(g, &["LPOP", "RPOP"]).to_string(), key, n],
            6 => vec!["LLEN".into(), key],
            7 | 8 => vec!["LRANGE".into(), key, n, m],
            9 => vec!["LINDEX".into(), key, n],
            10 => vec!["LSET".into(), key, n, el],
            11 => vec![
                "LINSERT".into(),
                key,
                pick(g, &["BEFORE", "AFTER"]).into(),
                el,
                element(g),
            ],
            12 => vec!["LREM".into(), key, n, el],
            13 => vec!["LTRIM".into(), key, n, m],
            14 => {
                let mut v = vec!["LPOS".into(), key, el];
                if bool::arbitrary(g) {
                    v.extend(["RANK".into(), n]);
                }
                if bool::arbitrary(g) {
                    v.extend(["COUNT".into(), m]);
                }
                if bool::arbitrary(g) {
                    v.extend(["MAXLEN".into(), small_int(g)]);
                }
                v
            }
            15 | 16 => vec!["LMOVE".into(), key, key2, end, end2],
            17 => vec!["RPOPLPUSH".into(), key, key2],
            18 => {
                let mut v = vec!["LMPOP".into(), "2".into(), key, key2, end];
                if bool::arbitrary(g) {
                    v.extend(["COUNT".into(), n]);
                }
                v
            }
            19 => vec!["SET".into(), key, el],
            20 => vec!["DEL".into(), key],
            _ => vec!["LRANGE".into(), key, "0".into(), "-1".into()],
        };
        Op(words)
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Op>> {
        Box::new(std::iter::empty())
    }
}

/// Runs `ops` from an empty keyspace and compares every reply, then the
/// final contents of every key.
fn random_sequence_matches(ops: Vec<Op>, resp3: bool) -> TestResult {
    let mut all = vec![del_command(KEYS)];
    all.extend(ops.into_iter().map(|op| op.0));
    for key in KEYS {
        all.push(vec![
            "LRANGE".into(),
            key.to_string(),
            "0".into(),
            "-1".into(),
        ]);
        all.push(vec!["GET".into(), key.to_string()]);
    }
    with_thread_pair(resp3, |p| compare_sequence(p, &all, 0, identical))
}

#[test]
fn random_command_sequences_match_redis_resp2() {
    quickcheck_ops(60, 150, |ops: Vec<Op>| random_sequence_matches(ops, false));
}

#[test]
fn random_command_sequences_match_redis_resp3() {
    quickcheck_ops(60, 100, |ops: Vec<Op>| random_sequence_matches(ops, true));
}

#[test]
fn type_encoding_and_command_info() {
    let mut p = Pair::new();
    let mut big: Vec<String> = vec!["RPUSH".into(), "big".into()];
    big.extend((0..2000).map(|i| format!("element-{i}")));
    let refs: Vec<&str> = big.iter().map(String::as_str).collect();
    p.check(&refs);
    p.script(
        "RPUSH l a\n\
         TYPE l\n\
         OBJECT ENCODING l\n\
         OBJECT ENCODING big\n\
         TYPE big\n\
         COMMAND INFO lpush rpush lpushx rpushx lpop rpop llen lrange lindex lset\n\
         COMMAND INFO linsert lrem ltrim lpos lmove rpoplpush lmpop\n\
         COMMAND GETKEYS LMPOP 2 a b LEFT COUNT 3\n\
         COMMAND GETKEYS LMOVE a b LEFT RIGHT\n\
         COMMAND GETKEYS RPOPLPUSH a b\n",
    );
}

/// TTLs: pushes keep them, an expired list is gone for every command, and
/// a list re-created after deletion has none.
#[test]
fn expiry_interplay() {
    let mut p = Pair::new();
    p.script(
        "RPUSH l a b c\n\
         EXPIRE l 100\n\
         LPUSH l x\n\
         RPOP l\n\
         LSET l 0 y\n\
         LINSERT l BEFORE y z\n\
         LTRIM l 0 1\n\
         LMOVE l l LEFT RIGHT\n\
         TTL l\n\
         LRANGE l 0 -1\n\
         LTRIM l 1 0\n\
         TTL l\n\
         RPUSH l again\n\
         TTL l\n\
         RPUSH gone 1 2 3\n\
         RPUSH gone2 1 2 3\n\
         PEXPIRE gone 20\n\
         PEXPIRE gone2 20\n",
    );
    std::thread::sleep(std::time::Duration::from_millis(60));
    p.script(
        "LPUSHX gone x\n\
         LLEN gone\n\
         LINDEX gone 0\n\
         LSET gone 0 x\n\
         LMOVE gone2 dst LEFT LEFT\n\
         LPOP gone2 1\n\
         LMPOP 2 gone gone2 LEFT\n\
         RPUSH gone fresh\n\
         TTL gone\n\
         LRANGE gone 0 -1\n",
    );
}
