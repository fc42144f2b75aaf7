//! Conversations between members of one organization: participants with read
//! markers, messages in order. A message is written with its feed row.

use chrono::{DateTime, Utc};

use super::decode::Decoder;
use super::{stamp, Store, StoreError, StoreResult};
mod writes;

/// A conversation as one participant sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationRecord {
    /// Its id.
    pub id: String,
    /// The organization.
    pub org_id: String,
    /// Its subject, if any.
    pub subject: Option<String>,
    /// Who started it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// When its latest message was posted.
    pub last_message_at: DateTime<Utc>,
    /// Where the reader has read up to.
    pub last_read_at: Option<DateTime<Utc>>,
    /// Messages by others after the reader's marker.
    pub unread: u64,
    /// Everyone who takes part or took part.
    pub participants: Vec<ParticipantRecord>,
}

/// One participant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParticipantRecord {
    /// The user.
    pub user_id: String,
    /// When they joined.
    pub joined_at: DateTime<Utc>,
    /// Where they have read up to.
    pub last_read_at: Option<DateTime<Utc>>,
    /// When they left, if they did.
    pub left_at: Option<DateTime<Utc>>,
}

/// A message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationMessageRecord {
    /// Its id.
    pub id: String,
    /// The conversation.
    pub conversation_id: String,
    /// The organization.
    pub org_id: String,
    /// Who wrote it.
    pub author_id: String,
    /// The text.
    pub body: String,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// A new message: its id, author and text.
#[derive(Debug, Clone, Copy)]
pub struct NewMessage<'a> {
    /// Its id.
    pub id: &'a str,
    /// Who writes it.
    pub author_id: &'a str,
    /// The text.
    pub body: &'a str,
}

const UNREAD: &str =
    "(SELECT COUNT(*) FROM conversation_messages m WHERE m.conversation_id = c.id \
     AND m.author_id <> p.user_id AND (p.last_read_at IS NULL OR m.created_at > p.last_read_at))";

fn conversation_from_row(row: &sqlx::any::AnyRow) -> StoreResult<ConversationRecord> {
    let d = Decoder::new(row, "conversations", &["id"]);
    let unread: i64 = d.get("unread")?;
    Ok(ConversationRecord {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        subject: d.get("subject")?,
        created_by: d.get("created_by")?,
        created_at: d.stamp("created_at")?,
        last_message_at: d.stamp("last_message_at")?,
        last_read_at: d.opt_stamp("last_read_at")?,
        unread: unread.unsigned_abs(),
        participants: Vec::new(),
    })
}

fn message_from_row(row: &sqlx::any::AnyRow) -> StoreResult<ConversationMessageRecord> {
    let d = Decoder::new(row, "conversation_messages", &["id"]);
    Ok(ConversationMessageRecord {
        id: d.get("id")?,
        conversation_id: d.get("conversation_id")?,
        org_id: d.get("org_id")?,
        author_id: d.get("author_id")?,
        body: d.get("body")?,
        created_at: d.stamp("created_at")?,
    })
}

fn recipients(participants: &[String]) -> StoreResult<String> {
    serde_json::to_string(participants)
        .map_err(|e| StoreError::Invalid(format!("participants do not serialize: {e}")))
}

/// A per-author bound on messages: fewer than `limit` written since `since`.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    /// The start of the window.
    pub since: DateTime<Utc>,
    /// The most messages in it.
    pub limit: u64,
}

impl Store {
    async fn insert_message(
        &self,
        conn: &mut sqlx::AnyConnection,
        conversation_id: &str,
        org_id: &str,
        message: NewMessage<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO conversation_messages (id, conversation_id, org_id, author_id, body, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        ))
        .bind(message.id)
        .bind(conversation_id)
        .bind(org_id)
        .bind(message.author_id)
        .bind(message.body)
        .bind(stamp(now))
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// A conversation of the organization the user takes part in, as they see it.
    pub async fn conversation_for(
        &self,
        id: &str,
        org_id: &str,
        user_id: &str,
    ) -> StoreResult<Option<ConversationRecord>> {
        let row = sqlx::query(&self.sql(&format!(
            "SELECT c.*, p.last_read_at, {UNREAD} AS unread FROM conversations c \
             JOIN conversation_participants p ON p.conversation_id = c.id AND p.user_id = $3 AND p.left_at IS NULL \
             WHERE c.id = $1 AND c.org_id = $2"
        )))
        .bind(id)
        .bind(org_id)
        .bind(user_id)
        .fetch_optional(self.pool())
        .await?;
        match row {
            None => Ok(None),
            Some(row) => {
                let mut conversation = conversation_from_row(&row)?;
                conversation.participants = self.participants(id).await?;
                Ok(Some(conversation))
            }
        }
    }

    async fn participants(&self, conversation_id: &str) -> StoreResult<Vec<ParticipantRecord>> {
        let rows = sqlx::query(&self.sql(
            "SELECT * FROM conversation_participants WHERE conversation_id = $1 ORDER BY joined_at, user_id",
        ))
        .bind(conversation_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(
                    row,
                    "conversation_participants",
                    &["conversation_id", "user_id"],
                );
                Ok(ParticipantRecord {
                    user_id: d.get("user_id")?,
                    joined_at: d.stamp("joined_at")?,
                    last_read_at: d.opt_stamp("last_read_at")?,
                    left_at: d.opt_stamp("left_at")?,
                })
            })
            .collect()
    }

    /// The user's conversations in the organization, latest activity first:
    /// (page, total).
    pub async fn conversations_of(
        &self,
        org_id: &str,
        user_id: &str,
        (limit, offset): (u32, u64),
        ascending: bool,
    ) -> StoreResult<(Vec<ConversationRecord>, u64)> {
        let order = if ascending {
            "c.last_message_at ASC, c.id ASC"
        } else {
            "c.last_message_at DESC, c.id DESC"
        };
        let (rows, total) = self
            .page(
                (
                    &format!("c.*, p.last_read_at, {UNREAD} AS unread"),
                    "conversations c JOIN conversation_participants p \
                     ON p.conversation_id = c.id AND p.user_id = $2 AND p.left_at IS NULL",
                    "c.org_id = $1",
                    order,
                ),
                &[Some(org_id.to_owned()), Some(user_id.to_owned())],
                limit,
                offset,
            )
            .await?;
        let mut items = Vec::with_capacity(rows.len());
        for row in &rows {
            let mut conversation = conversation_from_row(row)?;
            conversation.participants = self.participants(&conversation.id).await?;
            items.push(conversation);
        }
        Ok((items, total))
    }

    /// Up to `limit` messages of a conversation, newest first, before the message
    /// `before` (by time, then id) when given.
    pub async fn conversation_messages(
        &self,
        conversation_id: &str,
        before: Option<&ConversationMessageRecord>,
        limit: u32,
    ) -> StoreResult<Vec<ConversationMessageRecord>> {
        let rows = match before {
            None => {
                sqlx::query(&self.sql(
                    "SELECT * FROM conversation_messages WHERE conversation_id = $1 \
                     ORDER BY created_at DESC, id DESC LIMIT $2",
                ))
                .bind(conversation_id)
                .bind(i64::from(limit))
                .fetch_all(self.pool())
                .await?
            }
            Some(cursor) => {
                sqlx::query(&self.sql(
                    "SELECT * FROM conversation_messages WHERE conversation_id = $1 \
                     AND (created_at < $2 OR (created_at = $2 AND id < $3)) \
                     ORDER BY created_at DESC, id DESC LIMIT $4",
                ))
                .bind(conversation_id)
                .bind(stamp(cursor.created_at))
                .bind(&cursor.id)
                .bind(i64::from(limit))
                .fetch_all(self.pool())
                .await?
            }
        };
        rows.iter().map(message_from_row).collect()
    }

    /// One message of a conversation.
    pub async fn conversation_message(
        &self,
        conversation_id: &str,
        id: &str,
    ) -> StoreResult<Option<ConversationMessageRecord>> {
        let row = sqlx::query(
            &self.sql("SELECT * FROM conversation_messages WHERE conversation_id = $1 AND id = $2"),
        )
        .bind(conversation_id)
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(message_from_row).transpose()
    }

    /// A message by id (for the feed).
    pub async fn conversation_message_by_id(
        &self,
        id: &str,
    ) -> StoreResult<Option<ConversationMessageRecord>> {
        let row = sqlx::query(&self.sql("SELECT * FROM conversation_messages WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(message_from_row).transpose()
    }

    /// A message by id in the organization (for an admin's delete).
    pub async fn organization_message(
        &self,
        org_id: &str,
        id: &str,
    ) -> StoreResult<Option<ConversationMessageRecord>> {
        let row = sqlx::query(
            &self.sql("SELECT * FROM conversation_messages WHERE org_id = $1 AND id = $2"),
        )
        .bind(org_id)
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(message_from_row).transpose()
    }

    /// Moves a participant's read marker to `at` (never back).
    pub async fn mark_conversation_read(
        &self,
        conversation_id: &str,
        user_id: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "UPDATE conversation_participants SET last_read_at = $3 WHERE conversation_id = $1 \
             AND user_id = $2 AND left_at IS NULL AND (last_read_at IS NULL OR last_read_at < $3)",
        ))
        .bind(conversation_id)
        .bind(user_id)
        .bind(stamp(at))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// A participant leaves; not found when they were not taking part.
    pub async fn leave_conversation(
        &self,
        conversation_id: &str,
        user_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let done = sqlx::query(&self.sql(
            "UPDATE conversation_participants SET left_at = $3 WHERE conversation_id = $1 \
             AND user_id = $2 AND left_at IS NULL",
        ))
        .bind(conversation_id)
        .bind(user_id)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("conversation".to_owned()));
        }
        Ok(())
    }

    /// Whether `author` wrote fewer than `rate.limit` messages since `rate.since`,
    /// decided while the author's row of `message_rate_locks` is locked (the first
    /// statement of the transaction writes it: SQLite takes its write lock, and on
    /// PostgreSQL concurrent posts of one author wait for each other), so that no
    /// two posts both count the same last minute.
    async fn within_rate(
        &self,
        conn: &mut sqlx::AnyConnection,
        author: &str,
        rate: Rate,
    ) -> StoreResult<bool> {
        use sqlx::Row;
        sqlx::query(&self.sql(
            "INSERT INTO message_rate_locks (author_id) VALUES ($1) \
             ON CONFLICT (author_id) DO UPDATE SET author_id = excluded.author_id",
        ))
        .bind(author)
        .execute(&mut *conn)
        .await?;
        let row = sqlx::query(&self.sql(
            "SELECT COUNT(*) AS n FROM conversation_messages WHERE author_id = $1 AND created_at >= $2",
        ))
        .bind(author)
        .bind(stamp(rate.since))
        .fetch_one(&mut *conn)
        .await?;
        Ok(row.try_get::<i64, _>("n")?.unsigned_abs() < rate.limit)
    }

    /// Messages by others after the user's markers, in their conversations of the
    /// organization.
    pub async fn unread_conversation_messages(
        &self,
        org_id: &str,
        user_id: &str,
    ) -> StoreResult<u64> {
        use sqlx::Row;
        let row = sqlx::query(&self.sql(
            "SELECT COUNT(*) AS n FROM conversation_messages m \
             JOIN conversation_participants p ON p.conversation_id = m.conversation_id \
                  AND p.user_id = $2 AND p.left_at IS NULL \
             WHERE m.org_id = $1 AND m.author_id <> $2 \
               AND (p.last_read_at IS NULL OR m.created_at > p.last_read_at)",
        ))
        .bind(org_id)
        .bind(user_id)
        .fetch_one(self.pool())
        .await?;
        Ok(row.try_get::<i64, _>("n")?.unsigned_abs())
    }

    /// The feed rows after `seq`, in order, at most `limit`.
    pub async fn message_feed_after(&self, seq: i64, limit: u32) -> StoreResult<Vec<FeedRow>> {
        let rows = sqlx::query(&self.sql(
            "SELECT seq, kind, ref_id, recipients FROM message_feed WHERE seq > $1 ORDER BY seq LIMIT $2",
        ))
        .bind(seq)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(feed_from_row).collect()
    }

    /// The feed rows of these positions that exist now (a transaction that took its
    /// position before a later one committed after it).
    pub async fn message_feed_rows(&self, seqs: &[i64]) -> StoreResult<Vec<FeedRow>> {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders: Vec<String> = (1..=seqs.len()).map(|n| format!("${n}")).collect();
        let sql = self.sql(&format!(
            "SELECT seq, kind, ref_id, recipients FROM message_feed WHERE seq IN ({}) ORDER BY seq",
            placeholders.join(", ")
        ));
        let mut query = sqlx::query(&sql);
        for seq in seqs {
            query = query.bind(*seq);
        }
        let rows = query.fetch_all(self.pool()).await?;
        rows.iter().map(feed_from_row).collect()
    }

    /// The feed's last position (0 when empty).
    pub async fn message_feed_end(&self) -> StoreResult<i64> {
        use sqlx::Row;
        let row = sqlx::query("SELECT COALESCE(MAX(seq), 0) AS last FROM message_feed")
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get::<i64, _>("last")?)
    }

    /// Prunes conversation messages older than `cutoff` (conversations left without
    /// any go with them), ended announcements older than it, and feed rows older
    /// than `feed_cutoff`: how many rows went.
    pub async fn prune_messages(
        &self,
        cutoff: DateTime<Utc>,
        feed_cutoff: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let mut pruned = 0;
        let statements = [
            ("DELETE FROM conversation_messages WHERE created_at < $1", stamp(cutoff)),
            (
                "DELETE FROM conversation_participants WHERE conversation_id IN \
                 (SELECT c.id FROM conversations c WHERE c.last_message_at < $1 AND NOT EXISTS \
                  (SELECT 1 FROM conversation_messages m WHERE m.conversation_id = c.id))",
                stamp(cutoff),
            ),
            (
                "DELETE FROM conversations WHERE last_message_at < $1 AND NOT EXISTS \
                 (SELECT 1 FROM conversation_messages m WHERE m.conversation_id = conversations.id)",
                stamp(cutoff),
            ),
            (
                "DELETE FROM announcement_dismissals WHERE announcement_id IN \
                 (SELECT id FROM announcements WHERE ends_at IS NOT NULL AND ends_at < $1)",
                stamp(cutoff),
            ),
            (
                "DELETE FROM announcement_targets WHERE announcement_id IN \
                 (SELECT id FROM announcements WHERE ends_at IS NOT NULL AND ends_at < $1)",
                stamp(cutoff),
            ),
            ("DELETE FROM announcements WHERE ends_at IS NOT NULL AND ends_at < $1", stamp(cutoff)),
            ("DELETE FROM message_feed WHERE created_at < $1", stamp(feed_cutoff)),
        ];
        for (statement, bound) in statements {
            let done = sqlx::query(&self.sql(statement))
                .bind(bound)
                .execute(self.pool())
                .await?;
            pruned += done.rows_affected();
        }
        Ok(pruned)
    }
}

fn feed_from_row(row: &sqlx::any::AnyRow) -> StoreResult<FeedRow> {
    let d = Decoder::new(row, "message_feed", &["seq"]);
    Ok(FeedRow {
        seq: d.get("seq")?,
        kind: d.get("kind")?,
        ref_id: d.get("ref_id")?,
        recipients: d.json("recipients")?,
    })
}

/// One row of the message feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedRow {
    /// Its position.
    pub seq: i64,
    /// `message` or `announcement`.
    pub kind: String,
    /// The message's or announcement's id.
    pub ref_id: String,
    /// Who a message is for (empty for an announcement: its audience decides).
    pub recipients: Vec<String>,
}
