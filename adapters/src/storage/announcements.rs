//! Announcements: their window, audience (with its targets) and per-user dismissals.
//! Each is written with its feed row, a step of its service's unit.

use chrono::{DateTime, Utc};
use entitlements::Tier;
use messaging::{Audience, Severity, Teams, Window};

use super::decode::Decoder;
use super::{stamp, Store, StoreError, StoreResult};

/// An announcement as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnouncementRecord {
    /// Its id.
    pub id: String,
    /// Who it reaches.
    pub audience: Audience,
    /// One line.
    pub title: String,
    /// The text (Markdown).
    pub body: String,
    /// How prominent.
    pub severity: Severity,
    /// When it is shown.
    pub window: Window,
    /// Whether members may dismiss it.
    pub dismissible: bool,
    /// Who posted it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
    /// When the reader dismissed it, in a reader's list.
    pub dismissed_at: Option<DateTime<Utc>>,
}

/// What an announcement says and when (a new one, or an edit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnouncementFields {
    /// One line.
    pub title: String,
    /// The text.
    pub body: String,
    /// How prominent.
    pub severity: Severity,
    /// When it is shown.
    pub window: Window,
    /// Whether members may dismiss it.
    pub dismissible: bool,
}

/// The organization an announcement list is read in, and by whom.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    /// The organization.
    pub org_id: &'a str,
    /// Its parent, for a team.
    pub parent_org_id: Option<&'a str>,
    /// Its tier.
    pub tier: Tier,
    /// The user.
    pub user_id: &'a str,
}

const COLUMNS: &str = "a.id, a.org_id, a.audience, a.include_teams, a.tier, a.title, a.body, \
     a.severity, a.starts_at, a.ends_at, a.dismissible, a.created_by, a.created_at, a.updated_at";

/// Active now ($4) and reaching the organization $1 (parent $2, tier $3).
const VISIBLE: &str = "a.starts_at <= $4 AND (a.ends_at IS NULL OR a.ends_at > $4) AND (\
     (a.audience = 'organization' AND (a.org_id = $1 OR (a.org_id = $2 AND (a.include_teams = 1 \
        OR EXISTS (SELECT 1 FROM announcement_targets t WHERE t.announcement_id = a.id AND t.org_id = $1))))) \
     OR (a.audience = 'organizations' AND EXISTS (SELECT 1 FROM announcement_targets t WHERE t.announcement_id = a.id AND t.org_id = $1)) \
     OR a.audience = 'everyone' \
     OR (a.audience = 'tier' AND a.tier = $3))";

fn announcement_from_row(
    row: &sqlx::any::AnyRow,
    targets: Vec<String>,
) -> StoreResult<AnnouncementRecord> {
    let d = Decoder::new(row, "announcements", &["id"]);
    let audience = match d.get::<String>("audience")?.as_str() {
        "organization" => Audience::Organization {
            org_id: d
                .get::<Option<String>>("org_id")?
                .ok_or_else(|| d.reject("org_id", "an organization's announcement without one"))?,
            teams: if d.flag("include_teams")? {
                Teams::All
            } else if targets.is_empty() {
                Teams::None
            } else {
                Teams::Listed(targets)
            },
        },
        "organizations" => Audience::Organizations(targets),
        "everyone" => Audience::Everyone,
        "tier" => Audience::Tier(d.named("tier", Tier::parse)?),
        other => return Err(d.reject("audience", format_args!("unknown audience `{other}`"))),
    };
    let window = Window::new(d.stamp("starts_at")?, d.opt_stamp("ends_at")?)
        .map_err(|e| d.reject("ends_at", e))?;
    Ok(AnnouncementRecord {
        id: d.get("id")?,
        audience,
        title: d.get("title")?,
        body: d.get("body")?,
        severity: d.named("severity", Severity::parse)?,
        window,
        dismissible: d.flag("dismissible")?,
        created_by: d.get("created_by")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
        dismissed_at: match row_has(row, "dismissed_at") {
            true => d.opt_stamp("dismissed_at")?,
            false => None,
        },
    })
}

fn order(ascending: bool) -> &'static str {
    if ascending {
        "a.starts_at ASC, a.id ASC"
    } else {
        "a.starts_at DESC, a.id DESC"
    }
}

fn row_has(row: &sqlx::any::AnyRow, column: &str) -> bool {
    use sqlx::Row;
    row.columns()
        .iter()
        .any(|c| sqlx::Column::name(c) == column)
}

fn audience_columns(
    audience: &Audience,
) -> (
    &'static str,
    Option<&str>,
    bool,
    Option<&'static str>,
    &[String],
) {
    match audience {
        Audience::Organization { org_id, teams } => (
            "organization",
            Some(org_id.as_str()),
            matches!(teams, Teams::All),
            None,
            match teams {
                Teams::Listed(listed) => listed.as_slice(),
                _ => &[],
            },
        ),
        Audience::Organizations(listed) => ("organizations", None, false, None, listed.as_slice()),
        Audience::Everyone => ("everyone", None, false, None, &[]),
        Audience::Tier(tier) => ("tier", None, false, Some(tier.name()), &[]),
    }
}

impl Store {
    /// One announcement.
    pub async fn announcement(&self, id: &str) -> StoreResult<Option<AnnouncementRecord>> {
        let row = sqlx::query(&self.sql(&format!(
            "SELECT {COLUMNS} FROM announcements a WHERE a.id = $1"
        )))
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        match row {
            None => Ok(None),
            Some(row) => {
                let targets = self.announcement_targets(id).await?;
                announcement_from_row(&row, targets).map(Some)
            }
        }
    }

    /// The announcements of these rows, each with its targets.
    async fn with_targets(
        &self,
        rows: &[sqlx::any::AnyRow],
    ) -> StoreResult<Vec<AnnouncementRecord>> {
        use sqlx::Row;
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            let id: String = row.try_get("id")?;
            let targets = self.announcement_targets(&id).await?;
            items.push(announcement_from_row(row, targets)?);
        }
        Ok(items)
    }

    async fn announcement_targets(&self, id: &str) -> StoreResult<Vec<String>> {
        use sqlx::Row;
        let rows = sqlx::query(&self.sql(
            "SELECT org_id FROM announcement_targets WHERE announcement_id = $1 ORDER BY org_id",
        ))
        .bind(id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("org_id").map_err(StoreError::from))
            .collect()
    }

    /// The announcements active at `now` that reach the reader's organization,
    /// newest first, with the reader's dismissals (those dismissed left out unless
    /// `include_dismissed`): (page, total).
    pub async fn visible_announcements(
        &self,
        reader: Reader<'_>,
        now: DateTime<Utc>,
        include_dismissed: bool,
        (limit, offset): (u32, u64),
        ascending: bool,
    ) -> StoreResult<(Vec<AnnouncementRecord>, u64)> {
        let dismissed = if include_dismissed {
            ""
        } else {
            " AND d.dismissed_at IS NULL"
        };
        let condition = format!("{VISIBLE}{dismissed}");
        let (rows, total) = self
            .page(
                (
                    &format!("{COLUMNS}, d.dismissed_at"),
                    "announcements a LEFT JOIN announcement_dismissals d \
                     ON d.announcement_id = a.id AND d.user_id = $5",
                    &condition,
                    order(ascending),
                ),
                &[
                    Some(reader.org_id.to_owned()),
                    Some(reader.parent_org_id.unwrap_or_default().to_owned()),
                    Some(reader.tier.name().to_owned()),
                    Some(stamp(now)),
                    Some(reader.user_id.to_owned()),
                ],
                limit,
                offset,
            )
            .await?;
        Ok((self.with_targets(&rows).await?, total))
    }

    /// Every announcement an organization's admins manage (`Some(org)`), or the
    /// platform's (`None`), whatever their window, newest first.
    pub async fn managed_announcements(
        &self,
        org_id: Option<&str>,
        (limit, offset): (u32, u64),
        ascending: bool,
    ) -> StoreResult<(Vec<AnnouncementRecord>, u64)> {
        let (condition, binds) = match org_id {
            Some(org) => (
                "a.audience = 'organization' AND a.org_id = $1",
                vec![Some(org.to_owned())],
            ),
            None => ("a.audience <> 'organization'", Vec::new()),
        };
        let (rows, total) = self
            .page(
                (COLUMNS, "announcements a", condition, order(ascending)),
                &binds,
                limit,
                offset,
            )
            .await?;
        Ok((self.with_targets(&rows).await?, total))
    }

    /// Records a user's dismissal (the first one stays); answers its instant.
    pub async fn dismiss_announcement(
        &self,
        id: &str,
        user_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<DateTime<Utc>> {
        sqlx::query(&self.sql(
            "INSERT INTO announcement_dismissals (announcement_id, user_id, dismissed_at) \
             VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        ))
        .bind(id)
        .bind(user_id)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        let row = sqlx::query(&self.sql(
            "SELECT dismissed_at FROM announcement_dismissals WHERE announcement_id = $1 AND user_id = $2",
        ))
        .bind(id)
        .bind(user_id)
        .fetch_one(self.pool())
        .await?;
        Decoder::new(&row, "announcement_dismissals", &["announcement_id"]).stamp("dismissed_at")
    }

    /// How many announcements reach the reader now without being dismissed.
    pub async fn unread_announcements(
        &self,
        reader: Reader<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let (_, total) = self
            .visible_announcements(reader, now, false, (0, 0), false)
            .await?;
        Ok(total)
    }

    /// Writes a feed row in the transaction that made what it tells.
    pub(crate) async fn feed(
        &self,
        conn: &mut sqlx::AnyConnection,
        kind: &str,
        ref_id: &str,
        recipients: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO message_feed (kind, ref_id, recipients, created_at) VALUES ($1, $2, $3, $4)",
        ))
        .bind(kind)
        .bind(ref_id)
        .bind(recipients)
        .bind(stamp(now))
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

impl super::Transaction<'_> {
    /// Posts an announcement with its targets and its feed row.
    pub async fn create_announcement(
        &mut self,
        id: &str,
        audience: &Audience,
        fields: &AnnouncementFields,
        created_by: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let (kind, org_id, include_teams, tier, targets) = audience_columns(audience);

        sqlx::query(&self.store.sql(
            "INSERT INTO announcements (id, org_id, audience, include_teams, tier, title, body, severity, \
             starts_at, ends_at, dismissible, created_by, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)",
        ))
        .bind(id)
        .bind(org_id)
        .bind(kind)
        .bind(i64::from(include_teams))
        .bind(tier)
        .bind(&fields.title)
        .bind(&fields.body)
        .bind(fields.severity.as_str())
        .bind(stamp(fields.window.starts_at))
        .bind(fields.window.ends_at.map(stamp))
        .bind(i64::from(fields.dismissible))
        .bind(created_by)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        for target in targets {
            sqlx::query(&self.store.sql(
                "INSERT INTO announcement_targets (announcement_id, org_id) VALUES ($1, $2) \
                 ON CONFLICT DO NOTHING",
            ))
            .bind(id)
            .bind(target)
            .execute(&mut *self.tx)
            .await?;
        }
        self.store
            .feed(&mut self.tx, "announcement", id, "[]", now)
            .await?;
        Ok(())
    }

    /// Changes what an announcement says and when (with a feed row); `NotFound`
    /// when there is none.
    pub async fn update_announcement(
        &mut self,
        id: &str,
        fields: &AnnouncementFields,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE announcements SET title = $2, body = $3, severity = $4, starts_at = $5, ends_at = $6, \
             dismissible = $7, updated_at = $8 WHERE id = $1",
        ))
        .bind(id)
        .bind(&fields.title)
        .bind(&fields.body)
        .bind(fields.severity.as_str())
        .bind(stamp(fields.window.starts_at))
        .bind(fields.window.ends_at.map(stamp))
        .bind(i64::from(fields.dismissible))
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("announcement `{id}`")));
        }
        self.store
            .feed(&mut self.tx, "announcement", id, "[]", now)
            .await?;
        Ok(())
    }

    /// Deletes an announcement (its targets and dismissals with it); `NotFound` when
    /// there is none.
    pub async fn delete_announcement(&mut self, id: &str) -> StoreResult<()> {
        for table in ["announcement_dismissals", "announcement_targets"] {
            sqlx::query(
                &self
                    .store
                    .sql(&format!("DELETE FROM {table} WHERE announcement_id = $1")),
            )
            .bind(id)
            .execute(&mut *self.tx)
            .await?;
        }
        let done = sqlx::query(&self.store.sql("DELETE FROM announcements WHERE id = $1"))
            .bind(id)
            .execute(&mut *self.tx)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("announcement `{id}`")));
        }
        Ok(())
    }
}
