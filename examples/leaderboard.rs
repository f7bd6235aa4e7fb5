//! A game leaderboard on a sorted set (`ranking:<board>`): members are
//! players, scores their points.
//!
//! - `ZADD` registers players, `ZINCRBY` adds each match's points;
//! - `ZREVRANGE … WITHSCORES` gives the top N, `ZREVRANK` a player's
//!   place (0 = first) and, with a second `ZREVRANGE` around it, the
//!   player's neighbourhood ("you are 12th; here are 10th to 14th");
//! - the board survives closing and reopening the data directory.
//!
//! Every reply is checked against the same ranking computed in Rust (ties
//! ordered as Redis orders them: by member, reversed).
//!
//! Run: `cargo run --example leaderboard` (it asserts what it shows and
//! exits non-zero otherwise).

use std::collections::BTreeMap;

use hozon::embed::{Conn, Db, DbError};
use hozon::Reply;

const BOARD: &[u8] = b"ranking:game";

/// Players and their points, best first.
type Entries = Vec<(String, f64)>;

/// `(player, points)` from a `WITHSCORES` reply: in RESP2 (a new
/// connection's protocol) a flat array of member, score, member, score.
fn entries(reply: Reply) -> Entries {
    let Reply::Array(items) = reply else {
        panic!("not an array: {reply:?}");
    };
    items
        .chunks(2)
        .map(|pair| match pair {
            [Reply::Bulk(member), Reply::Double(score)] => {
                (String::from_utf8_lossy(member).into_owned(), *score)
            }
            other => panic!("not a member and its score: {other:?}"),
        })
        .collect()
}

/// The top `n` players, best first.
fn top(conn: &mut Conn, n: usize) -> Result<Entries, DbError> {
    let last = (n - 1).to_string();
    Ok(entries(conn.execute(&[
        b"ZREVRANGE",
        BOARD,
        b"0",
        last.as_bytes(),
        b"WITHSCORES",
    ])?))
}

/// A player's place (0 = first) and the players `around` places above and
/// below; None for a player who never played.
fn neighbourhood(
    conn: &mut Conn,
    player: &str,
    around: i64,
) -> Result<Option<(i64, Entries)>, DbError> {
    let rank = match conn.execute(&[b"ZREVRANK", BOARD, player.as_bytes()])? {
        Reply::Int(rank) => rank,
        Reply::Null => return Ok(None),
        other => panic!("ZREVRANK: {other:?}"),
    };
    let (from, to) = (
        (rank - around).max(0).to_string(),
        (rank + around).to_string(),
    );
    let reply = conn.execute(&[
        b"ZREVRANGE",
        BOARD,
        from.as_bytes(),
        to.as_bytes(),
        b"WITHSCORES",
    ])?;
    Ok(Some((rank, entries(reply))))
}

fn main() -> Result<(), DbError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path())?;
    let mut conn = db.connect();

    // 12 players start at 1000 points; 300 matches follow, each giving
    // the winner 10 to 40 points (a fixed pseudo-random sequence).
    let players: Vec<String> = [
        "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
        "mallory", "tanaka",
    ]
    .iter()
    .map(|name| format!("player:{name}"))
    .collect();
    let mut model: BTreeMap<String, f64> = BTreeMap::new();
    for player in &players {
        assert_eq!(
            conn.execute(&[b"ZADD", BOARD, b"1000", player.as_bytes()])?,
            Reply::Int(1)
        );
        model.insert(player.clone(), 1000.0);
    }
    let mut seed: u64 = 2026;
    for _ in 0..300 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let winner = &players[(seed >> 33) as usize % players.len()];
        let points = 10 + (seed >> 20) % 31;
        let reply = conn.execute(&[
            b"ZINCRBY",
            BOARD,
            points.to_string().as_bytes(),
            winner.as_bytes(),
        ])?;
        let total = model.get_mut(winner).expect("a player");
        *total += points as f64;
        assert_eq!(
            reply,
            Reply::Double(*total),
            "ZINCRBY answers the new total"
        );
    }

    // The model's ranking: most points first, ties by member reversed.
    let mut ranking: Entries = model.into_iter().collect();
    ranking.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));

    let podium = top(&mut conn, 3)?;
    println!("top 3:");
    for (place, (player, points)) in podium.iter().enumerate() {
        println!("  {}. {player} {points}", place + 1);
    }
    assert_eq!(podium, ranking[..3]);

    let (rank, around) = neighbourhood(&mut conn, "player:tanaka", 2)?.expect("tanaka played");
    println!(
        "player:tanaka is #{} of {}; around them:",
        rank + 1,
        players.len()
    );
    let first = (rank - 2).max(0);
    for (i, (player, points)) in around.iter().enumerate() {
        let marker = if player == "player:tanaka" {
            " <- you"
        } else {
            ""
        };
        println!("  {}. {player} {points}{marker}", first + i as i64 + 1);
    }
    let expected_rank = ranking
        .iter()
        .position(|(p, _)| p == "player:tanaka")
        .unwrap();
    assert_eq!(rank as usize, expected_rank);
    let last = (expected_rank + 2).min(ranking.len() - 1);
    assert_eq!(around, ranking[first as usize..=last]);
    assert_eq!(neighbourhood(&mut conn, "player:nobody", 2)?, None);

    // Closed and reopened: the same board, scores exact.
    let whole = |conn: &mut Conn| conn.execute(&[b"ZREVRANGE", BOARD, b"0", b"-1", b"WITHSCORES"]);
    let before = entries(whole(&mut conn)?);
    assert_eq!(before, ranking);
    drop(conn);
    db.close()?;
    let db = Db::open(dir.path())?;
    assert_eq!(entries(whole(&mut db.connect())?), before);
    println!("reopened: the same {} players, same scores", before.len());
    db.close()?;
    println!("ok");
    Ok(())
}
