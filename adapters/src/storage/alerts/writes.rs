//! Alert rules, destinations and their evaluations written in a unit of work.

use super::*;

impl Transaction<'_> {
    /// How many rules (`alert_rules`) or destinations (`alert_destinations`) the
    /// organization holds, as the transaction sees them (after its organization's
    /// lock: a cap is decided one writer at a time).
    pub async fn count_alert_rows(&mut self, table: AlertTable, org_id: &str) -> StoreResult<u64> {
        let n: i64 = sqlx::query_scalar(&self.store.sql(&format!(
            "SELECT COUNT(*) FROM {} WHERE org_id = $1",
            table.name()
        )))
        .bind(org_id)
        .fetch_one(&mut *self.tx)
        .await?;
        Ok(n.unsigned_abs())
    }

    /// Inserts a destination (a name taken is a conflict).
    pub async fn insert_alert_destination(&mut self, row: &DestinationRow) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO alert_destinations (id, org_id, name, kind, settings, secret, version, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        ))
        .bind(&row.id)
        .bind(&row.org_id)
        .bind(&row.name)
        .bind(&row.kind)
        .bind(row.settings.to_string())
        .bind(&row.secret)
        .bind(row.version)
        .bind(stamp(row.created_at))
        .bind(stamp(row.updated_at))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Replaces a destination where its version is still `expected`; whether it was.
    pub async fn update_alert_destination(
        &mut self,
        row: &DestinationRow,
        expected: i64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE alert_destinations SET name = $3, kind = $4, settings = $5, secret = $6, version = $7,
               updated_at = $8
             WHERE org_id = $1 AND id = $2 AND version = $9",
        ))
        .bind(&row.org_id)
        .bind(&row.id)
        .bind(&row.name)
        .bind(&row.kind)
        .bind(row.settings.to_string())
        .bind(&row.secret)
        .bind(row.version)
        .bind(stamp(row.updated_at))
        .bind(expected)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The names of the rules that send to a destination, by name.
    pub async fn rules_using(&mut self, destination_id: &str) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(&self.store.sql(
            "SELECT r.name FROM alert_rule_destinations l JOIN alert_rules r ON r.id = l.rule_id
             WHERE l.destination_id = $1 ORDER BY lower(r.name)",
        ))
        .bind(destination_id)
        .fetch_all(&mut *self.tx)
        .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("name").map_err(Into::into))
            .collect()
    }

    /// Deletes a destination; whether there was one.
    pub async fn delete_alert_destination(&mut self, org_id: &str, id: &str) -> StoreResult<bool> {
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM alert_destinations WHERE org_id = $1 AND id = $2"),
        )
        .bind(org_id)
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Locks the destinations listed (a delete waits for the rule that names them),
    /// answering the ids the organization has.
    pub async fn existing_destinations(
        &mut self,
        org_id: &str,
        ids: &[String],
    ) -> StoreResult<Vec<String>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let lock = match self.store.dialect() {
            crate::storage::Dialect::Postgres => " FOR SHARE",
            crate::storage::Dialect::Sqlite => "",
        };
        let sql = self.store.sql(&format!(
            "SELECT id FROM alert_destinations WHERE org_id = $1 AND id IN ({}){lock}",
            placeholders(2, ids.len())
        ));
        let mut query = sqlx::query(&sql).bind(org_id.to_owned());
        for id in ids {
            query = query.bind(id.clone());
        }
        let rows = query.fetch_all(&mut *self.tx).await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("id").map_err(Into::into))
            .collect()
    }

    /// Locks a destination's row for its delete (a rule naming it waits).
    pub async fn lock_alert_destination(&mut self, org_id: &str, id: &str) -> StoreResult<bool> {
        let sql = match self.store.dialect() {
            crate::storage::Dialect::Postgres => {
                "SELECT id FROM alert_destinations WHERE org_id = $1 AND id = $2 FOR UPDATE"
            }
            crate::storage::Dialect::Sqlite => {
                "SELECT id FROM alert_destinations WHERE org_id = $1 AND id = $2"
            }
        };
        let row = sqlx::query(&self.store.sql(sql))
            .bind(org_id)
            .bind(id)
            .fetch_optional(&mut *self.tx)
            .await?;
        Ok(row.is_some())
    }

    /// Inserts a rule with its destinations.
    pub async fn insert_alert_rule(&mut self, row: &AlertRuleRow) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO alert_rules (id, org_id, name, body, paused, version, state, tracker, evaluations,
               notices, next_evaluation_at, last_evaluated_at, created_by, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
        ))
        .bind(&row.id)
        .bind(&row.org_id)
        .bind(&row.name)
        .bind(row.body.to_string())
        .bind(i64::from(row.paused))
        .bind(row.version)
        .bind(&row.state)
        .bind(row.tracker.to_string())
        .bind(row.evaluations)
        .bind(row.notices)
        .bind(stamp(row.next_evaluation_at))
        .bind(row.last_evaluated_at.map(stamp))
        .bind(&row.created_by)
        .bind(stamp(row.created_at))
        .bind(stamp(row.updated_at))
        .execute(&mut *self.tx)
        .await?;
        self.link_destinations(&row.org_id, &row.id, &row.destinations)
            .await
    }

    async fn link_destinations(
        &mut self,
        org_id: &str,
        rule_id: &str,
        destinations: &[String],
    ) -> StoreResult<()> {
        sqlx::query(
            &self
                .store
                .sql("DELETE FROM alert_rule_destinations WHERE rule_id = $1"),
        )
        .bind(rule_id)
        .execute(&mut *self.tx)
        .await?;
        for destination in destinations {
            sqlx::query(&self.store.sql(
                "INSERT INTO alert_rule_destinations (rule_id, destination_id, org_id) VALUES ($1, $2, $3)",
            ))
            .bind(rule_id)
            .bind(destination)
            .bind(org_id)
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(())
    }

    /// Replaces a rule's definition where its version is still `expected` (its
    /// state stays, unless `reset` gives a fresh one); whether it was.
    pub async fn update_alert_rule(
        &mut self,
        row: &AlertRuleRow,
        expected: i64,
        reset: Option<(&str, &Value)>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE alert_rules SET name = $3, body = $4, paused = $5, version = $6, updated_at = $7,
               next_evaluation_at = $8,
               state = COALESCE($9, state), tracker = COALESCE($10, tracker),
               evaluations = evaluations + 1
             WHERE org_id = $1 AND id = $2 AND version = $11",
        ))
        .bind(&row.org_id)
        .bind(&row.id)
        .bind(&row.name)
        .bind(row.body.to_string())
        .bind(i64::from(row.paused))
        .bind(row.version)
        .bind(stamp(row.updated_at))
        .bind(stamp(row.next_evaluation_at))
        .bind(reset.map(|(state, _)| state.to_owned()))
        .bind(reset.map(|(_, tracker)| tracker.to_string()))
        .bind(expected)
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        self.link_destinations(&row.org_id, &row.id, &row.destinations)
            .await?;
        Ok(true)
    }

    /// Deletes a rule, its destinations' links and its history; whether there was one.
    pub async fn delete_alert_rule(&mut self, org_id: &str, id: &str) -> StoreResult<bool> {
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM alert_rules WHERE org_id = $1 AND id = $2"),
        )
        .bind(org_id)
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        for table in ["alert_rule_destinations", "alert_history"] {
            sqlx::query(
                &self
                    .store
                    .sql(&format!("DELETE FROM {table} WHERE rule_id = $1")),
            )
            .bind(id)
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(done.rows_affected() == 1)
    }

    /// Writes an evaluation's outcome where the rule still reads `expected`
    /// evaluations; whether it did (`false`: another evaluator did first).
    pub async fn record_evaluation(&mut self, write: &EvaluationWrite<'_>) -> StoreResult<bool> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE alert_rules SET state = $2, tracker = $3, evaluations = evaluations + 1, notices = $4,
               last_evaluated_at = $5, next_evaluation_at = $6
             WHERE id = $1 AND evaluations = $7",
        ))
        .bind(write.rule_id)
        .bind(write.state)
        .bind(write.tracker.to_string())
        .bind(write.notices)
        .bind(stamp(write.at))
        .bind(stamp(write.next))
        .bind(write.expected)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Appends a transition to a rule's history.
    pub async fn insert_transition(
        &mut self,
        org_id: &str,
        rule_id: &str,
        t: &TransitionRow,
    ) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO alert_history (id, org_id, rule_id, seq, at, from_state, to_state, value, notice,
               notification_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        ))
        .bind(new_id())
        .bind(org_id)
        .bind(rule_id)
        .bind(t.seq)
        .bind(stamp(t.at))
        .bind(&t.from_state)
        .bind(&t.to_state)
        .bind(t.value.map(|v| v.to_string()))
        .bind(&t.notice)
        .bind(&t.notification_id)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Writes a notification and its deliveries in the transaction; its id.
    pub async fn insert_notification(
        &mut self,
        org_id: &str,
        notification: &NewNotification,
        now: DateTime<Utc>,
    ) -> StoreResult<String> {
        self.store
            .insert_notification(&mut self.tx, org_id, notification, now)
            .await
    }

    /// The next number of a rule's history.
    pub async fn next_transition_seq(&mut self, rule_id: &str) -> StoreResult<i64> {
        let n: Option<i64> = sqlx::query_scalar(
            &self
                .store
                .sql("SELECT MAX(seq) FROM alert_history WHERE rule_id = $1"),
        )
        .bind(rule_id)
        .fetch_one(&mut *self.tx)
        .await?;
        Ok(n.unwrap_or(0) + 1)
    }
}
