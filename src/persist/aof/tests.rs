//! Unit tests of the AOF format: batches, annotations, replay, walk.
use super::*;

fn effect(db: usize, args: &[&str]) -> Effect {
    Effect {
        db,
        argv: args.iter().map(|a| a.as_bytes().to_vec()).collect(),
    }
}

fn file_of(units: &[Vec<Effect>]) -> Vec<u8> {
    let mut out = FILE_HEADER.to_vec();
    let mut db = None;
    for (i, unit) in units.iter().enumerate() {
        let mut b = BatchBuilder::new();
        b.push_unit(unit, &mut db);
        out.extend(b.finish(1000 + i as i64));
    }
    out
}

fn replay_all(data: &[u8]) -> Result<(LoadReport, Vec<String>), Corruption> {
    let mut seen = Vec::new();
    let report = replay(data, &mut |argv| {
        seen.push(
            argv.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" "),
        );
        Ok(())
    })?;
    Ok((report, seen))
}

#[test]
fn batches_round_trip_with_select_and_multi() {
    let data = file_of(&[
        vec![effect(0, &["SET", "a", "1"])],
        vec![effect(3, &["SET", "b", "2"]), effect(3, &["DEL", "c"])],
    ]);
    let (report, seen) = replay_all(&data).unwrap();
    assert_eq!(
        seen,
        ["SELECT 0", "SET a 1", "SELECT 3", "SET b 2", "DEL c"]
    );
    assert_eq!(report.batches, 2);
    assert_eq!(report.commands, 3);
    assert_eq!(report.torn, None);
    assert_eq!(report.valid_len, data.len() as u64);
    let text = String::from_utf8_lossy(&data);
    assert!(text.contains("*1\r\n$5\r\nMULTI\r\n"), "{text}");
}

#[test]
fn truncation_at_every_offset_is_a_torn_tail_and_yields_a_prefix() {
    let units: Vec<Vec<Effect>> = (0..6)
        .map(|i| vec![effect(0, &["SET", &format!("k{i}"), "v"])])
        .collect();
    let data = file_of(&units);
    let (_, full) = replay_all(&data).unwrap();
    for cut in 0..data.len() {
        let (report, seen) =
            replay_all(&data[..cut]).unwrap_or_else(|c| panic!("cut {cut}: {c:?}"));
        assert!(full.starts_with(&seen), "cut {cut}: not a prefix");
        if cut != report.valid_len as usize {
            assert!(report.torn.is_some(), "cut {cut}");
        }
    }
}

#[test]
fn a_damaged_length_mid_file_is_corruption_not_a_torn_tail() {
    let units: Vec<Vec<Effect>> = (0..4)
        .map(|i| vec![effect(0, &["SET", &format!("k{i}"), "value"])])
        .collect();
    let data = file_of(&units);
    // Batch bodies start after the header and after each annotation.
    let mut starts = vec![FILE_HEADER.len()];
    let mut at = FILE_HEADER.len();
    while let Some(p) = data[at..].windows(5).position(|w| w == b"#hz1 ") {
        let line_end = at
            + p
            + data[at + p..]
                .iter()
                .position(|&b| b == b'\n')
                .expect("eol");
        at = line_end + 1;
        if at < data.len() {
            starts.push(at);
        }
    }
    assert_eq!(starts.len(), 4);
    // A batch's `$5` (the value's length) made a length past the end
    // of the file.
    let damage = |batch: usize| {
        let from = starts[batch];
        let len_at = from
            + data[from..]
                .windows(4)
                .position(|w| w == b"$5\r\n")
                .expect("the value's length");
        let mut damaged = data.clone();
        damaged.splice(len_at..len_at + 2, b"$99999".iter().copied());
        damaged
    };
    // Mid-file: the batches after it are intact, so nothing may be
    // dropped as a torn tail.
    let err = replay_all(&damage(1)).unwrap_err();
    assert!(err.reason.contains("past the end"), "{err:?}");
    assert_eq!(err.offset, starts[1] as u64);
    let walked = walk(&damage(1), &mut |_| std::ops::ControlFlow::Continue(()));
    assert_eq!(walked.unwrap_err().offset, starts[1] as u64);
    // In the last batch: a torn tail.
    let (report, _) = replay_all(&damage(3)).unwrap();
    assert!(report.torn.is_some());
    assert_eq!(report.batches, 3);
}

#[test]
fn bit_flip_in_last_batch_is_torn_but_earlier_is_corruption() {
    let units: Vec<Vec<Effect>> = (0..4)
        .map(|i| vec![effect(0, &["SET", &format!("k{i}"), "value"])])
        .collect();
    let data = file_of(&units);
    // Flip a byte inside the last batch's value.
    let last_value = data.len() - 40;
    let mut damaged = data.clone();
    damaged[last_value] ^= 0x01;
    let (report, seen) = replay_all(&damaged).unwrap();
    assert!(report.torn.is_some());
    assert_eq!(seen.iter().filter(|s| s.starts_with("SET")).count(), 3);
    // Flip a byte inside the first batch: later batches are intact.
    let mut damaged = data.clone();
    let first_value = FILE_HEADER.len() + 40;
    damaged[first_value] ^= 0x01;
    let err = replay_all(&damaged).unwrap_err();
    assert!(err.reason.contains("checksum mismatch"), "{err:?}");
    assert_eq!(err.offset, FILE_HEADER.len() as u64);
}

#[test]
fn redis_plain_files_load_with_incomplete_tail_and_unfinished_multi() {
    let mut data = b"#TS:1699999999\r\n".to_vec();
    encode_command(&mut data, &["SELECT", "0"]);
    data.extend_from_slice(b"#TS:1700000000\r\n");
    encode_command(&mut data, &["SET", "a", "1"]);
    let good = data.len();
    encode_command(&mut data, &["MULTI"]);
    encode_command(&mut data, &["SET", "b", "2"]);
    let (report, seen) = replay_all(&data).unwrap();
    assert_eq!(seen, ["SELECT 0", "SET a 1"]);
    assert_eq!(report.valid_len, good as u64);
    assert!(report.torn.unwrap().reason.contains("MULTI"));
    assert_eq!(report.last_ts_ms, Some(1_700_000_000_000));
    assert_eq!(report.first_ts_ms, Some(1_699_999_999_000));
    let mut data2 = data[..good].to_vec();
    data2.extend_from_slice(b"*2\r\n$3\r\nGET");
    let (report, _) = replay_all(&data2).unwrap();
    assert_eq!(report.valid_len, good as u64);
    let mut bad = data[..good].to_vec();
    bad.extend_from_slice(b"+OK\r\n");
    encode_command(&mut bad, &["SET", "c", "3"]);
    assert!(replay_all(&bad).is_err());
}

#[test]
fn batch_verifies_accepts_what_finish_builds_and_nothing_damaged() {
    let mut b = BatchBuilder::new();
    let mut db = None;
    b.push_command(3, &[b"SET", b"k", b"line\r\nbreak\n"], &mut db);
    b.push_command(3, &[b"INCR", b"n"], &mut db);
    let batch = b.finish(1_700_000_000_000);
    assert!(batch_verifies(&batch));
    for i in 0..batch.len() {
        let mut bad = batch.clone();
        bad[i] ^= 0x01;
        assert!(!batch_verifies(&bad), "flip at {i}");
    }
    for cut in 0..batch.len() {
        assert!(!batch_verifies(&batch[..cut]), "cut at {cut}");
    }
    // An annotation alone, or one over something that is not a
    // command, is refused too.
    assert!(!batch_verifies(&annotation_line(b"", 5)));
    let mut junk = b"+OK\r\n".to_vec();
    junk.extend_from_slice(&annotation_line(b"+OK\r\n", 5));
    assert!(!batch_verifies(&junk));
}

#[test]
fn command_at_reads_like_the_loader() {
    let mut data = Vec::new();
    encode_command(&mut data, &["SET", "k", "v"]);
    let first = data.len();
    data.extend_from_slice(b"*2\r\n$3\r\nGET");
    match command_at(&data, 0) {
        CommandAt::Complete { args, end } => {
            assert_eq!(end, first);
            assert_eq!(&data[args[1].clone()], b"k");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(command_at(&data, first), CommandAt::Incomplete);
    assert_eq!(command_at(&data, data.len()), CommandAt::Incomplete);
    assert!(matches!(command_at(b"+OK\r\n", 0), CommandAt::Malformed(_)));
}

#[test]
fn hostile_counts_do_not_allocate() {
    let data = b"*2147483647\r\n$9999999999\r\n".to_vec();
    let (report, _) = replay_all(&data).unwrap();
    assert_eq!(report.valid_len, 0);
}

/// What `walk` sent: (offset, argv text, ts, in_multi) per command,
/// and the batches.
type Walked = (Vec<(u64, String, Option<i64>, bool)>, Vec<WalkBatch>);

fn walk_all(data: &[u8]) -> Result<(LoadReport, Walked), Corruption> {
    let mut commands = Vec::new();
    let mut batches = Vec::new();
    let report = walk(data, &mut |event| {
        match event {
            WalkEvent::Command(c) => {
                assert_eq!(data[c.offset as usize], b'*');
                // The command's bytes are exactly its encoding.
                let mut encoded = Vec::new();
                encode_command(&mut encoded, c.argv);
                let at = c.offset as usize;
                assert_eq!(&data[at..at + c.len as usize], &encoded[..]);
                commands.push((
                    c.offset,
                    c.argv
                        .iter()
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect::<Vec<_>>()
                        .join(" "),
                    c.ts_ms,
                    c.in_multi,
                ));
            }
            WalkEvent::BatchEnd(b) => batches.push(b),
        }
        std::ops::ControlFlow::Continue(())
    })?;
    Ok((report, (commands, batches)))
}

/// `walk` and `replay` agree on the result and on the commands
/// (replay leaves MULTI/EXEC out).
fn assert_walk_matches_replay(data: &[u8], what: &str) {
    let replayed = replay_all(data);
    let walked = walk_all(data);
    match (replayed, walked) {
        (Ok((r1, seen)), Ok((r2, (cmds, _)))) => {
            assert_eq!(r1, r2, "{what}");
            let names: Vec<String> = cmds
                .into_iter()
                .map(|c| c.1)
                .filter(|c| !c.eq_ignore_ascii_case("MULTI") && !c.eq_ignore_ascii_case("EXEC"))
                .collect();
            assert_eq!(seen, names, "{what}");
        }
        (Err(e1), Err(e2)) => assert_eq!(e1, e2, "{what}"),
        (a, b) => panic!("{what}: replay {a:?} walk {b:?}"),
    }
}

#[test]
fn walk_reports_offsets_timestamps_multi_and_batches() {
    let data = file_of(&[
        vec![effect(0, &["SET", "a", "1"])],
        vec![effect(3, &["SET", "b", "2"]), effect(3, &["DEL", "c"])],
    ]);
    let (report, (cmds, batches)) = walk_all(&data).unwrap();
    let text: Vec<&str> = cmds.iter().map(|c| c.1.as_str()).collect();
    assert_eq!(
        text,
        ["SELECT 0", "SET a 1", "SELECT 3", "MULTI", "SET b 2", "DEL c", "EXEC"]
    );
    let ts: Vec<Option<i64>> = cmds.iter().map(|c| c.2).collect();
    assert_eq!(ts[..2], [Some(1000); 2]);
    assert_eq!(ts[2..], [Some(1001); 5]);
    let multi: Vec<bool> = cmds.iter().map(|c| c.3).collect();
    assert_eq!(multi, [false, false, false, true, true, true, true]);
    assert_eq!(cmds[0].0, FILE_HEADER.len() as u64);
    assert_eq!(batches.len(), 2);
    assert_eq!(batches[0].commands, 2);
    assert_eq!(batches[1].commands, 5);
    assert_eq!(batches[0].body_offset, FILE_HEADER.len() as u64);
    assert_eq!(batches[1].body_offset, batches[0].end);
    assert_eq!(batches[1].end, data.len() as u64);
    assert!(data[batches[1].annotation_offset as usize..].starts_with(b"#hz1 "));
    assert_eq!(report.commands, 3);
    assert_eq!(report.batches, 2);
}

#[test]
fn walk_plain_uses_the_last_ts_line_and_sends_multi_blocks_at_exec() {
    let mut data = Vec::new();
    encode_command(&mut data, &["SET", "early", "1"]);
    data.extend_from_slice(b"#TS:1700000000\r\n");
    encode_command(&mut data, &["SELECT", "2"]);
    encode_command(&mut data, &["MULTI"]);
    data.extend_from_slice(b"#TS:1700000005\r\n");
    encode_command(&mut data, &["INCR", "n"]);
    encode_command(&mut data, &["EXEC"]);
    let (report, (cmds, batches)) = walk_all(&data).unwrap();
    assert!(batches.is_empty());
    let got: Vec<(&str, Option<i64>, bool)> =
        cmds.iter().map(|c| (c.1.as_str(), c.2, c.3)).collect();
    assert_eq!(
        got,
        [
            ("SET early 1", None, false),
            ("SELECT 2", Some(1_700_000_000_000), false),
            ("MULTI", Some(1_700_000_000_000), true),
            ("INCR n", Some(1_700_000_005_000), true),
            ("EXEC", Some(1_700_000_005_000), true),
        ]
    );
    assert_eq!(report.commands, 2);
    assert_eq!(report.valid_len, data.len() as u64);
}

#[test]
fn walk_stops_when_told() {
    let units: Vec<Vec<Effect>> = (0..5)
        .map(|i| vec![effect(0, &["SET", &format!("k{i}"), "v"])])
        .collect();
    let data = file_of(&units);
    let mut seen = 0;
    let report = walk(&data, &mut |event| {
        if matches!(event, WalkEvent::Command(_)) {
            seen += 1;
        }
        if seen == 3 {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    })
    .unwrap();
    assert_eq!(seen, 3);
    assert!(report.torn.is_none());
    assert!(report.valid_len < data.len() as u64);
}

#[test]
fn walk_matches_replay_on_every_cut_and_every_flipped_byte() {
    let checksummed = file_of(&[
        vec![effect(0, &["SET", "a", "1"])],
        vec![effect(2, &["SET", "b", "2"]), effect(2, &["DEL", "c"])],
        vec![effect(2, &["RPUSH", "l", "x", "y"])],
    ]);
    let mut plain = b"#TS:1700000000\r\n".to_vec();
    encode_command(&mut plain, &["SELECT", "1"]);
    encode_command(&mut plain, &["MULTI"]);
    encode_command(&mut plain, &["SET", "x", "1"]);
    encode_command(&mut plain, &["EXEC"]);
    plain.extend_from_slice(b"#TS:1700000001\r\n");
    encode_command(&mut plain, &["DEL", "x"]);
    // A Redis file hozon appended to.
    let mut mixed = plain.clone();
    mixed.extend_from_slice(&checksummed);
    for data in [&checksummed, &plain, &mixed] {
        for cut in 0..=data.len() {
            assert_walk_matches_replay(&data[..cut], &format!("cut {cut}"));
        }
        for at in 0..data.len() {
            for bit in [0x01, 0x20, 0x80] {
                let mut damaged = data.clone();
                damaged[at] ^= bit;
                assert_walk_matches_replay(&damaged, &format!("flip {bit:#x} at {at}"));
            }
        }
    }
}

/// A batch of `unit` ending with the `#repl` line for `position` (`Some(None)`
/// writes `#repl none`; `None` writes no line).
fn batch_with_position(
    unit: &[Effect],
    position: Option<Option<&Position>>,
    db: &mut Option<usize>,
    ts: i64,
) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    b.push_unit(unit, db);
    if let Some(p) = position {
        b.push_position(p);
    }
    b.finish(ts)
}

fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_command(&mut out, args);
    out
}

fn position(offset: i64, stream_db: u32) -> Position {
    Position {
        replid: crate::repl::ids::ReplId::parse(b"0123456789abcdef0123456789abcdef01234567")
            .unwrap(),
        offset,
        stream_db,
    }
}

#[test]
fn position_lines_are_loaded_from_verified_batches_and_never_replayed() {
    let (p1, p2) = (position(100, 0), position(250, 3));
    let mut db = None;
    let mut data = FILE_HEADER.to_vec();
    data.extend(batch_with_position(
        &[effect(0, &["SET", "a", "1"])],
        Some(Some(&p1)),
        &mut db,
        1,
    ));
    let after_first = data.len();
    data.extend(batch_with_position(
        &[effect(3, &["SET", "b", "2"])],
        Some(Some(&p2)),
        &mut db,
        2,
    ));
    let (report, seen) = replay_all(&data).unwrap();
    assert_eq!(seen, ["SELECT 0", "SET a 1", "SELECT 3", "SET b 2"]);
    assert_eq!(report.position, Some(p2));
    assert_eq!(report.batches, 2);
    assert_walk_matches_replay(&data, "two batches with positions");
    // A position-only batch (a turn with only stream bytes) moves it too.
    let mut only = BatchBuilder::new();
    only.push_position(Some(&position(260, 3)));
    let mut more = data.clone();
    let only = only.finish(3);
    // The writer's pair check accepts what the loader accepts.
    assert!(batch_verifies(&only));
    more.extend(only);
    let (report, seen) = replay_all(&more).unwrap();
    assert_eq!(seen.len(), 4);
    assert_eq!(report.position, Some(position(260, 3)));
    // A torn last batch loses its position with its data.
    let (report, _) = replay_all(&data[..data.len() - 1]).unwrap();
    assert_eq!(report.position, Some(p1));
    assert_eq!(report.valid_len, after_first as u64);
}

#[test]
fn a_position_ends_with_none_a_batch_without_one_or_a_plain_command() {
    let p = position(7, 0);
    let unit = [effect(0, &["SET", "a", "1"])];
    let mut db = None;
    let mut with = FILE_HEADER.to_vec();
    with.extend(batch_with_position(&unit, Some(Some(&p)), &mut db, 1));
    assert_eq!(replay_all(&with).unwrap().0.position, Some(p));
    for (what, tail) in [
        (
            "#repl none",
            batch_with_position(&unit, Some(None), &mut db, 2),
        ),
        (
            "a batch without a line",
            batch_with_position(&unit, None, &mut db, 2),
        ),
    ] {
        let mut data = with.clone();
        data.extend(tail);
        assert_eq!(replay_all(&data).unwrap().0.position, None, "{what}");
    }
    // Plain RESP (a Redis-written part) before the hozon header, then a
    // batch with a position: the position holds; the other way round a
    // plain command after a position cannot occur (no plain part after
    // the header), so a plain file alone has none.
    let mut plain = resp(&[&b"SET"[..], b"x", b"1"]);
    assert_eq!(replay_all(&plain).unwrap().0.position, None);
    plain.extend_from_slice(&with);
    assert_eq!(replay_all(&plain).unwrap().0.position, Some(p));
}

#[test]
fn a_damaged_position_line_in_a_verified_batch_is_corruption() {
    // A line the batch's CRC covers but that does not parse was written
    // so: refused, never skipped.
    let mut body = resp(&[&b"SELECT"[..], b"0"]);
    body.extend(resp(&[&b"SET"[..], b"a", b"1"]));
    let at = FILE_HEADER.len() + body.len();
    body.extend_from_slice(b"#repl 0123 12 0\r\n");
    let mut data = FILE_HEADER.to_vec();
    data.extend_from_slice(&body);
    data.extend(annotation_line(&body, 5));
    let err = replay_all(&data).unwrap_err();
    assert_eq!(err.offset, at as u64);
    assert!(err.reason.contains("#repl"), "{}", err.reason);
}

#[test]
fn position_lines_are_skipped_where_no_checksum_covers_them() {
    // Outside a checksummed section a `#repl` line is a comment, as any
    // `#` line is for Redis; it carries no position.
    let mut data = b"#repl 0123456789abcdef0123456789abcdef01234567 5 0\r\n".to_vec();
    data.extend(resp(&[&b"SET"[..], b"a", b"1"]));
    let (report, seen) = replay_all(&data).unwrap();
    assert_eq!(seen, ["SET a 1"]);
    assert_eq!(report.position, None);
}

#[test]
fn a_body_taken_and_sealed_elsewhere_is_the_batch_finish_builds() {
    let build = |b: &mut BatchBuilder| {
        let mut db = None;
        b.push_command(0, &[b"SET", b"k", b"v"], &mut db);
        b.push_command(2, &[b"HSET", b"h", b"f", b"v"], &mut db);
    };
    let mut finished = BatchBuilder::new();
    build(&mut finished);
    let expected = finished.finish(1_700_000_000_123);
    let mut taken = BatchBuilder::new();
    build(&mut taken);
    let capacity = taken.body.capacity();
    let body = taken.take_body();
    assert!(taken.is_empty());
    assert_eq!(taken.commands(), 0);
    assert_eq!(
        taken.body.capacity(),
        capacity,
        "the next body is not regrown"
    );
    let sealed = seal(body, 1_700_000_000_123);
    assert_eq!(sealed, expected);
    assert!(batch_verifies(&sealed));
}
