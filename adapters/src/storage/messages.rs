//! The inbox: messages posted to an organization (a notification's in-app channel,
//! an announcement), read and deleted by its members.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::decode::Decoder;
use super::{new_id, stamp, Store, StoreError, StoreResult};
/// A message of the organization's inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageRecord {
    /// Its id.
    pub id: String,
    /// The organization.
    pub org_id: String,
    /// `notification`, `digest` or `announcement`.
    pub kind: String,
    /// One line.
    pub title: String,
    /// The text.
    pub body: String,
    /// The notification it delivers, if any.
    pub notification_id: Option<String>,
    /// Who posted it (`system` for notifications).
    pub created_by: String,
    /// When it was marked read.
    pub read_at: Option<DateTime<Utc>>,
    /// When.
    pub created_at: DateTime<Utc>,
}

fn message_from_row(row: &sqlx::any::AnyRow) -> StoreResult<MessageRecord> {
    let d = Decoder::new(row, "messages", &["id"]);
    Ok(MessageRecord {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        kind: d.get("kind")?,
        title: d.get("title")?,
        body: d.get("body")?,
        notification_id: d.get("notification_id")?,
        created_by: d.get("created_by")?,
        read_at: d.opt_stamp("read_at")?,
        created_at: d.stamp("created_at")?,
    })
}

impl Store {
    /// Posts a notification to the inbox (once per notification, whatever the retries).
    pub async fn post_message(
        &self,
        org_id: &str,
        (kind, title, body): (&str, &str, &str),
        notification_id: Option<&str>,
        created_by: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO messages (id, org_id, kind, title, body, notification_id, created_by, read_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, $8) ON CONFLICT (notification_id) DO NOTHING",
        ))
        .bind(new_id())
        .bind(org_id)
        .bind(kind)
        .bind(title)
        .bind(body)
        .bind(notification_id)
        .bind(created_by)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// One message of the organization.
    pub async fn message(&self, org_id: &str, id: &str) -> StoreResult<Option<MessageRecord>> {
        let row = sqlx::query(&self.sql("SELECT * FROM messages WHERE org_id = $1 AND id = $2"))
            .bind(org_id)
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(message_from_row).transpose()
    }

    /// A page of the organization's inbox, newest first: (messages, total).
    pub async fn messages(
        &self,
        org_id: &str,
        unread: Option<bool>,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<MessageRecord>, u64)> {
        let condition = match unread {
            None => "org_id = $1",
            Some(true) => "org_id = $1 AND read_at IS NULL",
            Some(false) => "org_id = $1 AND read_at IS NOT NULL",
        };
        let (rows, total) = self
            .page(
                ("*", "messages", condition, "created_at DESC, id DESC"),
                &[Some(org_id.to_owned())],
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(message_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }

    /// Marks a message read (the first time only); not found when it is not the
    /// organization's.
    pub async fn mark_read(
        &self,
        org_id: &str,
        id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<MessageRecord> {
        sqlx::query(&self.sql(
            "UPDATE messages SET read_at = COALESCE(read_at, $3) WHERE org_id = $1 AND id = $2",
        ))
        .bind(org_id)
        .bind(id)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        self.message(org_id, id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("message `{id}`")))
    }
}

impl super::Transaction<'_> {
    /// Deletes a message.
    pub async fn delete_message(&mut self, org_id: &str, id: &str) -> StoreResult<()> {
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM messages WHERE org_id = $1 AND id = $2"),
        )
        .bind(org_id)
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("message `{id}`")));
        }
        Ok(())
    }
}
