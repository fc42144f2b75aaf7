//! What is new in messages, on every replica: each replica reads the feed (rows
//! written in the transactions that posted a message or an announcement) a few times
//! a second, hands each new row once to the live streams it holds, and each stream
//! keeps what is for its user.
//!
//! The feed is read by position. A position skipped over (a transaction that took
//! it before a later one committed, on PostgreSQL) is a gap: it is asked for again
//! on each read until it appears or `GAP_SECONDS` pass (a rolled-back transaction
//! leaves one for good). A burst is read to its end in batches.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use tokio::sync::broadcast;

use crate::storage::{AnnouncementRecord, ConversationMessageRecord, FeedRow, Store, StoreResult};

/// How long a skipped position is waited for.
pub const GAP_SECONDS: i64 = 10;
/// The most rows one read takes (a read goes on while batches come full).
pub const BATCH: u32 = 500;
/// The most skipped positions waited for at once (the oldest are given up first).
const MAX_GAPS: usize = 10_000;
/// Events a slow stream may fall behind before it is told to catch up.
const CAPACITY: usize = 1024;

/// One new thing.
#[derive(Debug, Clone)]
pub enum FeedEvent {
    /// A message of a conversation, for its participants.
    Message {
        /// Who it is for.
        recipients: Vec<String>,
        /// The message.
        message: ConversationMessageRecord,
    },
    /// An announcement posted or changed, for those it reaches.
    Announcement(AnnouncementRecord),
}

/// Where this replica has read the feed up to.
#[derive(Debug, Default)]
struct Cursor {
    /// The last position read; `None` before the first read (which starts at the end).
    last: Option<i64>,
    /// Positions skipped over, with when they were first missed.
    gaps: BTreeMap<i64, DateTime<Utc>>,
}

/// This replica's feed: the channel its streams listen on and their count per user.
#[derive(Debug)]
pub struct MessageFeed {
    sender: broadcast::Sender<Arc<FeedEvent>>,
    streams: Mutex<HashMap<String, usize>>,
    cursor: tokio::sync::Mutex<Cursor>,
}

impl Default for MessageFeed {
    fn default() -> Self {
        let (sender, _) = broadcast::channel(CAPACITY);
        MessageFeed {
            sender,
            streams: Mutex::new(HashMap::new()),
            cursor: tokio::sync::Mutex::new(Cursor::default()),
        }
    }
}

/// A stream's place among a user's streams on this replica, given back when dropped.
#[derive(Debug)]
pub struct StreamSlot {
    feed: Arc<MessageFeed>,
    user_id: String,
    /// The events as they come.
    pub events: broadcast::Receiver<Arc<FeedEvent>>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        if let Ok(mut streams) = self.feed.streams.lock() {
            if let Some(count) = streams.get_mut(&self.user_id) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    streams.remove(&self.user_id);
                }
            }
        }
    }
}

impl MessageFeed {
    /// Opens a stream for the user, unless they hold `max` on this replica already.
    pub fn open(self: &Arc<Self>, user_id: &str, max: usize) -> Option<StreamSlot> {
        let mut streams = self.streams.lock().ok()?;
        let count = streams.entry(user_id.to_owned()).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(StreamSlot {
            feed: Arc::clone(self),
            user_id: user_id.to_owned(),
            events: self.sender.subscribe(),
        })
    }
}

/// Reads what is new in the feed and hands each row to this replica's streams: how
/// many were handed.
pub async fn follow(store: &Store, feed: &MessageFeed, now: DateTime<Utc>) -> StoreResult<usize> {
    let mut cursor = feed.cursor.lock().await;
    let mut last = match cursor.last {
        Some(last) => last,
        None => {
            // What was posted before this replica started is in the lists, not live.
            let end = store.message_feed_end().await?;
            cursor.last = Some(end);
            end
        }
    };
    let mut rows: Vec<FeedRow> = Vec::new();
    loop {
        let batch = store.message_feed_after(last, BATCH).await?;
        let full = batch.len() == BATCH as usize;
        for row in batch {
            // Skipped over: waited for (the nearest ones only, should the feed jump).
            let from = last
                .saturating_add(1)
                .max(row.seq.saturating_sub(MAX_GAPS as i64));
            for skipped in from..row.seq {
                cursor.gaps.insert(skipped, now);
            }
            last = row.seq;
            rows.push(row);
        }
        if !full {
            break;
        }
    }
    cursor.last = Some(last);
    // Skipped positions: those that appeared now, and those given up.
    let read: std::collections::HashSet<i64> = rows.iter().map(|r| r.seq).collect();
    let waited: Vec<i64> = cursor
        .gaps
        .keys()
        .copied()
        .filter(|seq| !read.contains(seq))
        .take(BATCH as usize)
        .collect();
    for row in store.message_feed_rows(&waited).await? {
        cursor.gaps.remove(&row.seq);
        rows.push(row);
    }
    let horizon = now - Duration::seconds(GAP_SECONDS);
    cursor.gaps.retain(|_, missed| *missed >= horizon);
    while cursor.gaps.len() > MAX_GAPS {
        cursor.gaps.pop_first();
    }
    drop(cursor);
    let mut handed = 0;
    for row in rows {
        let event = match row.kind.as_str() {
            "message" => store
                .conversation_message_by_id(&row.ref_id)
                .await?
                .map(|message| FeedEvent::Message {
                    recipients: row.recipients,
                    message,
                }),
            "announcement" => store
                .announcement(&row.ref_id)
                .await?
                .map(FeedEvent::Announcement),
            _ => None,
        };
        // Gone already (deleted), or nobody listening: nothing to hand.
        if let Some(event) = event {
            if feed.sender.send(Arc::new(event)).is_ok() {
                handed += 1;
            }
        }
    }
    Ok(handed)
}
