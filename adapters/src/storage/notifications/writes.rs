//! Notifications, their deliveries' attempts and held digests written in a unit of
//! work.

use super::*;

/// Steps of the workers' and services' units of work.
impl Transaction<'_> {
    /// Records an attempt and the delivery's next state, if the claim still holds;
    /// whether it did.
    pub async fn finish_delivery(
        &mut self,
        claimed: &ClaimedDelivery,
        attempt: &Attempt<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE deliveries SET status = $3, attempts = attempts + 1, run_after = $4, lease_until = NULL, \
             last_error = $5, updated_at = $6 WHERE id = $1 AND lease_until = $2",
        ))
        .bind(&claimed.id)
        .bind(stamp(claimed.lease_until))
        .bind(attempt.delivery_status)
        .bind(stamp(attempt.run_after))
        .bind(attempt.error)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        self.store
            .log_attempt(
                &mut self.tx,
                (
                    &claimed.org_id,
                    &claimed.notification_id,
                    &claimed.id,
                    &claimed.channel,
                ),
                (attempt.status, claimed.attempts + 1),
                (attempt.response_status, attempt.error),
                now,
            )
            .await?;
        Ok(true)
    }

    /// Makes the digest of a window, once: claims the window (one row per
    /// organization, channel and window), writes the digest's notification and its
    /// delivery, and marks the held deliveries `digested`, in one transaction. `make`
    /// builds the digest from the held notifications (at most `limit` of them, and
    /// how many there were). False when the window was already digested.
    pub async fn make_digest(
        &mut self,
        window: &HeldWindow,
        limit: u32,
        make: &DigestMaker,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let placeholder = new_id();
        let claimed = sqlx::query(&self.store.sql(
            "INSERT INTO digests (org_id, channel, digest_window, notification_id, created_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (org_id, channel, digest_window) DO NOTHING",
        ))
        .bind(&window.org_id)
        .bind(&window.channel)
        .bind(&window.window)
        .bind(&placeholder)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        if claimed.rows_affected() == 0 {
            return Ok(false);
        }
        let held =
            "d.org_id = $1 AND d.channel = $2 AND d.digest_window = $3 AND d.status = 'held'";
        let count: i64 = sqlx::query(&self.store.sql(&format!(
            "SELECT COUNT(*) AS n FROM deliveries d WHERE {held}"
        )))
        .bind(&window.org_id)
        .bind(&window.channel)
        .bind(&window.window)
        .fetch_one(&mut *self.tx)
        .await?
        .try_get("n")?;
        let rows = sqlx::query(&self.store.sql(&format!(
            "SELECT n.kind, n.payload, n.created_at FROM deliveries d JOIN notifications n ON n.id = d.notification_id \
             WHERE {held} ORDER BY n.created_at, n.id LIMIT $4"
        )))
        .bind(&window.org_id)
        .bind(&window.channel)
        .bind(&window.window)
        .bind(i64::from(limit))
        .fetch_all(&mut *self.tx)
        .await?;
        let items = rows
            .iter()
            .map(|row| {
                let d = Decoder::new(row, "notifications", &[]);
                Ok((d.get("kind")?, d.json("payload")?, d.stamp("created_at")?))
            })
            .collect::<StoreResult<Vec<_>>>()?;
        let digest = make(&items, count.unsigned_abs());
        let id = self
            .store
            .insert_notification(&mut self.tx, &window.org_id, &digest, now)
            .await?;
        sqlx::query(&self.store.sql(
            "UPDATE digests SET notification_id = $4 WHERE org_id = $1 AND channel = $2 AND digest_window = $3",
        ))
        .bind(&window.org_id)
        .bind(&window.channel)
        .bind(&window.window)
        .bind(&id)
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(&self.store.sql(&format!(
            "UPDATE deliveries SET status = 'digested', digest_id = $4, updated_at = $5 WHERE id IN (\
             SELECT d.id FROM deliveries d WHERE {held})"
        )))
        .bind(&window.org_id)
        .bind(&window.channel)
        .bind(&window.window)
        .bind(&id)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        Ok(true)
    }
}
