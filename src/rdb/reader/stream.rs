//! Streams: a stream value read node by node into a hozon [`Stream`],
//! every ID, count and consumer-group link checked.

use super::*;

pub(super) fn read_stream(c: &mut Cursor<'_>, t: u8) -> Result<Stream, RdbError> {
    let mut s = Stream::new();
    let nodes = c.count("a stream node count", 2)?;
    let mut prev_master: Option<StreamId> = None;
    for _ in 0..nodes {
        let key_at = c.pos;
        let key = c.string("a stream node key")?;
        let raw: [u8; 16] = key[..]
            .try_into()
            .map_err(|_| c.corrupt(key_at, "stream node key is not the size of a stream ID"))?;
        let master_id = id_from_be(&raw);
        if prev_master.is_some_and(|p| master_id <= p) {
            return Err(c.corrupt(key_at, "stream nodes are not in ID order"));
        }
        prev_master = Some(master_id);
        let lp_at = c.pos;
        let lp = c.string("a stream listpack")?;
        read_stream_node(&mut s, master_id, &lp)
            .map_err(|e| c.corrupt(lp_at, format!("stream node {master_id}: {e}")))?;
    }
    let length = c.len("a stream length")?;
    s.last_id = c.stream_id_lens("a stream last ID")?;
    if t >= kind::STREAM_LISTPACKS_2 {
        s.first_id = c.stream_id_lens("a stream first ID")?;
        s.max_deleted_entry_id = c.stream_id_lens("a stream max deleted ID")?;
        s.entries_added = c.len("a stream entries-added counter")?;
    } else {
        // Redis's streamGetEdgeID: an empty stream's first ID is the
        // largest ID.
        s.first_id = s.first().map_or(StreamId::MAX, |(id, _)| id);
        s.max_deleted_entry_id = StreamId::MIN;
        s.entries_added = length;
    }
    if length != s.len() as u64 {
        return Err(c.corrupt(
            c.pos,
            format!(
                "stream length {length} does not match its {} entries",
                s.len()
            ),
        ));
    }
    if s.last().is_some_and(|(id, _)| id > s.last_id) {
        return Err(c.corrupt(c.pos, "stream last ID is below its last entry"));
    }
    let groups = c.count("a consumer group count", 3)?;
    for _ in 0..groups {
        let group_at = c.pos;
        let name = c.blob("a consumer group name")?;
        let last_id = c.stream_id_lens("a group last ID")?;
        let entries_read = if t >= kind::STREAM_LISTPACKS_2 {
            c.len("a group entries-read counter")? as i64
        } else {
            s.estimate_entries_read(last_id)
        };
        let entries_read = if entries_read < 0 {
            ENTRIES_READ_INVALID
        } else {
            entries_read
        };
        let pel_len = c.count("a pending entries count", 17)?;
        let mut pending: std::collections::BTreeMap<StreamId, (i64, u64, Option<Blob>)> =
            std::collections::BTreeMap::new();
        for _ in 0..pel_len {
            let at = c.pos;
            let id = c.stream_id_raw("a pending entry ID")?;
            let time = c.ms_time("a delivery time")?;
            let count = c.len("a delivery count")?;
            if pending.insert(id, (time, count, None)).is_some() {
                return Err(c.corrupt(at, format!("pending entry {id} repeated in the group")));
            }
        }
        let consumers_n = c.count("a consumer count", 10)?;
        let mut consumers = std::collections::BTreeMap::new();
        for _ in 0..consumers_n {
            let at = c.pos;
            let cname = c.blob("a consumer name")?;
            let seen = c.ms_time("a consumer seen time")?;
            if t >= kind::STREAM_LISTPACKS_3 {
                // Active time (7.2): hozon's consumers keep the seen time only.
                c.ms_time("a consumer active time")?;
            }
            let n = c.count("a consumer pending count", 16)?;
            let mut pel = std::collections::BTreeSet::new();
            for _ in 0..n {
                let id_at = c.pos;
                let id = c.stream_id_raw("a consumer pending ID")?;
                let Some(entry) = pending.get_mut(&id) else {
                    return Err(c.corrupt(
                        id_at,
                        format!("consumer pending entry {id} is not in the group's PEL"),
                    ));
                };
                if entry.2.is_some() || !pel.insert(id) {
                    return Err(c.corrupt(id_at, format!("pending entry {id} owned twice")));
                }
                entry.2 = Some(cname.clone());
            }
            let consumer = Consumer {
                seen_time_ms: seen,
                pel,
            };
            if consumers.insert(cname, consumer).is_some() {
                return Err(c.corrupt(at, "duplicate stream consumer detected"));
            }
        }
        let mut pel = std::collections::BTreeMap::new();
        for (id, (time, count, owner)) in pending {
            let Some(consumer) = owner else {
                return Err(c.corrupt(group_at, format!("pending entry {id} has no consumer")));
            };
            pel.insert(
                id,
                PendingEntry {
                    delivery_time_ms: time,
                    delivery_count: count,
                    consumer,
                },
            );
        }
        let group = ConsumerGroup {
            last_id,
            entries_read,
            pel,
            consumers,
        };
        if s.groups.insert(name, group).is_some() {
            return Err(c.corrupt(group_at, "duplicate consumer group name"));
        }
    }
    Ok(s)
}

/// Decodes one stream listpack node into `s`.
fn read_stream_node(s: &mut Stream, master_id: StreamId, lp: &[u8]) -> Result<(), String> {
    let mut items = listpack::entries(lp).map_err(|e| e.to_string())?;
    let mut next = |what: &str| -> Result<Item<'_>, String> {
        match items.next() {
            Some(Ok(item)) => Ok(item),
            Some(Err(e)) => Err(e.to_string()),
            None => Err(format!("listpack ends before {what}")),
        }
    };
    fn int(item: Item<'_>, what: &str) -> Result<i64, String> {
        item.as_i64()
            .ok_or_else(|| format!("{what} is not an integer"))
    }
    let live = int(next("the entry count")?, "the entry count")?;
    let deleted = int(next("the deleted count")?, "the deleted count")?;
    let nfields = int(next("the master field count")?, "the master field count")?;
    if live < 0 || deleted < 0 || nfields < 0 || nfields as u64 > lp.len() as u64 {
        return Err("invalid master entry counters".into());
    }
    let mut master_fields = Vec::with_capacity(nfields as usize);
    for _ in 0..nfields {
        master_fields.push(next("a master field")?.to_blob());
    }
    if int(next("the master terminator")?, "the master terminator")? != 0 {
        return Err("master entry terminator is not 0".into());
    }
    let master_fields: Box<[Blob]> = master_fields.into_boxed_slice();
    s.load_node(master_id, master_fields.clone())?;
    let (mut seen_live, mut seen_deleted) = (0i64, 0i64);
    loop {
        let flags = match items.next() {
            None => break,
            Some(Err(e)) => return Err(e.to_string()),
            Some(Ok(item)) => int(item, "entry flags")?,
        };
        let mut next = |what: &str| -> Result<Item<'_>, String> {
            match items.next() {
                Some(Ok(item)) => Ok(item),
                Some(Err(e)) => Err(e.to_string()),
                None => Err(format!("listpack ends before {what}")),
            }
        };
        if flags & !3 != 0 {
            return Err(format!("unknown entry flags {flags}"));
        }
        let ms_diff = int(next("an ID")?, "an ID")?;
        let seq_diff = int(next("an ID")?, "an ID")?;
        let id = StreamId::new(
            master_id.ms.wrapping_add(ms_diff as u64),
            master_id.seq.wrapping_add(seq_diff as u64),
        );
        let same_fields = flags & 2 != 0;
        let fields: Fields = if same_fields {
            let mut f = Vec::with_capacity(master_fields.len());
            for name in master_fields.iter() {
                f.push((name.clone(), next("a value")?.to_blob()));
            }
            f.into_boxed_slice()
        } else {
            let n = int(next("a field count")?, "a field count")?;
            if n < 0 || n as u64 > lp.len() as u64 {
                return Err("invalid field count".into());
            }
            let mut f = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let field = next("a field")?.to_blob();
                let value = next("a value")?.to_blob();
                f.push((field, value));
            }
            f.into_boxed_slice()
        };
        let expected = if same_fields {
            master_fields.len() as i64 + 3
        } else {
            2 * fields.len() as i64 + 4
        };
        if int(next("lp-count")?, "lp-count")? != expected {
            return Err(format!("entry {id}: lp-count does not match its fields"));
        }
        let is_deleted = flags & 1 != 0;
        s.load_entry(id, fields, is_deleted)?;
        if is_deleted {
            seen_deleted += 1;
        } else {
            seen_live += 1;
        }
    }
    if seen_live != live || seen_deleted != deleted {
        return Err(format!(
            "master entry counts {live} live and {deleted} deleted, the node holds {seen_live} and {seen_deleted}"
        ));
    }
    if seen_live + seen_deleted == 0 {
        return Err("empty listpack inside stream".into());
    }
    // A node whose entries are all deleted stays: Redis keeps one that an
    // exact XTRIM emptied (XINFO counts it), and so does its RDB.
    Ok(())
}
