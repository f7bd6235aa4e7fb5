//! The stream encoder (docs/replication.md §3.1): one unit's effects (the
//! `persist::aof::Effect`s of one command execution) as the RESP bytes
//! Redis 7.0 propagates to replicas, with the stream's own `SELECT`
//! tracking.
//!
//! The framing is the AOF batch's (`persist::aof::BatchBuilder`) and
//! Redis's `propagatePendingCommands`: a `SELECT <n>` before a command
//! whose database is not the one last selected (PUBLISH's too: the
//! publisher's); `MULTI` … `EXEC` around a unit of more than one effect,
//! the `SELECT` for its first effect before the `MULTI`; commands encoded
//! by `aof::encode_command`. Given the same selected database, a unit's
//! stream bytes are exactly its AOF bytes (PUBLISH aside).
//!
//! The two trackings are separate states and differ by design in when they
//! are forgotten: the AOF's at the start of a rewrite
//! (`Writer::forget_selected_db`), the stream's at a capture instant, a
//! promotion, the creation of the backlog and a master's restart
//! ([`StreamEncoder::forget_db`]). So after either forgets, the next unit
//! starts with `SELECT` in that one only. The stream also carries commands
//! no database applies to (`PING`, `REPLCONF GETACK *`), which Redis feeds
//! with the stream's current database and so never precedes with `SELECT`
//! ([`StreamEncoder::push_dbless`]); the AOF has no such command.

use crate::persist::aof::{encode_command, Effect};

/// The stream's encoder: the database the stream has selected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamEncoder {
    /// The database the replicas are in after the last byte encoded; None
    /// when the stream has selected none since it was last forgotten.
    selected_db: Option<usize>,
}

impl StreamEncoder {
    /// An encoder whose first unit starts with `SELECT`.
    pub fn new() -> StreamEncoder {
        StreamEncoder::default()
    }

    /// The database the stream selected last (`repl-stream-db` in a
    /// payload and the `#repl` line's database: 0 when None).
    pub fn selected_db(&self) -> Option<usize> {
        self.selected_db
    }

    /// Makes the next unit start with `SELECT` (the capture instant, a
    /// promotion, the backlog's creation, a master's restart).
    pub fn forget_db(&mut self) {
        self.selected_db = None;
    }

    /// Appends the stream bytes of one unit, the effects of one command
    /// execution, to `out`; returns how many bytes were appended (0 for a
    /// unit without effects).
    pub fn push_unit(&mut self, effects: &[Effect], out: &mut Vec<u8>) -> usize {
        let before = out.len();
        if effects.is_empty() {
            return 0;
        }
        let wrap = effects.len() > 1;
        if wrap {
            // SELECT before MULTI, so the transaction starts in its db.
            self.select(effects[0].stream_db(), out);
            encode_command(out, &[&b"MULTI"[..]]);
        }
        for effect in effects {
            // PUBLISH too: in the database of the client that published.
            self.select(effect.stream_db(), out);
            encode_command(out, &effect.argv);
        }
        if wrap {
            encode_command(out, &[&b"EXEC"[..]]);
        }
        out.len() - before
    }

    /// Appends one command logged as received in database `db` (a unit
    /// of one effect, without building an `Effect`); returns how many
    /// bytes were appended.
    pub fn push_command(&mut self, db: usize, argv: &[&[u8]], out: &mut Vec<u8>) -> usize {
        let before = out.len();
        self.select(db, out);
        encode_command(out, argv);
        out.len() - before
    }

    /// Appends a command no database applies to (`PING`, `REPLCONF GETACK
    /// *`): never preceded by `SELECT`, the selected database unchanged.
    /// Returns how many bytes were appended.
    pub fn push_dbless(&mut self, argv: &[&[u8]], out: &mut Vec<u8>) -> usize {
        let before = out.len();
        encode_command(out, argv);
        out.len() - before
    }

    fn select(&mut self, db: usize, out: &mut Vec<u8>) {
        if self.selected_db != Some(db) {
            encode_command(out, &[b"SELECT".to_vec(), db.to_string().into_bytes()]);
            self.selected_db = Some(db);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persist::aof::{parse_annotation, BatchBuilder, ANNOTATION_PREFIX};

    fn effect(db: usize, args: &[&str]) -> Effect {
        Effect {
            db,
            argv: args.iter().map(|a| a.as_bytes().to_vec()).collect(),
        }
    }

    fn encode(enc: &mut StreamEncoder, unit: &[Effect]) -> Vec<u8> {
        let mut out = b"prefix".to_vec();
        let n = enc.push_unit(unit, &mut out);
        assert_eq!(&out[..6], b"prefix");
        assert_eq!(n, out.len() - 6);
        out.split_off(6)
    }

    const SELECT0: &str = "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n";
    const SELECT3: &str = "*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n";
    const SELECT12: &str = "*2\r\n$6\r\nSELECT\r\n$2\r\n12\r\n";
    const SET_A_1: &str = "*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n";
    const DEL_B: &str = "*2\r\n$3\r\nDEL\r\n$1\r\nb\r\n";
    const MULTI: &str = "*1\r\n$5\r\nMULTI\r\n";
    const EXEC: &str = "*1\r\n$4\r\nEXEC\r\n";

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn a_single_command_starts_with_select_once() {
        let mut enc = StreamEncoder::new();
        assert_eq!(enc.selected_db(), None);
        let set = [effect(0, &["SET", "a", "1"])];
        assert_eq!(text(encode(&mut enc, &set)), format!("{SELECT0}{SET_A_1}"));
        assert_eq!(enc.selected_db(), Some(0));
        assert_eq!(text(encode(&mut enc, &set)), SET_A_1);
        assert_eq!(text(encode(&mut enc, &[effect(0, &["DEL", "b"])])), DEL_B);
    }

    #[test]
    fn a_database_change_selects_again() {
        let mut enc = StreamEncoder::new();
        encode(&mut enc, &[effect(0, &["SET", "a", "1"])]);
        assert_eq!(
            text(encode(&mut enc, &[effect(3, &["DEL", "b"])])),
            format!("{SELECT3}{DEL_B}")
        );
        assert_eq!(
            text(encode(&mut enc, &[effect(12, &["SET", "a", "1"])])),
            format!("{SELECT12}{SET_A_1}")
        );
        assert_eq!(
            text(encode(&mut enc, &[effect(0, &["DEL", "b"])])),
            format!("{SELECT0}{DEL_B}")
        );
        assert_eq!(enc.selected_db(), Some(0));
    }

    #[test]
    fn units_of_several_effects_are_wrapped_with_select_before_multi() {
        let mut enc = StreamEncoder::new();
        let unit = [effect(3, &["SET", "a", "1"]), effect(3, &["DEL", "b"])];
        assert_eq!(
            text(encode(&mut enc, &unit)),
            format!("{SELECT3}{MULTI}{SET_A_1}{DEL_B}{EXEC}")
        );
        // Already in db 3: no SELECT.
        assert_eq!(
            text(encode(&mut enc, &unit)),
            format!("{MULTI}{SET_A_1}{DEL_B}{EXEC}")
        );
        // A unit that changes database inside (a script's SELECT, MOVE's
        // effects): SELECT inside the MULTI, the last db stays selected.
        let moving = [effect(3, &["DEL", "b"]), effect(12, &["SET", "a", "1"])];
        assert_eq!(
            text(encode(&mut enc, &moving)),
            format!("{MULTI}{DEL_B}{SELECT12}{SET_A_1}{EXEC}")
        );
        assert_eq!(enc.selected_db(), Some(12));
        // A unit of one effect is never wrapped.
        assert_eq!(text(encode(&mut enc, &[effect(12, &["DEL", "b"])])), DEL_B);
    }

    #[test]
    fn an_empty_unit_appends_nothing() {
        let mut enc = StreamEncoder::new();
        assert_eq!(encode(&mut enc, &[]), b"");
        assert_eq!(enc.selected_db(), None);
    }

    #[test]
    fn forget_db_makes_the_next_unit_select() {
        let mut enc = StreamEncoder::new();
        encode(&mut enc, &[effect(0, &["SET", "a", "1"])]);
        enc.forget_db();
        assert_eq!(enc.selected_db(), None);
        assert_eq!(
            text(encode(&mut enc, &[effect(0, &["SET", "a", "1"])])),
            format!("{SELECT0}{SET_A_1}")
        );
        enc.forget_db();
        let unit = [effect(0, &["SET", "a", "1"]), effect(0, &["DEL", "b"])];
        assert_eq!(
            text(encode(&mut enc, &unit)),
            format!("{SELECT0}{MULTI}{SET_A_1}{DEL_B}{EXEC}")
        );
    }

    #[test]
    fn dbless_commands_never_select_and_keep_the_selected_db() {
        let mut enc = StreamEncoder::new();
        let mut out = Vec::new();
        let n = enc.push_dbless(&[b"PING"], &mut out);
        assert_eq!(out, b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(n, out.len());
        assert_eq!(enc.selected_db(), None);
        encode(&mut enc, &[effect(3, &["DEL", "b"])]);
        out.clear();
        let n = enc.push_dbless(&[b"REPLCONF", b"GETACK", b"*"], &mut out);
        assert_eq!(out, b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n");
        assert_eq!(n, out.len());
        assert_eq!(enc.selected_db(), Some(3));
        assert_eq!(text(encode(&mut enc, &[effect(3, &["DEL", "b"])])), DEL_B);
    }

    /// A batch's body: what `finish` wrote minus its `#hz1` annotation line
    /// (the generated arguments never hold `#`).
    fn body_of(batch: &[u8]) -> &[u8] {
        let at = batch
            .windows(ANNOTATION_PREFIX.len())
            .rposition(|w| w == ANNOTATION_PREFIX)
            .expect("annotation");
        let line = &batch[at..batch.len() - 2];
        let annotation = parse_annotation(line).expect("annotation parses");
        assert_eq!(annotation.len, at as u64);
        &batch[..at]
    }

    fn random_unit(rng: &mut crate::rand::Rng) -> Vec<Effect> {
        let effects = match rng.next_u64() % 10 {
            0 => 0,
            1..=6 => 1,
            _ => 2 + (rng.next_u64() % 4) as usize,
        };
        let db_base = (rng.next_u64() % 4) as usize;
        (0..effects)
            .map(|_| {
                // Mostly the unit's db, sometimes another (16 dbs).
                let db = if rng.next_u64().is_multiple_of(5) {
                    (rng.next_u64() % 16) as usize
                } else {
                    db_base
                };
                let args = 1 + (rng.next_u64() % 4) as usize;
                let argv = (0..args)
                    .map(|_| {
                        let len = (rng.next_u64() % 12) as usize;
                        (0..len)
                            .map(|_| b"abcXYZ019 \r\n\0"[(rng.next_u64() % 13) as usize])
                            .collect()
                    })
                    .collect();
                Effect { db, argv }
            })
            .collect()
    }

    #[test]
    fn random_units_encode_as_the_aof_batches_bodies() {
        // Seeded, the seed in every failure message, to reproduce one.
        let seed = crate::rand::Rng::new().next_u64();
        let mut rng = crate::rand::Rng::with_seed(seed);
        for round in 0..200 {
            let mut enc = StreamEncoder::new();
            let mut stream = Vec::new();
            let mut appended = 0;
            let mut aof = Vec::new();
            let mut aof_db = None;
            let units = 1 + (rng.next_u64() % 30) as usize;
            let mut batch = BatchBuilder::new();
            for i in 0..units {
                let unit = random_unit(&mut rng);
                appended += enc.push_unit(&unit, &mut stream);
                batch.push_unit(&unit, &mut aof_db);
                // Batches of random sizes: the AOF's tracking spans them.
                if rng.next_u64().is_multiple_of(3) && !batch.is_empty() {
                    aof.extend_from_slice(body_of(&batch.finish(i as i64)));
                }
                assert_eq!(enc.selected_db(), aof_db, "seed {seed} round {round}");
            }
            if !batch.is_empty() {
                aof.extend_from_slice(body_of(&batch.finish(0)));
            }
            assert_eq!(appended, stream.len(), "seed {seed} round {round}");
            assert_eq!(stream, aof, "seed {seed} round {round}");
        }
    }

    #[test]
    fn each_tracking_is_forgotten_on_its_own() {
        // The AOF forgets at a rewrite's start, the stream at a capture
        // instant: from equal states, only the one that forgot selects.
        let set = [effect(5, &["SET", "a", "1"])];
        let select5 = "*2\r\n$6\r\nSELECT\r\n$1\r\n5\r\n";
        let mut enc = StreamEncoder::new();
        let mut aof_db = None;
        let mut scratch = BatchBuilder::new();
        scratch.push_unit(&set, &mut aof_db);
        enc.push_unit(&set, &mut Vec::new());

        // The stream forgets (capture instant), the AOF does not.
        enc.forget_db();
        let mut stream = Vec::new();
        enc.push_unit(&set, &mut stream);
        let mut batch = BatchBuilder::new();
        batch.push_unit(&set, &mut aof_db);
        assert_eq!(text(stream), format!("{select5}{SET_A_1}"));
        assert_eq!(text(body_of(&batch.finish(0)).to_vec()), SET_A_1);

        // The AOF forgets (rewrite start), the stream does not.
        aof_db = None;
        let mut stream = Vec::new();
        enc.push_unit(&set, &mut stream);
        batch.push_unit(&set, &mut aof_db);
        assert_eq!(text(stream), SET_A_1);
        assert_eq!(
            text(body_of(&batch.finish(0)).to_vec()),
            format!("{select5}{SET_A_1}")
        );
    }

    #[test]
    fn publish_goes_to_the_stream_in_its_database_and_never_to_the_aof() {
        use crate::persist::aof::STREAM_ONLY_DB;
        let publish = |db: usize| Effect {
            db: STREAM_ONLY_DB | db,
            argv: vec![b"PUBLISH".to_vec(), b"ch".to_vec(), b"hi".to_vec()],
        };
        const PUBLISH: &str = "*3\r\n$7\r\nPUBLISH\r\n$2\r\nch\r\n$2\r\nhi\r\n";
        let mut enc = StreamEncoder::new();
        // Like Redis's: SELECT the publisher's database first.
        assert_eq!(
            text(encode(&mut enc, &[publish(12)])),
            format!("{SELECT12}{PUBLISH}")
        );
        assert_eq!(enc.selected_db(), Some(12));
        assert_eq!(text(encode(&mut enc, &[publish(12)])), PUBLISH);
        // In a transaction: wrapped with the writes, SELECT for the first
        // effect (here a PUBLISH) before MULTI; the AOF gets the writes
        // alone.
        let unit = [publish(3), effect(3, &["DEL", "b"]), publish(3)];
        assert_eq!(
            text(encode(&mut enc, &unit)),
            format!("{SELECT3}{MULTI}{PUBLISH}{DEL_B}{PUBLISH}{EXEC}")
        );
        let mut batch = BatchBuilder::new();
        let mut aof_db = None;
        batch.push_unit(&unit, &mut aof_db);
        batch.push_unit(&[publish(0)], &mut aof_db);
        let body = text(batch.finish(0));
        assert!(body.contains(&format!("{SELECT3}{DEL_B}")), "{body}");
        assert!(
            !body.contains("PUBLISH") && !body.contains("MULTI") && !body.contains(SELECT0),
            "{body}"
        );
    }
}
