//! What is new in messages, on every replica: each replica reads the feed (rows
//! written in the transactions that posted a message or an announcement) a few times
//! a second, hands each new row once to the live streams it holds, and each stream
//! keeps what is for its user. Reading the last seconds of the feed rather than
//! "after the last sequence number" keeps a row whose transaction committed after a
//! later one's; what was handed already is remembered for a little longer than that
//! window.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use tokio::sync::broadcast;

use super::ServiceResult;
use crate::services::context::AppState;
use crate::storage::{AnnouncementRecord, ConversationMessageRecord};

/// How far back each read looks.
pub const WINDOW_SECONDS: i64 = 10;
/// The most rows one read takes.
pub const BATCH: u32 = 1000;
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

/// This replica's feed: the channel its streams listen on and their count per user.
#[derive(Debug)]
pub struct MessageFeed {
    sender: broadcast::Sender<Arc<FeedEvent>>,
    streams: Mutex<HashMap<String, usize>>,
    delivered: Mutex<VecDeque<(i64, DateTime<Utc>)>>,
}

impl Default for MessageFeed {
    fn default() -> Self {
        let (sender, _) = broadcast::channel(CAPACITY);
        MessageFeed {
            sender,
            streams: Mutex::new(HashMap::new()),
            delivered: Mutex::new(VecDeque::new()),
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

    /// Whether `seq` was handed already; remembers it.
    fn first_time(&self, seq: i64, now: DateTime<Utc>) -> bool {
        let Ok(mut delivered) = self.delivered.lock() else {
            return false;
        };
        let horizon = now - Duration::seconds(WINDOW_SECONDS * 2);
        while delivered.front().is_some_and(|(_, at)| *at < horizon) {
            delivered.pop_front();
        }
        if delivered.iter().any(|(s, _)| *s == seq) {
            return false;
        }
        delivered.push_back((seq, now));
        true
    }
}

/// Reads the feed's last seconds and hands each new row to this replica's streams:
/// how many were handed.
pub async fn follow(state: &AppState, now: DateTime<Utc>) -> ServiceResult<usize> {
    let rows = state
        .store
        .message_feed_since(now - Duration::seconds(WINDOW_SECONDS), BATCH)
        .await?;
    let mut handed = 0;
    for row in rows {
        if !state.feed.first_time(row.seq, now) {
            continue;
        }
        let event = match row.kind.as_str() {
            "message" => state
                .store
                .conversation_message_by_id(&row.ref_id)
                .await?
                .map(|message| FeedEvent::Message {
                    recipients: row.recipients,
                    message,
                }),
            "announcement" => state
                .store
                .announcement(&row.ref_id)
                .await?
                .map(FeedEvent::Announcement),
            _ => None,
        };
        // Gone already (deleted), or nobody listening: nothing to hand.
        if let Some(event) = event {
            if state.feed.sender.send(Arc::new(event)).is_ok() {
                handed += 1;
            }
        }
    }
    Ok(handed)
}
