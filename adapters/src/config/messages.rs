//! Messages: announcements' and conversations' bounds, the live streams, retention.

use std::time::Duration;

use super::Reader;

/// Messages (announcements and conversations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageSettings {
    /// `MESSAGE_BODY_MAX_CHARS` (10000): the longest announcement or message body.
    pub body_max: usize,
    /// `CONVERSATION_MAX_PARTICIPANTS` (50), the author included.
    pub participants_max: usize,
    /// `MESSAGES_PER_MINUTE` (30): messages one user may write a minute (429 past it).
    pub per_minute: u64,
    /// `MESSAGE_RETENTION_DAYS` (365): conversation messages, and announcements
    /// ended, older than this are pruned by the retention worker.
    pub retention_days: u32,
    /// `MESSAGE_STREAMS_PER_USER` (5): live streams one user may hold open on one
    /// replica (429 past it).
    pub streams_per_user: usize,
    /// `MESSAGE_STREAM_KEEPALIVE_SECONDS` (15): how often a quiet stream sends a
    /// keep-alive comment.
    pub keep_alive: Duration,
}

/// Reads the section.
pub(super) fn message_settings(r: &mut Reader<'_>) -> MessageSettings {
    MessageSettings {
        body_max: usize::try_from(r.positive("MESSAGE_BODY_MAX_CHARS", 10_000).min(100_000))
            .unwrap_or(10_000),
        participants_max: usize::try_from(
            r.positive("CONVERSATION_MAX_PARTICIPANTS", 50)
                .clamp(2, 1_000),
        )
        .unwrap_or(50),
        per_minute: r.positive("MESSAGES_PER_MINUTE", 30),
        retention_days: u32::try_from(r.positive("MESSAGE_RETENTION_DAYS", 365).min(36_500))
            .unwrap_or(365),
        streams_per_user: usize::try_from(r.positive("MESSAGE_STREAMS_PER_USER", 5).min(100))
            .unwrap_or(5),
        keep_alive: Duration::from_secs(
            r.positive("MESSAGE_STREAM_KEEPALIVE_SECONDS", 15).min(300),
        ),
    }
}
