//! The master's PSYNC decision (docs/replication.md §2.3), Redis 7.0's
//! `masterTryPartialResynchronization` and the stats `syncCommand` keeps,
//! with the exact log texts, and the `+CONTINUE` / `+FULLRESYNC` replies
//! (§2.2).
//!
//! Pure: the caller passes the master's ids, offsets and backlog extent and
//! the request; it sends the reply, the backlog bytes and the log lines.

use crate::config::LogLevel;

use super::ids::ReplId;

/// The extent of the backlog: the offset of its first byte and how many
/// bytes it holds (Redis's `repl_backlog->offset` and `histlen`). Its last
/// byte is `first_byte_offset + histlen - 1`, normally `master_repl_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BacklogExtent {
    /// The offset of the backlog's first byte.
    pub first_byte_offset: i64,
    /// The bytes it holds.
    pub histlen: i64,
}

/// What the decision needs of the master's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MasterIds {
    /// The current history.
    pub replid: ReplId,
    /// The previous history (`ReplId::NONE` when cleared).
    pub replid2: ReplId,
    /// The first offset `replid2` cannot serve (`master_repl_offset + 1` at
    /// the shift; -1 when cleared).
    pub second_replid_offset: i64,
    /// The backlog, if one exists.
    pub backlog: Option<BacklogExtent>,
    /// The offset of the last stream byte.
    pub master_repl_offset: i64,
}

/// A `PSYNC <id> <offset>` request, its offset already parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// The id the replica asks for, as sent (`?` forces a full sync).
    pub id: &'a [u8],
    /// The first byte the replica lacks (its `reploff + 1`), or -1.
    pub offset: i64,
    /// The replica's name for log lines (`<ip>:<listening-port>`).
    pub name: &'a str,
}

/// A log line to write: its level and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Redis's level for the line.
    pub level: LogLevel,
    /// The text, exactly as Redis writes it.
    pub text: String,
}

impl LogLine {
    fn notice(text: String) -> LogLine {
        LogLine {
            level: LogLevel::Notice,
            text,
        }
    }
}

/// Why a PSYNC gets a full sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullSyncReason {
    /// The replica asked for one (`PSYNC ? -1`: an id starting with `?`).
    Requested,
    /// The id is neither `replid` nor `replid2`.
    IdMismatch,
    /// The id is `replid2`, but the offset is past `second_replid_offset`.
    SecondIdOffset,
    /// The id is good, but there is no backlog or the offset is outside it.
    LackOfBacklog,
}

/// The master's answer to a PSYNC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Accepted: reply `+CONTINUE`, then the backlog from `from_offset` to
    /// its end (`bytes` bytes, 0 when the replica lacks nothing), then the
    /// live stream; the replica is `online`, its ACK time is now, no SELECT
    /// is forced; `sync_partial_ok` +1.
    Continue {
        /// The offset of the first backlog byte to send (the request's).
        from_offset: i64,
        /// How many backlog bytes follow the reply.
        bytes: i64,
        /// Redis's log line, written after the backlog is queued.
        log: LogLine,
    },
    /// Refused: a full sync follows (`sync_full` +1 when it starts).
    FullSync {
        /// Why.
        reason: FullSyncReason,
        /// Redis's log lines, in order.
        log: Vec<LogLine>,
        /// True when `sync_partial_err` counts it (the id is not `?`).
        counts_partial_err: bool,
    },
}

/// Redis's decision for `request` against `master` (§2.3).
pub fn decide(master: &MasterIds, request: &Request<'_>) -> Decision {
    let Request { id, offset, name } = *request;
    // Redis tests only the first character (`master_replid[0] != '?'`).
    let forced = id.first() == Some(&b'?');
    let is_replid = master.replid.same_as(id);
    let is_replid2 = master.replid2.same_as(id);
    if !is_replid && (!is_replid2 || offset > master.second_replid_offset) {
        let (reason, text) = if forced {
            (
                FullSyncReason::Requested,
                format!("Full resync requested by replica {name}"),
            )
        } else if !is_replid2 {
            (
                FullSyncReason::IdMismatch,
                format!(
                    "Partial resynchronization not accepted: Replication ID mismatch \
                     (Replica asked for '{}', my replication IDs are '{}' and '{}')",
                    String::from_utf8_lossy(id),
                    master.replid,
                    master.replid2
                ),
            )
        } else {
            (
                FullSyncReason::SecondIdOffset,
                format!(
                    "Partial resynchronization not accepted: Requested offset for second ID \
                     was {offset}, but I can reply up to {}",
                    master.second_replid_offset
                ),
            )
        };
        return Decision::FullSync {
            reason,
            log: vec![LogLine::notice(text)],
            counts_partial_err: !forced,
        };
    }
    let within = master
        .backlog
        .filter(|b| offset >= b.first_byte_offset && offset <= b.first_byte_offset + b.histlen);
    let Some(backlog) = within else {
        let mut log = vec![LogLine::notice(format!(
            "Unable to partial resync with replica {name} for lack of backlog \
             (Replica request was: {offset})."
        ))];
        if offset > master.master_repl_offset {
            log.push(LogLine {
                level: LogLevel::Warning,
                text: format!(
                    "Warning: replica {name} tried to PSYNC with an offset that is greater \
                     than the master replication offset."
                ),
            });
        }
        return Decision::FullSync {
            reason: FullSyncReason::LackOfBacklog,
            log,
            counts_partial_err: !forced,
        };
    };
    // Redis's `addReplyReplicationBacklog`: `histlen - skip`.
    let bytes = backlog.histlen - (offset - backlog.first_byte_offset);
    Decision::Continue {
        from_offset: offset,
        bytes,
        log: LogLine::notice(format!(
            "Partial resynchronization request from {name} accepted. Sending {bytes} bytes \
             of backlog starting from offset {offset}."
        )),
    }
}

/// Appends the reply accepting a PSYNC: `+CONTINUE <replid>\r\n` for a
/// replica that sent `REPLCONF capa psync2`, else `+CONTINUE\r\n`.
pub fn encode_continue(replid: &ReplId, psync2: bool, out: &mut Vec<u8>) {
    out.extend_from_slice(b"+CONTINUE");
    if psync2 {
        out.push(b' ');
        out.extend_from_slice(replid.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends the reply starting a full sync: `+FULLRESYNC <replid>
/// <offset>\r\n`, `offset` being the last stream byte the payload includes.
pub fn encode_fullresync(replid: &ReplId, offset: i64, out: &mut Vec<u8>) {
    out.extend_from_slice(b"+FULLRESYNC ");
    out.extend_from_slice(replid.as_bytes());
    out.push(b' ');
    crate::types::num::write_i64(out, offset);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &[u8; 40] = b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &[u8; 40] = b"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &[u8; 40] = b"cccccccccccccccccccccccccccccccccccccccc";
    const NAME: &str = "10.0.0.7:6380";

    fn id(bytes: &[u8]) -> ReplId {
        ReplId::parse(bytes).unwrap()
    }

    /// A master whose backlog holds offsets 101..=1000, whose history
    /// shifted from B to A at offset 501 (B serves up to offset 500).
    fn master() -> MasterIds {
        MasterIds {
            replid: id(A),
            replid2: id(B),
            second_replid_offset: 501,
            backlog: Some(BacklogExtent {
                first_byte_offset: 101,
                histlen: 900,
            }),
            master_repl_offset: 1000,
        }
    }

    fn ask(master: &MasterIds, id: &[u8], offset: i64) -> Decision {
        decide(
            master,
            &Request {
                id,
                offset,
                name: NAME,
            },
        )
    }

    fn continued(d: &Decision) -> (i64, i64) {
        match d {
            Decision::Continue {
                from_offset, bytes, ..
            } => (*from_offset, *bytes),
            other => panic!("expected Continue, got {other:?}"),
        }
    }

    fn refused(d: &Decision) -> (FullSyncReason, Vec<(LogLevel, String)>, bool) {
        match d {
            Decision::FullSync {
                reason,
                log,
                counts_partial_err,
            } => (
                *reason,
                log.iter().map(|l| (l.level, l.text.clone())).collect(),
                *counts_partial_err,
            ),
            other => panic!("expected FullSync, got {other:?}"),
        }
    }

    fn lack_of_backlog(offset: i64) -> String {
        format!(
            "Unable to partial resync with replica {NAME} for lack of backlog \
             (Replica request was: {offset})."
        )
    }

    const GREATER: &str = "Warning: replica 10.0.0.7:6380 tried to PSYNC with an offset \
                           that is greater than the master replication offset.";

    #[test]
    fn accepts_every_offset_inside_the_backlog_and_one_past_it() {
        let m = master();
        let d = ask(&m, A, 101);
        assert_eq!(continued(&d), (101, 900));
        let Decision::Continue { log, .. } = &d else {
            unreachable!()
        };
        assert_eq!(log.level, LogLevel::Notice);
        assert_eq!(
            log.text,
            "Partial resynchronization request from 10.0.0.7:6380 accepted. \
             Sending 900 bytes of backlog starting from offset 101."
        );
        assert_eq!(continued(&ask(&m, A, 102)), (102, 899));
        assert_eq!(continued(&ask(&m, A, 1000)), (1000, 1));
        // The replica has everything: nothing to send, still accepted.
        let d = ask(&m, A, 1001);
        assert_eq!(continued(&d), (1001, 0));
        let Decision::Continue { log, .. } = &d else {
            unreachable!()
        };
        assert!(log
            .text
            .ends_with("Sending 0 bytes of backlog starting from offset 1001."));
    }

    #[test]
    fn refuses_offsets_outside_the_backlog() {
        let m = master();
        // One before the first byte.
        let (reason, log, counts) = refused(&ask(&m, A, 100));
        assert_eq!(reason, FullSyncReason::LackOfBacklog);
        assert_eq!(log, [(LogLevel::Notice, lack_of_backlog(100))]);
        assert!(counts);
        // Two past the last byte: also the warning.
        for off in [1002, i64::MAX] {
            let (reason, log, counts) = refused(&ask(&m, A, off));
            assert_eq!(reason, FullSyncReason::LackOfBacklog);
            assert_eq!(
                log,
                [
                    (LogLevel::Notice, lack_of_backlog(off)),
                    (LogLevel::Warning, GREATER.to_string())
                ]
            );
            assert!(counts);
        }
        let (_, log, _) = refused(&ask(&m, A, -1));
        assert_eq!(log, [(LogLevel::Notice, lack_of_backlog(-1))]);
    }

    #[test]
    fn the_warning_follows_master_repl_offset_not_the_backlog_end() {
        // A backlog that (abnormally) ends before master_repl_offset: the
        // range test uses the backlog, the warning master_repl_offset.
        let mut m = master();
        m.backlog = Some(BacklogExtent {
            first_byte_offset: 101,
            histlen: 800,
        });
        assert_eq!(continued(&ask(&m, A, 901)), (901, 0));
        let (_, log, _) = refused(&ask(&m, A, 902));
        assert_eq!(log.len(), 1);
        let (_, log, _) = refused(&ask(&m, A, 1001));
        assert_eq!(log.len(), 2);
    }

    #[test]
    fn without_a_backlog_every_good_id_gets_a_full_sync() {
        let mut m = master();
        m.backlog = None;
        for off in [101, 1000] {
            let (reason, log, counts) = refused(&ask(&m, A, off));
            assert_eq!(reason, FullSyncReason::LackOfBacklog);
            assert_eq!(log, [(LogLevel::Notice, lack_of_backlog(off))]);
            assert!(counts);
        }
        // Past master_repl_offset: the warning too (with a backlog, 1001
        // would have been accepted with 0 bytes).
        let (_, log, _) = refused(&ask(&m, A, 1001));
        assert_eq!(log[1], (LogLevel::Warning, GREATER.to_string()));
        // replid2 at its limit: also the backlog's verdict.
        let (reason, _, _) = refused(&ask(&m, B, 501));
        assert_eq!(reason, FullSyncReason::LackOfBacklog);
    }

    #[test]
    fn replid2_serves_up_to_second_replid_offset() {
        let m = master();
        assert_eq!(continued(&ask(&m, B, 501)), (501, 500));
        assert_eq!(continued(&ask(&m, B, 101)), (101, 900));
        let (reason, log, counts) = refused(&ask(&m, B, 502));
        assert_eq!(reason, FullSyncReason::SecondIdOffset);
        assert_eq!(
            log,
            [(
                LogLevel::Notice,
                "Partial resynchronization not accepted: Requested offset for second ID \
                 was 502, but I can reply up to 501"
                    .to_string()
            )]
        );
        assert!(counts);
        // Under the backlog with replid2: the backlog's verdict.
        let (reason, _, _) = refused(&ask(&m, B, 100));
        assert_eq!(reason, FullSyncReason::LackOfBacklog);
        // The current id has no such limit.
        assert_eq!(continued(&ask(&m, A, 502)), (502, 499));
    }

    #[test]
    fn a_cleared_replid2_matches_nothing_useful() {
        // Redis clears replid2 to 40 zeros and second_replid_offset to -1.
        let mut m = master();
        m.replid2 = ReplId::NONE;
        m.second_replid_offset = -1;
        let zeros = [b'0'; 40];
        let (reason, _, _) = refused(&ask(&m, &zeros, 101));
        assert_eq!(reason, FullSyncReason::SecondIdOffset);
        // At offset -1 the id passes, and the backlog refuses.
        let (reason, _, _) = refused(&ask(&m, &zeros, -1));
        assert_eq!(reason, FullSyncReason::LackOfBacklog);
    }

    #[test]
    fn ids_compare_without_case() {
        let m = master();
        let upper_a = A.to_ascii_uppercase();
        let upper_b = B.to_ascii_uppercase();
        assert_eq!(continued(&ask(&m, &upper_a, 500)), (500, 501));
        assert_eq!(continued(&ask(&m, &upper_b, 500)), (500, 501));
        let (reason, _, _) = refused(&ask(&m, &upper_b, 502));
        assert_eq!(reason, FullSyncReason::SecondIdOffset);
        // Mixed case too.
        let mut mixed = *A;
        mixed[7] = b'A';
        assert_eq!(continued(&ask(&m, &mixed, 1001)), (1001, 0));
    }

    #[test]
    fn a_question_mark_requests_a_full_sync_not_counted_as_an_error() {
        let m = master();
        for req in [&b"?"[..], b"?anything"] {
            let (reason, log, counts) = refused(&ask(&m, req, -1));
            assert_eq!(reason, FullSyncReason::Requested);
            assert_eq!(
                log,
                [(
                    LogLevel::Notice,
                    "Full resync requested by replica 10.0.0.7:6380".to_string()
                )]
            );
            assert!(!counts);
        }
        // Even at an offset the backlog holds.
        let (reason, _, counts) = refused(&ask(&m, b"?", 500));
        assert_eq!(reason, FullSyncReason::Requested);
        assert!(!counts);
    }

    #[test]
    fn an_unknown_id_is_a_counted_mismatch_with_redis_text() {
        let m = master();
        for req in [&C[..], b"", b"not-an-id", &A[..39], b"a?"] {
            let (reason, log, counts) = refused(&ask(&m, req, 500));
            assert_eq!(reason, FullSyncReason::IdMismatch);
            assert_eq!(
                log,
                [(
                    LogLevel::Notice,
                    format!(
                        "Partial resynchronization not accepted: Replication ID mismatch \
                         (Replica asked for '{}', my replication IDs are \
                         'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' and \
                         'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb')",
                        String::from_utf8_lossy(req)
                    )
                )]
            );
            assert!(counts);
        }
    }

    #[test]
    fn replies_are_byte_exact() {
        let replid = id(A);
        let mut out = Vec::new();
        encode_continue(&replid, true, &mut out);
        assert_eq!(
            out,
            b"+CONTINUE aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"
        );
        out.clear();
        encode_continue(&replid, false, &mut out);
        assert_eq!(out, b"+CONTINUE\r\n");
        out.clear();
        encode_fullresync(&replid, 1000, &mut out);
        assert_eq!(
            out,
            b"+FULLRESYNC aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 1000\r\n"
        );
        out.clear();
        encode_fullresync(&replid, 0, &mut out);
        assert_eq!(
            out,
            b"+FULLRESYNC aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 0\r\n"
        );
    }
}
