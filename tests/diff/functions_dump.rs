//! FUNCTION DUMP and FUNCTION RESTORE against Redis 7.0.15: the payloads
//! are byte-identical, each server restores the other's, the APPEND /
//! REPLACE / FLUSH policies and their collision errors, bad payloads.

use crate::functions::{both_protocols, err_has, is, lib, load, one};
use crate::harness::{bulk_payload, show, Pair};

/// FUNCTION DUMP on `from` (Redis when true), as raw bytes.
fn dump_of(p: &mut Pair, redis: bool) -> Vec<u8> {
    let reply = if redis {
        p.r.call(&[b"FUNCTION", b"DUMP"])
    } else {
        p.h.call(&[b"FUNCTION", b"DUMP"])
    };
    bulk_payload(&reply)
}

#[test]
fn dump_and_restore_both_ways() {
    both_protocols(|p| {
        // An empty dump.
        p.check(&["FUNCTION", "DUMP"]);
        load(
            p,
            &lib(
                "test",
                "redis.register_function{function_name='test', callback=function() return \
                 'hello' end, description='d', flags={'no-writes'}}",
            ),
        );
        let (rd, hd) = (dump_of(p, true), dump_of(p, false));
        assert_eq!(show(&hd), show(&rd), "FUNCTION DUMP payloads differ");
        p.check(&["FUNCTION", "DELETE", "test"]);
        p.check(&["FUNCTION", "LIST"]);
        // Redis's payload into hozon and hozon's into Redis.
        let r = p.r.call(&[b"FUNCTION", b"RESTORE", &hd]);
        let h = p.h.call(&[b"FUNCTION", b"RESTORE", &rd]);
        assert_eq!(
            (show(&r), show(&h)),
            ("+OK\\r\\n".into(), "+OK\\r\\n".into())
        );
        p.check(&["FUNCTION", "LIST", "WITHCODE"]);
        p.check(&["FCALL_RO", "test", "0"]);
        // Policies. APPEND (the default) fails on a library collision.
        for policy in [&[][..], &[&b"APPEND"[..]], &[b"append"]] {
            let args = [&[&b"FUNCTION"[..], b"RESTORE", &rd][..], policy].concat();
            err_has(&p.check_bytes(&args), "Library test already exists");
        }
        p.check(&["FUNCTION", "FLUSH"]);
        load(p, &one("test1", "test1", "return 'hello1'"));
        p.check_bytes(&[b"FUNCTION", b"RESTORE", &rd, b"APPEND"]);
        is(&p.check(&["FCALL", "test", "0"]), "$5\r\nhello\r\n");
        is(&p.check(&["FCALL", "test1", "0"]), "$6\r\nhello1\r\n");
        p.check(&["FUNCTION", "STATS"]);
        // FLUSH drops the others first.
        p.check_bytes(&[b"FUNCTION", b"RESTORE", &rd, b"FLUSH"]);
        p.check(&["FUNCTION", "LIST"]);
        p.check(&["FCALL", "test1", "0"]);
        // REPLACE replaces the library of the same name.
        p.check(&["FUNCTION", "FLUSH"]);
        load(p, &one("test", "test", "return 'hello1'"));
        p.check_bytes(&[b"FUNCTION", b"RESTORE", &rd, b"REPLACE"]);
        is(&p.check(&["FCALL", "test", "0"]), "$5\r\nhello\r\n");
        p.check(&["FUNCTION", "LIST"]);
        // Errors: a bad payload keeps the libraries; argument errors.
        for args in [
            &["FUNCTION", "RESTORE", "bad_payload"][..],
            &["FUNCTION", "RESTORE", ""],
            &["FUNCTION", "RESTORE", "arg1", "args2", "arg3"],
            &["FUNCTION", "RESTORE"],
        ] {
            p.check(args);
        }
        err_has(
            &p.check(&["FUNCTION", "RESTORE", "bad_payload"]),
            "payload version or checksum are wrong",
        );
        p.check_bytes(&[b"FUNCTION", b"RESTORE", &rd, b"BADPOLICY"]);
        let mut corrupt = rd.clone();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        p.check_bytes(&[b"FUNCTION", b"RESTORE", &corrupt]);
        let mut corrupt = rd.clone();
        corrupt[3] ^= 0x20;
        p.check_bytes(&[b"FUNCTION", b"RESTORE", &corrupt]);
        p.check_bytes(&[b"FUNCTION", b"RESTORE", &rd[..rd.len() - 1]]);
        // A key's DUMP is not a function payload.
        p.check(&["SET", "k", "v"]);
        let key_dump = bulk_payload(&p.check(&["DUMP", "k"]));
        p.check_bytes(&[b"FUNCTION", b"RESTORE", &key_dump]);
        p.check(&["FUNCTION", "LIST"]);

        // Redis's "restore with function name collision".
        p.check(&["FUNCTION", "FLUSH"]);
        load(
            p,
            &lib(
                "lib1",
                "local function add1(a) return a + 1 end\n\
                 redis.register_function('f1', function(keys, args) return add1(1) end)\n\
                 redis.register_function('f2', function(keys, args) return add1(2) end)\n\
                 redis.register_function('f3', function(keys, args) return add1(3) end)",
            ),
        );
        let (rd, hd) = (dump_of(p, true), dump_of(p, false));
        p.check(&["FUNCTION", "FLUSH"]);
        load(
            p,
            &lib(
                "lib1",
                "redis.register_function('f6', function(keys, args) return 7 end)",
            ),
        );
        load(
            p,
            &lib(
                "lib2",
                "local function add1(a) return a + 1 end\n\
                 redis.register_function('f4', function(keys, args) return add1(4) end)\n\
                 redis.register_function('f5', function(keys, args) return add1(5) end)\n\
                 redis.register_function('f3', function(keys, args) return add1(3) end)",
            ),
        );
        // Each server restores the other's payload too.
        for (r_payload, h_payload) in [(&rd, &hd), (&hd, &rd)] {
            for policy in [&b"APPEND"[..], b"REPLACE"] {
                let r = p.r.call(&[b"FUNCTION", b"RESTORE", r_payload, policy]);
                let h = p.h.call(&[b"FUNCTION", b"RESTORE", h_payload, policy]);
                assert_eq!(show(&h), show(&r), "RESTORE {}", show(policy));
            }
        }
        err_has(
            &p.check_bytes(&[b"FUNCTION", b"RESTORE", &rd]),
            "Library lib1 already exists",
        );
        err_has(
            &p.check_bytes(&[b"FUNCTION", b"RESTORE", &rd, b"REPLACE"]),
            "Function f3 already exists",
        );
        for f in ["f3", "f4", "f5", "f6", "f1"] {
            p.check(&["FCALL", f, "0"]);
        }
        p.check(&["FUNCTION", "STATS"]);
        // FLUSH makes room for it: the three functions are back.
        let r = p.r.call(&[b"FUNCTION", b"RESTORE", &hd, b"FLUSH"]);
        let h = p.h.call(&[b"FUNCTION", b"RESTORE", &rd, b"FLUSH"]);
        assert_eq!(
            (show(&r), show(&h)),
            ("+OK\\r\\n".into(), "+OK\\r\\n".into())
        );
        for f in ["f1", "f2", "f3", "f4"] {
            p.check(&["FCALL", f, "0"]);
        }
        p.check(&["FUNCTION", "STATS"]);
        p.check(&["FUNCTION", "FLUSH"]);
    });
}
