//! Keys given a TTL by clients of a writable replica (`replica-read-only
//! no`), as Redis 7.0's expire.c tracks them (`slaveKeysWithExpire`): a
//! replica expires keys only through its master's DELs, and the master
//! knows nothing of these keys, so the replica remembers their names and
//! its cron expires them (docs/replication.md).
//!
//! Each remembered name carries a bit per database (0..=63) it was given a
//! TTL in. The cron draws names at random and deletes the ones whose TTL
//! has passed (a DEL logged to the replica's own AOF and sent to its
//! sub-replicas, as Redis propagates it), forgetting a name once no
//! database holds it with a TTL; it stops after more than 3 names it
//! could not expire, or after 1 ms. FLUSHALL and a full sync forget
//! every name. INFO shows the count as `slave_expires_tracked_keys`.

use super::Core;
use crate::keyspace::dict::Dict;
use crate::types::Blob;

/// Databases above this index are not tracked (as in Redis: one bit each).
const TRACKED_DBS: usize = 64;

/// The names remembered, each with its databases' bits.
#[derive(Default)]
pub(crate) struct ReplicaExpires {
    keys: Dict<Blob, u64>,
}

impl std::fmt::Debug for ReplicaExpires {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaExpires")
            .field("keys", &self.keys.len())
            .finish()
    }
}

impl ReplicaExpires {
    /// How many names are remembered (`slave_expires_tracked_keys`).
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }
}

impl Core {
    /// Called when a command gives `key` of database `db` a TTL: on a
    /// writable replica, a client other than the master's link makes the
    /// replica remember the key (Redis's `setExpire` with
    /// `rememberSlaveKeyWithExpire`).
    pub(crate) fn note_expire_set(&mut self, from_master: bool, db: usize, key: &[u8]) {
        if from_master || !self.writable_replica() || db >= TRACKED_DBS {
            return;
        }
        let bits = self
            .replica_expires
            .keys
            .get_or_insert_with(key, || (Blob::new(key), 0));
        *bits |= 1 << db;
    }

    /// True on a replica that accepts writes from its clients.
    pub(crate) fn writable_replica(&self) -> bool {
        self.replica.is_replica() && !self.config.replica.read_only
    }

    /// Forgets every remembered name (FLUSHALL, a full sync: Redis's
    /// `flushSlaveKeysWithExpireList`).
    pub(crate) fn forget_replica_expires(&mut self) {
        if !self.replica_expires.keys.is_empty() {
            self.replica_expires.keys = Dict::new();
        }
    }

    /// The replica's cron (Redis's `expireSlaveKeys`): deletes remembered
    /// keys whose TTL has passed at `now_ms`.
    pub(crate) fn expire_replica_keys(&mut self, now_ms: i64) {
        if self.replica_expires.keys.is_empty() {
            return;
        }
        let started = std::time::Instant::now();
        let (mut cycles, mut kept) = (0u32, 0u32);
        while let Some((name, &bits)) = self.replica_expires.keys.random(&mut self.rng) {
            let name = name.clone();
            let mut still = 0u64;
            for db in (0..self.keyspace.db_count().min(TRACKED_DBS)).filter(|d| bits >> d & 1 == 1)
            {
                let Some(at) = self.keyspace.db(db).expire_at(&name) else {
                    continue;
                };
                if at < now_ms {
                    self.delete_expired(db, &name);
                } else {
                    kept += 1;
                    still |= 1 << db;
                }
            }
            if still == 0 {
                self.replica_expires.keys.remove(name.as_bytes());
            } else if let Some(b) = self.replica_expires.keys.get_mut(name.as_bytes()) {
                *b = still;
            }
            cycles += 1;
            if kept > 3
                || (cycles.is_multiple_of(64) && started.elapsed().as_millis() > 1)
                || self.replica_expires.keys.is_empty()
            {
                break;
            }
        }
    }
}
