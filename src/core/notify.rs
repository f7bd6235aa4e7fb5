//! Keyspace notifications (Redis's `notify.c`): what commands and expiry
//! report about the keys they touch, published through Pub/Sub on
//! `__keyspace@<db>__:<key>` (the message is the event) and
//! `__keyevent@<db>__:<event>` (the message is the key), for the classes
//! `notify-keyspace-events` selects.
//!
//! [`Core::notify`] is the one entry point. With notifications off (the
//! default) it is a mask test and nothing more: no allocation. Messages go
//! to the Pub/Sub outbox like PUBLISH's, and like PUBLISH's they are never
//! logged; unlike PUBLISH they are not sent to replicas either (a replica
//! emits its own as it applies the master's stream, as Redis's does).

use super::clients::Message;
use super::Core;
use crate::types::Blob;

pub(crate) use crate::config::notify::{
    EVICTED, EXPIRED, GENERIC, HASH, KEYEVENT, KEYSPACE, KEY_MISS, LIST, NEW, SET, STREAM, STRING,
    ZSET,
};

impl Core {
    /// Reports `event` of `class` on `key` in database `db` (Redis's
    /// `notifyKeyspaceEvent`), if `notify-keyspace-events` enables the
    /// class.
    #[inline]
    pub(crate) fn notify(&mut self, class: u32, event: &str, db: usize, key: &[u8]) {
        if self.config.notify_keyspace_events & class != 0 {
            self.publish_event(event.as_bytes(), db, key);
        }
    }

    /// True when events of `class` are published (for callers that must
    /// do work to find out whether an event happened, such as "new").
    #[inline]
    pub(crate) fn notifies(&self, class: u32) -> bool {
        self.config.notify_keyspace_events & class != 0
    }

    #[cold]
    fn publish_event(&mut self, event: &[u8], db: usize, key: &[u8]) {
        let flags = self.config.notify_keyspace_events;
        let db = db.to_string();
        if flags & KEYSPACE != 0 {
            let channel = [b"__keyspace@", db.as_bytes(), b"__:", key].concat();
            self.publish(&channel, event, false);
        }
        if flags & KEYEVENT != 0 {
            let channel = [b"__keyevent@", db.as_bytes(), b"__:", event].concat();
            self.publish(&channel, key, false);
        }
    }

    /// Queues `message` on `channel` for every subscriber (channel
    /// subscribers first, then pattern subscribers, as Redis's
    /// `pubsubPublishMessage`), returning the number of deliveries.
    /// `sharded`: a shard channel (SPUBLISH), which patterns never match.
    pub(crate) fn publish(&mut self, channel: &[u8], message: &[u8], sharded: bool) -> usize {
        let clients = &mut self.clients;
        let kind: &'static [u8] = if sharded { b"smessage" } else { b"message" };
        let mut receivers = 0;
        if !clients.channel_subscribers(channel, sharded).is_empty() {
            let frame = Message::new(&[kind, channel, message]);
            receivers = clients.send_to_channel(channel, sharded, &frame);
        }
        if sharded || clients.pattern_count() == 0 {
            return receivers;
        }
        let matching: Vec<(Blob, Vec<u64>)> = clients
            .patterns()
            .filter(|(p, _)| crate::glob::matches(p, channel, false))
            .map(|(p, s)| (p.clone(), s.to_vec()))
            .collect();
        for (pattern, sessions) in matching {
            let frame = Message::new(&[b"pmessage", &pattern, channel, message]);
            for session in sessions {
                receivers += 1;
                clients.send(session, frame.clone());
            }
        }
        receivers
    }
}

impl Core {
    /// The hook eviction calls for each key it removes (the "evicted"
    /// event, class `e`, as Redis's `performEvictions`).
    pub(crate) fn notify_evicted(&mut self, db: usize, key: &[u8]) {
        self.notify(EVICTED, "evicted", db, key);
    }
}

#[cfg(test)]
mod tests {
    use crate::command::clients::Message;
    use crate::command::Session;
    use crate::config::Config;
    use crate::engine::Engine;
    use crate::reply::Reply;

    fn engine() -> (Engine, Session) {
        let mut engine = Engine::open(Config::in_memory()).expect("an in-memory config is valid");
        let session = engine.new_session();
        (engine, session)
    }

    fn run(engine: &mut Engine, session: &mut Session, line: &str) -> Reply {
        let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        engine.execute(session, &argv)
    }

    fn effects(engine: &mut Engine) -> Vec<String> {
        engine
            .take_effects()
            .into_iter()
            .map(|e| {
                let words: Vec<String> = e
                    .argv
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                format!("{}: {}", e.db, words.join(" "))
            })
            .collect()
    }

    #[test]
    fn events_reach_subscribers_and_are_never_logged() {
        let (mut e, mut client) = engine();
        let mut sub = e.new_session();
        run(&mut e, &mut sub, "PSUBSCRIBE __key*@*__:*");
        // Off by default: nothing published.
        run(&mut e, &mut client, "SET k v");
        assert!(e.take_messages().is_empty());
        effects(&mut e);
        assert_eq!(
            run(&mut e, &mut client, "CONFIG SET notify-keyspace-events KEA"),
            Reply::ok()
        );
        run(&mut e, &mut client, "SET k v2");
        let messages: Vec<Message> = e.take_messages().into_iter().map(|(_, m)| m).collect();
        assert!(
            messages
                == [
                    Message::new(&[b"pmessage", b"__key*@*__:*", b"__keyspace@0__:k", b"set"]),
                    Message::new(&[b"pmessage", b"__key*@*__:*", b"__keyevent@0__:set", b"k"]),
                ]
        );
        // The AOF and the replicas get the command, never the messages.
        assert_eq!(effects(&mut e), ["0: SET k v2"]);
    }

    #[test]
    fn classes_filter_events() {
        let (mut e, mut client) = engine();
        let mut sub = e.new_session();
        run(&mut e, &mut sub, "PSUBSCRIBE *");
        run(&mut e, &mut client, "CONFIG SET notify-keyspace-events El");
        run(&mut e, &mut client, "SET k v");
        run(&mut e, &mut client, "LPUSH l a");
        let messages = e.take_messages();
        assert_eq!(messages.len(), 1);
        assert!(messages[0].1 == Message::new(&[b"pmessage", b"*", b"__keyevent@0__:lpush", b"l"]));
    }
}
