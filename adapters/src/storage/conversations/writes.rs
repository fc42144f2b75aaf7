//! Conversations, their participants, messages and read markers written in a unit of
//! work.

use super::*;

impl crate::storage::Transaction<'_> {
    /// Starts a conversation with its participants (the first is the author) and
    /// its first message, with the message's feed row.
    pub async fn create_conversation(
        &mut self,
        (id, org_id, subject): (&str, &str, Option<&str>),
        participants: &[String],
        first: NewMessage<'_>,
        (now, rate): (DateTime<Utc>, Rate),
    ) -> StoreResult<bool> {
        if !self
            .store
            .within_rate(&mut self.tx, first.author_id, rate)
            .await?
        {
            return Ok(false);
        }
        sqlx::query(&self.store.sql(
            "INSERT INTO conversations (id, org_id, subject, created_by, created_at, last_message_at) \
             VALUES ($1, $2, $3, $4, $5, $5)",
        ))
        .bind(id)
        .bind(org_id)
        .bind(subject)
        .bind(first.author_id)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        for user in participants {
            let read = (user == first.author_id).then(|| stamp(now));
            sqlx::query(&self.store.sql(
                "INSERT INTO conversation_participants (conversation_id, user_id, joined_at, last_read_at, left_at) \
                 VALUES ($1, $2, $3, $4, NULL)",
            ))
            .bind(id)
            .bind(user)
            .bind(stamp(now))
            .bind(read)
            .execute(&mut *self.tx)
            .await?;
        }
        self.store
            .insert_message(&mut self.tx, id, org_id, first, now)
            .await?;
        self.store
            .feed(
                &mut self.tx,
                "message",
                first.id,
                &recipients(participants)?,
                now,
            )
            .await?;
        Ok(true)
    }

    /// Posts a message to a conversation the author takes part in: the conversation
    /// moves on, the author's marker with it, and the feed tells every participant.
    /// Not found when the author is not (or no longer) a participant.
    pub async fn post_conversation_message(
        &mut self,
        (conversation_id, org_id): (&str, &str),
        message: NewMessage<'_>,
        (now, rate): (DateTime<Utc>, Rate),
    ) -> StoreResult<bool> {
        use sqlx::Row;

        if !self
            .store
            .within_rate(&mut self.tx, message.author_id, rate)
            .await?
        {
            return Ok(false);
        }
        // The first statement writes, so SQLite takes its lock at once.
        let moved = sqlx::query(&self.store.sql(
            "UPDATE conversations SET last_message_at = $3 WHERE id = $1 AND org_id = $2 \
             AND EXISTS (SELECT 1 FROM conversation_participants p WHERE p.conversation_id = $1 \
                         AND p.user_id = $4 AND p.left_at IS NULL)",
        ))
        .bind(conversation_id)
        .bind(org_id)
        .bind(stamp(now))
        .bind(message.author_id)
        .execute(&mut *self.tx)
        .await?;
        if moved.rows_affected() == 0 {
            return Err(StoreError::NotFound("conversation".to_owned()));
        }
        self.store
            .insert_message(&mut self.tx, conversation_id, org_id, message, now)
            .await?;
        sqlx::query(&self.store.sql(
            "UPDATE conversation_participants SET last_read_at = $3 WHERE conversation_id = $1 AND user_id = $2",
        ))
        .bind(conversation_id)
        .bind(message.author_id)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        let rows = sqlx::query(&self.store.sql(
            "SELECT user_id FROM conversation_participants WHERE conversation_id = $1 AND left_at IS NULL ORDER BY user_id",
        ))
        .bind(conversation_id)
        .fetch_all(&mut *self.tx)
        .await?;
        let participants = rows
            .iter()
            .map(|r| r.try_get::<String, _>("user_id"))
            .collect::<Result<Vec<_>, _>>()?;
        self.store
            .feed(
                &mut self.tx,
                "message",
                message.id,
                &recipients(&participants)?,
                now,
            )
            .await?;
        Ok(true)
    }

    /// Deletes a message.
    pub async fn delete_conversation_message(
        &mut self,
        conversation_id: &str,
        id: &str,
    ) -> StoreResult<()> {
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM conversation_messages WHERE conversation_id = $1 AND id = $2"),
        )
        .bind(conversation_id)
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("message `{id}`")));
        }
        Ok(())
    }
}
