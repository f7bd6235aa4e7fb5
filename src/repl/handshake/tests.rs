//! Unit tests of the replica handshake: the bytes sent for each configuration, every reply branch, Redis's log texts.
use super::*;

const ID: &str = "0123456789abcdef0123456789abcdef01234567";
const OTHER: &str = "fedcba9876543210fedcba9876543210fedcba98";

fn config(user: Option<&str>, auth: Option<&str>, ip: Option<&str>) -> Config {
    Config {
        host: "10.0.0.1".into(),
        port: 6379,
        listening_port: 6380,
        announce_ip: ip.map(|s| s.as_bytes().to_vec()),
        masteruser: user.map(|s| s.as_bytes().to_vec()),
        masterauth: auth.map(|s| s.as_bytes().to_vec()),
        failover: false,
    }
}

fn plain() -> Handshake {
    Handshake::new(config(None, None, None))
}

fn texts(step: &Step) -> Vec<&str> {
    step.log.iter().map(|l| l.text.as_str()).collect()
}

fn line(h: &mut Handshake, line: &str) -> Step {
    h.handle(Event::Line(line.as_bytes()))
}

fn cached(offset: i64) -> Option<Position> {
    Some(Position {
        replid: ReplId::parse(ID.as_bytes()).unwrap(),
        offset,
        stream_db: 0,
    })
}

/// Drives a machine to the PSYNC reply; returns the PSYNC step.
fn to_psync(h: &mut Handshake) -> Step {
    h.handle(Event::Cron);
    h.handle(Event::Connected);
    line(h, "+PONG");
    while h.state() != State::ReceiveCapaReply {
        line(h, "+OK");
    }
    let step = line(h, "+OK");
    assert_eq!(step.state, State::ReceivePsyncReply);
    step
}

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
const PORT: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port\r\n$4\r\n6380\r\n";
const CAPA: &[u8] =
    b"*5\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$3\r\neof\r\n$4\r\ncapa\r\n$6\r\npsync2\r\n";
const PSYNC_ANY: &[u8] = b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n";

#[test]
fn a_first_full_sync_goes_as_with_redis() {
    let mut h = plain();
    assert_eq!(h.config(), &config(None, None, None));
    assert_eq!(h.state(), State::Connect);
    let step = h.handle(Event::Cron);
    assert_eq!(
        texts(&step),
        [
            "Connecting to MASTER 10.0.0.1:6379",
            "MASTER <-> REPLICA sync started"
        ]
    );
    assert!(step.log.iter().all(|l| l.level == LogLevel::Notice));
    assert!(step.connect && step.send.is_empty() && step.outcome.is_none());
    assert_eq!(step.state, State::Connecting);

    let step = h.handle(Event::Connected);
    assert_eq!(
        texts(&step),
        ["Non blocking connect for SYNC fired the event."]
    );
    assert_eq!(step.send, PING);
    assert!(!step.connect);
    assert_eq!(step.state, State::ReceivePingReply);

    let step = line(&mut h, "+PONG");
    assert_eq!(
        texts(&step),
        ["Master replied to PING, replication can continue..."]
    );
    assert_eq!(step.send, [PORT, CAPA].concat());
    assert_eq!(step.state, State::ReceivePortReply);

    let step = line(&mut h, "+OK");
    assert!(step.log.is_empty() && step.send.is_empty());
    assert_eq!(step.state, State::ReceiveCapaReply);

    let step = line(&mut h, "+OK");
    assert_eq!(
        texts(&step),
        ["Partial resynchronization not possible (no cached master)"]
    );
    assert_eq!(step.send, PSYNC_ANY);
    assert_eq!(step.state, State::ReceivePsyncReply);

    let step = line(&mut h, &format!("+FULLRESYNC {ID} 4242"));
    assert_eq!(
        texts(&step),
        [format!("Full resync from master: {ID}:4242")]
    );
    assert_eq!(
        step.outcome,
        Some(Outcome::FullSync {
            replid: ReplId::parse(ID.as_bytes()),
            offset: 4242
        })
    );
    assert_eq!(
        (step.state, step.state.role_name()),
        (State::Transfer, "sync")
    );

    let step = h.handle(Event::Loaded);
    assert_eq!(
        texts(&step),
        ["MASTER <-> REPLICA sync: Finished with success"]
    );
    assert_eq!(
        (step.state, step.state.role_name()),
        (State::Connected, "connected")
    );
}

#[test]
fn the_pipelined_commands_for_every_configuration() {
    let auth = b"*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n".to_vec();
    let user_auth = b"*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$6\r\nsecret\r\n".to_vec();
    let ip = b"*3\r\n$8\r\nREPLCONF\r\n$10\r\nip-address\r\n$8\r\n10.0.0.7\r\n".to_vec();
    let none = Vec::new();
    let cases = [
        ((None, None, None), [&none, &none], 2),
        ((None, Some("secret"), None), [&auth, &none], 3),
        (
            (Some("alice"), Some("secret"), None),
            [&user_auth, &none],
            3,
        ),
        // masteruser alone sends no AUTH.
        ((Some("alice"), None, None), [&none, &none], 2),
        ((None, None, Some("10.0.0.7")), [&none, &ip], 3),
        ((None, Some("secret"), Some("10.0.0.7")), [&auth, &ip], 4),
        (
            (Some("alice"), Some("secret"), Some("10.0.0.7")),
            [&user_auth, &ip],
            4,
        ),
    ];
    for ((user, pass, announce), [auth_bytes, ip_bytes], replies) in cases {
        let mut h = Handshake::new(config(user, pass, announce));
        h.handle(Event::Cron);
        assert_eq!(h.handle(Event::Connected).send, PING);
        let step = line(&mut h, "+PONG");
        let want = [&auth_bytes[..], PORT, &ip_bytes[..], CAPA].concat();
        assert_eq!(
            String::from_utf8_lossy(&step.send),
            String::from_utf8_lossy(&want),
            "{user:?} {pass:?} {announce:?}"
        );
        // One reply per command, then PSYNC and nothing before it.
        for i in 0..replies {
            let step = line(&mut h, "+OK");
            if i + 1 < replies {
                assert!(step.send.is_empty());
                assert!(h.state().is_handshake());
                assert_eq!(h.state().role_name(), "handshake");
            } else {
                assert_eq!(step.send, PSYNC_ANY);
            }
        }
        assert_eq!(h.state(), State::ReceivePsyncReply);
    }
}

#[test]
fn ping_replies_that_let_the_handshake_go_on() {
    for reply in [
        "+PONG",
        "+",
        "+anything",
        "-NOAUTH Authentication required.",
        "-NOPERM this user has no permissions to run the 'ping' command",
        "-ERR operation not permitted",
        "-ERR operation not permitted by the old server",
    ] {
        let mut h = plain();
        h.handle(Event::Cron);
        h.handle(Event::Connected);
        let step = line(&mut h, reply);
        assert_eq!(
            texts(&step),
            ["Master replied to PING, replication can continue..."],
            "{reply}"
        );
        assert_eq!(step.state, State::ReceivePortReply);
        assert_eq!(step.outcome, None);
    }
}

#[test]
fn ping_replies_that_abort() {
    for reply in [
        "-ERR unknown command 'PING'",
        "-ERR operation not",
        "-LOADING Redis is loading the dataset in memory",
        "-NOAUT",
        "PONG",
        "$4",
        "",
    ] {
        let mut h = plain();
        h.handle(Event::Cron);
        h.handle(Event::Connected);
        let step = line(&mut h, reply);
        assert_eq!(step.log.len(), 1);
        assert_eq!(step.log[0].level, LogLevel::Warning);
        assert_eq!(
            step.log[0].text,
            format!("Error reply to PING from master: '{reply}'")
        );
        assert!(step.send.is_empty() && !step.connect);
        assert_eq!(
            step.outcome,
            Some(Outcome::Retry {
                reason: RetryReason::PingRefused
            })
        );
        assert_eq!(step.state, State::Connect);
        // The cron starts the next attempt.
        let step = h.handle(Event::Cron);
        assert!(step.connect);
        assert_eq!(step.state, State::Connecting);
    }
}

#[test]
fn an_auth_error_aborts() {
    let mut h = Handshake::new(config(Some("alice"), Some("wrong"), None));
    h.handle(Event::Cron);
    h.handle(Event::Connected);
    line(&mut h, "+PONG");
    assert_eq!(h.state(), State::ReceiveAuthReply);
    let step = line(
        &mut h,
        "-WRONGPASS invalid username-password pair or user is disabled.",
    );
    assert_eq!(
        step.log,
        [LogLine {
            level: LogLevel::Warning,
            text: "Unable to AUTH to MASTER: -WRONGPASS invalid username-password pair \
                   or user is disabled."
                .into()
        }]
    );
    assert!(step.send.is_empty());
    assert_eq!(
        step.outcome,
        Some(Outcome::Retry {
            reason: RetryReason::AuthRefused
        })
    );
    assert_eq!(step.state, State::Connect);
    // A reply that is not an error is success, whatever it says.
    let mut h = Handshake::new(config(None, Some("secret"), None));
    h.handle(Event::Cron);
    h.handle(Event::Connected);
    line(&mut h, "+PONG");
    let step = line(&mut h, "+OK");
    assert!(step.log.is_empty() && step.outcome.is_none());
    assert_eq!(step.state, State::ReceivePortReply);
}

#[test]
fn replconf_errors_are_logged_and_ignored() {
    let mut h = Handshake::new(config(None, None, Some("10.0.0.7")));
    h.handle(Event::Cron);
    h.handle(Event::Connected);
    line(&mut h, "+PONG");
    let step = line(&mut h, "-ERR Unrecognized REPLCONF option: listening-port");
    assert_eq!(
        step.log,
        [LogLine {
            level: LogLevel::Notice,
            text: "(Non critical) Master does not understand REPLCONF listening-port: \
                   -ERR Unrecognized REPLCONF option: listening-port"
                .into()
        }]
    );
    assert_eq!(step.state, State::ReceiveIpReply);
    let step = line(&mut h, "-ERR nope");
    assert_eq!(
        texts(&step),
        ["(Non critical) Master does not understand REPLCONF ip-address: -ERR nope"]
    );
    assert_eq!(step.state, State::ReceiveCapaReply);
    let step = line(&mut h, "-ERR syntax error");
    assert_eq!(
        texts(&step),
        [
            "(Non critical) Master does not understand REPLCONF capa: -ERR syntax error",
            "Partial resynchronization not possible (no cached master)"
        ]
    );
    assert_eq!(step.send, PSYNC_ANY);
    assert_eq!(step.outcome, None);
}

#[test]
fn psync_asks_for_the_byte_after_the_cached_offset() {
    let mut h = plain();
    h.set_cached_master(cached(1000));
    assert_eq!(h.cached_master(), cached(1000).as_ref());
    let step = to_psync(&mut h);
    assert_eq!(
        texts(&step),
        [format!(
            "Trying a partial resynchronization (request {ID}:1001)."
        )]
    );
    assert_eq!(
        String::from_utf8_lossy(&step.send),
        format!("*3\r\n$5\r\nPSYNC\r\n$40\r\n{ID}\r\n$4\r\n1001\r\n")
    );
}

#[test]
fn keepalives_before_the_psync_reply_are_skipped() {
    let mut h = plain();
    to_psync(&mut h);
    for _ in 0..3 {
        let step = line(&mut h, "");
        assert!(step.log.is_empty() && step.send.is_empty() && step.outcome.is_none());
        assert_eq!(step.state, State::ReceivePsyncReply);
    }
    let step = line(&mut h, &format!("+FULLRESYNC {ID} 0"));
    assert_eq!(
        step.outcome,
        Some(Outcome::FullSync {
            replid: ReplId::parse(ID.as_bytes()),
            offset: 0
        })
    );
}

#[test]
fn malformed_fullresync_leaves_the_id_unknown() {
    for reply in [
        "+FULLRESYNC".to_string(),
        "+FULLRESYNC ".to_string(),
        format!("+FULLRESYNC {ID}"),
        format!("+FULLRESYNC {ID} "),
        format!("+FULLRESYNC {}  1", &ID[..39]),
        format!("+FULLRESYNC {ID}0 1"),
        format!("+FULLRESYNC {}g 1", &ID[..39]),
        format!("+FULLRESYNC {ID} -1"),
        format!("+FULLRESYNC {ID} 1x"),
        format!("+FULLRESYNC {ID} 01"),
        format!("+FULLRESYNC {ID} 1 2"),
        format!("+FULLRESYNC  {ID} 1"),
        format!("+FULLRESYNCX {ID} 1"),
    ] {
        let mut h = plain();
        to_psync(&mut h);
        let step = line(&mut h, &reply);
        assert_eq!(
            step.log,
            [LogLine {
                level: LogLevel::Warning,
                text: "Master replied with wrong +FULLRESYNC syntax.".into()
            }],
            "{reply}"
        );
        assert_eq!(
            step.outcome,
            Some(Outcome::FullSync {
                replid: None,
                offset: -1
            }),
            "{reply}"
        );
        assert!(step.send.is_empty());
        assert_eq!(step.state, State::Transfer);
    }
}

#[test]
fn continue_with_the_same_or_no_id() {
    for reply in ["+CONTINUE".to_string(), format!("+CONTINUE {ID}")] {
        let mut h = plain();
        h.set_cached_master(cached(99));
        to_psync(&mut h);
        let step = line(&mut h, &reply);
        assert_eq!(
            texts(&step),
            [
                "Successful partial resynchronization with master.",
                "MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization."
            ],
            "{reply}"
        );
        assert_eq!(step.outcome, Some(Outcome::Continue { new_replid: None }));
        assert_eq!(step.state, State::Connected);
        assert!(step.send.is_empty());
    }
}

#[test]
fn continue_with_a_new_id() {
    let upper = ID.to_ascii_uppercase();
    for new in [OTHER, upper.as_str()] {
        let mut h = plain();
        h.set_cached_master(cached(99));
        to_psync(&mut h);
        let step = line(&mut h, &format!("+CONTINUE {new}"));
        assert_eq!(
            step.log,
            [
                LogLine {
                    level: LogLevel::Notice,
                    text: "Successful partial resynchronization with master.".into()
                },
                LogLine {
                    level: LogLevel::Warning,
                    text: format!("Master replication ID changed to {new}")
                },
                LogLine {
                    level: LogLevel::Notice,
                    text: "MASTER <-> REPLICA sync: Master accepted a Partial \
                           Resynchronization."
                        .into()
                },
            ]
        );
        assert_eq!(
            step.outcome,
            Some(Outcome::Continue {
                new_replid: ReplId::parse(new.as_bytes())
            })
        );
    }
}

#[test]
fn continue_that_hozon_cannot_act_on() {
    for reply in [
        format!("+CONTINUE {}", &ID[..39]),
        format!("+CONTINUE {ID}0"),
        format!("+CONTINUE  {ID}"),
        format!("+CONTINUE {}z", &ID[..39]),
        "+CONTINUEX".to_string(),
    ] {
        let mut h = plain();
        h.set_cached_master(cached(99));
        to_psync(&mut h);
        let step = line(&mut h, &reply);
        assert_eq!(
            step.log,
            [LogLine {
                level: LogLevel::Warning,
                text: format!("Master replied with wrong +CONTINUE syntax: {reply}")
            }]
        );
        assert_eq!(
            step.outcome,
            Some(Outcome::Retry {
                reason: RetryReason::BadReply
            })
        );
        assert_eq!(step.state, State::Connect);
    }
    // We asked `PSYNC ? -1`: a master cannot continue that.
    let mut h = plain();
    to_psync(&mut h);
    let step = line(&mut h, "+CONTINUE");
    assert_eq!(
        texts(&step),
        ["Master accepted a partial resynchronization we did not ask for: +CONTINUE"]
    );
    assert_eq!(
        step.outcome,
        Some(Outcome::Retry {
            reason: RetryReason::BadReply
        })
    );
}

#[test]
fn nomasterlink_and_loading_retry_later() {
    for reply in [
        "-NOMASTERLINK Can't SYNC while not connected with my master",
        "-LOADING Redis is loading the dataset in memory",
    ] {
        let mut h = plain();
        to_psync(&mut h);
        let step = line(&mut h, reply);
        assert_eq!(
            step.log,
            [LogLine {
                level: LogLevel::Notice,
                text: format!(
                    "Master is currently unable to PSYNC but should be in the future: {reply}"
                )
            }]
        );
        assert!(step.send.is_empty() && !step.connect);
        assert_eq!(
            step.outcome,
            Some(Outcome::Retry {
                reason: RetryReason::TryLater
            })
        );
        assert_eq!(step.state, State::Connect);
    }
}

#[test]
fn an_error_to_psync_falls_back_to_sync() {
    for reply in [
        "-ERR unknown command 'PSYNC'",
        "-ERR SYNC and PSYNC are invalid with pending output",
        "-ERR",
    ] {
        let mut h = plain();
        h.set_cached_master(cached(5));
        to_psync(&mut h);
        let step = line(&mut h, reply);
        assert_eq!(
            step.log,
            [
                LogLine {
                    level: LogLevel::Notice,
                    text: format!(
                        "Master does not support PSYNC or is in error state (reply: {reply})"
                    )
                },
                LogLine {
                    level: LogLevel::Notice,
                    text: "Retrying with SYNC...".into()
                }
            ]
        );
        assert_eq!(step.send, b"SYNC\r\n");
        assert_eq!(
            step.outcome,
            Some(Outcome::FullSync {
                replid: None,
                offset: -1
            })
        );
        assert_eq!(step.state, State::Transfer);
    }
}

#[test]
fn an_unexpected_reply_to_psync_falls_back_to_sync() {
    for reply in [
        "+OK",
        "-NOAUTH Authentication required.",
        "-MISCONF Errors writing to the AOF file: No space left on device",
        "$5",
        "PONG",
    ] {
        let mut h = plain();
        to_psync(&mut h);
        let step = line(&mut h, reply);
        assert_eq!(
            step.log,
            [
                LogLine {
                    level: LogLevel::Warning,
                    text: format!("Unexpected reply to PSYNC from master: {reply}")
                },
                LogLine {
                    level: LogLevel::Notice,
                    text: "Retrying with SYNC...".into()
                }
            ]
        );
        assert_eq!(step.send, SYNC);
        assert_eq!(
            step.outcome,
            Some(Outcome::FullSync {
                replid: None,
                offset: -1
            })
        );
    }
}

#[test]
fn timeouts_in_each_state() {
    // Before and during the handshake: a new attempt at once.
    for replies in 0..=4 {
        let mut h = plain();
        h.handle(Event::Cron);
        if replies > 0 {
            h.handle(Event::Connected);
        }
        for reply in ["+PONG", "+OK", "+OK"].iter().take(replies.max(1) - 1) {
            line(&mut h, reply);
        }
        let before = h.state();
        assert!(before == State::Connecting || before.is_handshake());
        let step = h.handle(Event::Timeout);
        assert_eq!(
            step.log,
            [
                LogLine {
                    level: LogLevel::Warning,
                    text: "Timeout connecting to the MASTER...".into()
                },
                LogLine {
                    level: LogLevel::Notice,
                    text: "Reconnecting to MASTER 10.0.0.1:6379 after failure".into()
                },
                LogLine {
                    level: LogLevel::Notice,
                    text: "MASTER <-> REPLICA sync started".into()
                },
            ],
            "{before:?}"
        );
        assert!(step.connect);
        assert_eq!(
            step.outcome,
            Some(Outcome::Retry {
                reason: RetryReason::Timeout
            })
        );
        assert_eq!(step.state, State::Connecting);
    }
    // Waiting for the PSYNC reply.
    let mut h = plain();
    to_psync(&mut h);
    let step = h.handle(Event::Timeout);
    assert_eq!(texts(&step)[0], "Timeout connecting to the MASTER...");
    assert_eq!(step.state, State::Connecting);
    // During the transfer.
    let mut h = plain();
    to_psync(&mut h);
    line(&mut h, &format!("+FULLRESYNC {ID} 7"));
    let step = h.handle(Event::Timeout);
    assert_eq!(
        texts(&step),
        [
            "Timeout receiving bulk data from MASTER... If the problem persists try to set \
             the 'repl-timeout' parameter in redis.conf to a larger value.",
            "Reconnecting to MASTER 10.0.0.1:6379 after failure",
            "MASTER <-> REPLICA sync started"
        ]
    );
    assert_eq!(step.log[0].level, LogLevel::Warning);
    assert!(step.connect);
    assert_eq!(step.state, State::Connecting);
    // Connected: the caller closes the link, then reports it lost.
    let mut h = plain();
    h.set_cached_master(cached(1));
    to_psync(&mut h);
    line(&mut h, "+CONTINUE");
    let step = h.handle(Event::Timeout);
    assert_eq!(
        step.log,
        [LogLine {
            level: LogLevel::Warning,
            text: "MASTER timeout: no data nor PING received...".into()
        }]
    );
    assert_eq!(
        step.outcome,
        Some(Outcome::Retry {
            reason: RetryReason::Timeout
        })
    );
    assert!(!step.connect);
    let step = h.handle(Event::LinkLost);
    assert_eq!(
        texts(&step),
        [
            "Reconnecting to MASTER 10.0.0.1:6379",
            "MASTER <-> REPLICA sync started"
        ]
    );
    assert!(step.connect);
    assert_eq!(step.state, State::Connecting);
    // With no attempt running, a timeout means nothing.
    let mut h = plain();
    let step = h.handle(Event::Timeout);
    assert!(step.log.is_empty() && !step.connect && step.outcome.is_none());
    assert_eq!(step.state, State::Connect);
}

#[test]
fn socket_errors_in_each_state() {
    let retry = Some(Outcome::Retry {
        reason: RetryReason::Socket,
    });
    let mut h = plain();
    h.handle(Event::Cron);
    let step = h.handle(Event::SocketError("Connection refused"));
    assert_eq!(
        texts(&step),
        ["Error condition on socket for SYNC: Connection refused"]
    );
    assert_eq!(
        (step.outcome, step.state, step.connect),
        (retry, State::Connect, false)
    );

    let mut h = plain();
    h.handle(Event::Cron);
    h.handle(Event::Connected);
    let step = h.handle(Event::SocketError("connection lost"));
    assert_eq!(
        texts(&step),
        [
            "Failed to read response from the server: connection lost",
            "Master did not respond to command during SYNC handshake"
        ]
    );
    assert_eq!((step.outcome, step.state), (retry, State::Connect));

    let mut h = plain();
    to_psync(&mut h);
    let step = h.handle(Event::SocketError("connection lost"));
    assert_eq!(
        texts(&step),
        [
            "Failed to read response from the server: connection lost",
            "Master did not reply to PSYNC, will try later"
        ]
    );
    assert_eq!((step.outcome, step.state), (retry, State::Connect));

    let mut h = plain();
    to_psync(&mut h);
    line(&mut h, &format!("+FULLRESYNC {ID} 7"));
    let step = h.handle(Event::SocketError("connection lost"));
    assert_eq!(
        texts(&step),
        [
            "I/O error trying to sync with MASTER: connection lost",
            "Reconnecting to MASTER 10.0.0.1:6379 after failure",
            "MASTER <-> REPLICA sync started"
        ]
    );
    assert_eq!(
        (step.outcome, step.state, step.connect),
        (retry, State::Connecting, true)
    );
}

#[test]
fn a_failed_transfer_reconnects_at_once() {
    let mut h = plain();
    to_psync(&mut h);
    line(&mut h, "-ERR");
    assert_eq!(h.state(), State::Transfer);
    let step = h.handle(Event::TransferFailed);
    assert_eq!(
        texts(&step),
        [
            "Reconnecting to MASTER 10.0.0.1:6379 after failure",
            "MASTER <-> REPLICA sync started"
        ]
    );
    assert_eq!(
        step.outcome,
        Some(Outcome::Retry {
            reason: RetryReason::TransferFailed
        })
    );
    assert!(step.connect);
    assert_eq!(step.state, State::Connecting);
}

#[test]
fn events_that_do_not_apply_change_nothing() {
    let mut h = plain();
    for event in [
        Event::Connected,
        Event::Line(b"+PONG"),
        Event::Loaded,
        Event::LinkLost,
        Event::TransferFailed,
    ] {
        let step = h.handle(event);
        assert!(step.log.is_empty() && step.send.is_empty() && !step.connect);
        assert_eq!(step.state, State::Connect);
    }
    h.handle(Event::Cron);
    for event in [Event::Cron, Event::Line(b"+PONG"), Event::Loaded] {
        let step = h.handle(event);
        assert!(step.log.is_empty() && step.send.is_empty() && !step.connect);
        assert_eq!(step.state, State::Connecting);
    }
    assert_eq!(h.feed(b"+PONG\r\n").0, 0);
}

#[test]
fn role_names() {
    assert_eq!(State::Connect.role_name(), "connect");
    assert_eq!(State::Connecting.role_name(), "connecting");
    for s in [
        State::ReceivePingReply,
        State::ReceiveAuthReply,
        State::ReceivePortReply,
        State::ReceiveIpReply,
        State::ReceiveCapaReply,
        State::ReceivePsyncReply,
    ] {
        assert_eq!(s.role_name(), "handshake");
        assert!(s.is_handshake());
    }
    assert_eq!(State::Transfer.role_name(), "sync");
    assert_eq!(State::Connected.role_name(), "connected");
    assert!(!State::Transfer.is_handshake());
}

#[test]
fn feeding_bytes_reads_lines_and_stops_at_the_outcome() {
    let replies =
        format!("+PONG\r\n+OK\r\n+OK\r\n+OK\r\n\n\n+FULLRESYNC {ID} 42\r\n\n$EOF:{OTHER}\r\nREDIS");
    let after = format!("\n$EOF:{OTHER}\r\nREDIS");
    for piece in [1, 2, 5, 13, replies.len()] {
        let mut h = Handshake::new(config(None, Some("pw"), None));
        h.handle(Event::Cron);
        h.handle(Event::Connected);
        let bytes = replies.as_bytes();
        let mut at = 0;
        let mut log = Vec::new();
        let mut send = Vec::new();
        let mut outcome = None;
        while at < bytes.len() && outcome.is_none() {
            let end = (at + piece).min(bytes.len());
            let (used, step) = h.feed(&bytes[at..end]);
            at += used;
            log.extend(step.log.into_iter().map(|l| l.text));
            send.extend(step.send);
            outcome = step.outcome;
            if used < end - (at - used) {
                // Stopped inside the piece: the attempt ended.
                assert!(outcome.is_some());
            }
        }
        assert_eq!(&replies[at..], after, "pieces of {piece}");
        assert_eq!(
            log,
            [
                "Master replied to PING, replication can continue...".to_string(),
                "Partial resynchronization not possible (no cached master)".into(),
                format!("Full resync from master: {ID}:42"),
            ]
        );
        assert_eq!(
            send,
            [
                &b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"[..],
                PORT,
                CAPA,
                PSYNC_ANY
            ]
            .concat()
        );
        assert_eq!(
            outcome,
            Some(Outcome::FullSync {
                replid: ReplId::parse(ID.as_bytes()),
                offset: 42
            })
        );
        assert_eq!(h.state(), State::Transfer);
        // Nothing more is read in the transfer.
        assert_eq!(h.feed(after.as_bytes()).0, 0);
    }
}

#[test]
fn a_reply_line_over_1_kib_aborts() {
    let mut h = plain();
    h.handle(Event::Cron);
    h.handle(Event::Connected);
    let long = vec![b'+'; LINE_MAX + 10];
    let (used, step) = h.feed(&long);
    assert_eq!(used, LINE_MAX + 1);
    assert_eq!(
        step.log,
        [LogLine {
            level: LogLevel::Warning,
            text: "Master sent a reply line longer than 1024 bytes during the SYNC handshake"
                .into()
        }]
    );
    assert_eq!(
        step.outcome,
        Some(Outcome::Retry {
            reason: RetryReason::BadReply
        })
    );
    assert_eq!(step.state, State::Connect);
    // The next attempt starts with an empty line buffer.
    h.handle(Event::Cron);
    h.handle(Event::Connected);
    let (used, step) = h.feed(b"+PONG\r\n");
    assert_eq!(used, 7);
    assert_eq!(step.state, State::ReceivePortReply);
}
