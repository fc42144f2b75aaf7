//! Report events and their executions written, and pruned, in a unit of work.

use super::*;

/// Steps of the workers' and services' units of work.
impl Transaction<'_> {
    /// Prunes executions (and their stages and events) that started before `before`;
    /// how many executions.
    pub async fn prune_reports(&mut self, before: DateTime<Utc>) -> StoreResult<u64> {
        let cutoff = stamp(before);
        let mut executions = 0;
        for (table, started) in [
            ("report_executions", "started_at"),
            ("report_stages", "started_at"),
            ("report_events", "occurred_at"),
            ("plugin_build_attempts", "started_at"),
        ] {
            let done = sqlx::query(
                &self
                    .store
                    .sql(&format!("DELETE FROM {table} WHERE {started} < $1")),
            )
            .bind(&cutoff)
            .execute(&mut *self.tx)
            .await?;
            if table == "report_executions" {
                executions = done.rows_affected();
            }
        }
        Ok(executions)
    }

    /// Stores the events not stored yet (by id) and marks their executions to be
    /// derived, in one transaction; how many were new.
    pub async fn record_report_events(
        &mut self,
        events: &[NewReportEvent],
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let at = stamp(now);
        let mut rows = Rows::new(6);
        let mut pending = Rows::new(3);
        for e in events {
            rows.push([
                Cell::from(e.id.as_str()),
                Cell::from(e.resource.as_str()),
                Cell::from(e.execution_id.as_str()),
                Cell::from(stamp(e.occurred_at)),
                Cell::from(e.body.as_str()),
                Cell::from(at.as_str()),
            ]);
            pending.push([
                Cell::from(e.resource.as_str()),
                Cell::from(e.execution_id.as_str()),
                Cell::from(at.as_str()),
            ]);
        }
        let inserted = rows
            .fetch(
                self.store,
                &mut self.tx,
                "INSERT INTO report_events (id, resource, execution_id, occurred_at, body, received_at)",
                "ON CONFLICT (id) DO NOTHING RETURNING id",
            )
            .await?;
        pending
            .insert(
                self.store,
                &mut self.tx,
                "INSERT INTO report_pending (resource, execution_id, queued_at)",
                "ON CONFLICT (resource, execution_id) DO NOTHING",
            )
            .await?;
        Ok(u64::try_from(inserted.len()).unwrap_or(u64::MAX))
    }

    /// Derives one waiting execution in one transaction: its pending row is locked, its events' bodies and its resource's
    /// registrations `(org_id, pipeline_id)` (live organizations only) are handed to
    /// `derive`, and what it answers is stored; the pending row goes. `false` when
    /// it was derived meanwhile.
    pub async fn derive_execution(
        &mut self,
        (resource, execution_id): (&str, &str),
        derive: &Derivation,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        // A write first: it takes the pending row's lock on PostgreSQL and the write
        // lock on SQLite (a transaction that read first could not write after another
        // writer's commit).
        let waiting = sqlx::query(&self.store.sql(
            "UPDATE report_pending SET queued_at = queued_at WHERE resource = $1 AND execution_id = $2",
        ))
        .bind(resource)
        .bind(execution_id)
        .execute(&mut *self.tx)
        .await?;
        if waiting.rows_affected() == 0 {
            return Ok(false);
        }
        let bodies: Vec<String> = sqlx::query(&self.store.sql(
            "SELECT body FROM report_events WHERE resource = $1 AND execution_id = $2 ORDER BY id",
        ))
        .bind(resource)
        .bind(execution_id)
        .fetch_all(&mut *self.tx)
        .await?
        .iter()
        .map(|row| row.try_get::<String, _>("body"))
        .collect::<Result<_, _>>()?;
        let registrations: Vec<(String, String)> = sqlx::query(&self.store.sql(
            "SELECT r.org_id, r.pipeline_id FROM pipeline_registry r
             JOIN organizations o ON o.id = r.org_id AND o.deleted_at IS NULL
             WHERE r.arn = $1 ORDER BY r.org_id",
        ))
        .bind(resource)
        .fetch_all(&mut *self.tx)
        .await?
        .iter()
        .map(|row| Ok((row.try_get("org_id")?, row.try_get("pipeline_id")?)))
        .collect::<StoreResult<_>>()?;
        let at = stamp(now);
        match derive(&bodies, &registrations)? {
            Derived::Attributed(mut execution, mut stages) => {
                // An execution attributed before stays its organization's (history
                // never moves with a resource name's registration).
                let owner = sqlx::query(&self.store.sql(
                    "SELECT org_id, pipeline_id FROM report_executions WHERE resource = $1 AND execution_id = $2",
                ))
                .bind(resource)
                .bind(execution_id)
                .fetch_optional(&mut *self.tx)
                .await?;
                if let Some(owner) = owner {
                    let d = Decoder::new(&owner, "report_executions", &[]);
                    execution.org_id = d.get("org_id")?;
                    execution.pipeline_id = d.get("pipeline_id")?;
                    for stage in &mut stages {
                        stage.pipeline_id.clone_from(&execution.pipeline_id);
                    }
                }
                sqlx::query(&self.store.sql(
                    "INSERT INTO report_executions (resource, execution_id, org_id, pipeline_id, state, outcome, started_at, ended_at, duration_ms, error)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                     ON CONFLICT (resource, execution_id) DO UPDATE SET
                       pipeline_id = excluded.pipeline_id, state = excluded.state, outcome = excluded.outcome,
                       started_at = excluded.started_at, ended_at = excluded.ended_at,
                       duration_ms = excluded.duration_ms, error = excluded.error
                     WHERE report_executions.org_id = excluded.org_id",
                ))
                .bind(resource)
                .bind(execution_id)
                .bind(&execution.org_id)
                .bind(&execution.pipeline_id)
                .bind(&execution.state)
                .bind(&execution.outcome)
                .bind(stamp(execution.started_at))
                .bind(execution.ended_at.map(stamp))
                .bind(execution.duration_ms)
                .bind(&execution.error)
                .execute(&mut *self.tx)
                .await?;
                sqlx::query(
                    &self
                        .store
                        .sql("DELETE FROM report_stages WHERE resource = $1 AND execution_id = $2"),
                )
                .bind(resource)
                .bind(execution_id)
                .execute(&mut *self.tx)
                .await?;
                let mut rows = Rows::new(8);
                for stage in &stages {
                    rows.push([
                        Cell::from(resource),
                        Cell::from(execution_id),
                        Cell::from(stage.stage.as_str()),
                        Cell::from(execution.org_id.as_str()),
                        Cell::from(stage.pipeline_id.as_str()),
                        Cell::from(stage.state.as_str()),
                        Cell::from(stamp(stage.started_at)),
                        Cell::Int(stage.duration_ms),
                    ]);
                }
                rows.insert(
                    self.store,
                    &mut self.tx,
                    "INSERT INTO report_stages (resource, execution_id, stage, org_id, pipeline_id, state, started_at, duration_ms)",
                    "",
                )
                .await?;
                sqlx::query(
                    &self
                        .store
                        .sql("DELETE FROM report_unattributed WHERE resource = $1"),
                )
                .bind(resource)
                .execute(&mut *self.tx)
                .await?;
            }
            Derived::Unattributed(reason) => {
                let executions: i64 = sqlx::query(&self.store.sql(
                    "SELECT COUNT(DISTINCT execution_id) AS n FROM report_events WHERE resource = $1",
                ))
                .bind(resource)
                .fetch_one(&mut *self.tx)
                .await?
                .try_get("n")?;
                sqlx::query(&self.store.sql(
                    "INSERT INTO report_unattributed (resource, reason, executions, first_seen, last_seen)
                     VALUES ($1, $2, $3, $4, $4)
                     ON CONFLICT (resource) DO UPDATE SET reason = excluded.reason,
                       executions = excluded.executions, last_seen = excluded.last_seen",
                ))
                .bind(resource)
                .bind(&reason)
                .bind(executions)
                .bind(&at)
                .execute(&mut *self.tx)
                .await?;
            }
        }
        sqlx::query(
            &self
                .store
                .sql("DELETE FROM report_pending WHERE resource = $1 AND execution_id = $2"),
        )
        .bind(resource)
        .bind(execution_id)
        .execute(&mut *self.tx)
        .await?;
        Ok(true)
    }
}
