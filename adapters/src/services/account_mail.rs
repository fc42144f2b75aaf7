//! Mail to accounts (the e-mail verification link): recorded with the account in
//! one transaction, sent by the account-mail worker through the SMTP relay with the
//! notifications' retry schedule. A sent (or abandoned) mail's text, which holds
//! the link, is cleared.

use chrono::Utc;

use super::delivery::{send_mail, Outcome};
use super::ServiceResult;
use crate::config::Config;
use crate::storage::Store;

/// How long a claim of a mail holds.
pub const LEASE: std::time::Duration = std::time::Duration::from_secs(60);

/// Sends the due mails (up to 16); how many were attempted. Nothing without
/// `SMTP_URL`: the mails wait.
pub async fn send_due(store: &Store, config: &Config) -> ServiceResult<usize> {
    let Some(url) = config.notifications.smtp_url.clone() else {
        return Ok(0);
    };
    let now = Utc::now();
    let until = now + chrono::Duration::from_std(LEASE).unwrap_or(chrono::Duration::seconds(60));
    let claimed = store.claim_account_mail(now, until, 16).await?;
    for mail in &claimed {
        let outcome = send_mail(
            config,
            url.expose(),
            &mail.id,
            std::slice::from_ref(&mail.recipient),
            (&mail.subject, &mail.body),
        )
        .await;
        let attempts = mail.attempts.saturating_add(1);
        let result = match outcome {
            Outcome::Sent(_) => Ok(()),
            Outcome::Failed(_, why) if attempts < config.notifications.max_attempts => {
                let wait = crate::notify::retry_after(attempts, config.notifications.retry_base)
                    .and_then(|d| chrono::Duration::from_std(d).ok());
                Err((wait.map(|w| Utc::now() + w), why))
            }
            Outcome::Failed(_, why)
            | Outcome::Refused(why)
            | Outcome::Rejected(_, why)
            | Outcome::Skipped(why)
            | Outcome::Waiting(why) => Err((None, why)),
            Outcome::Gone => Err((None, "gone".to_owned())),
        };
        if let Err((_, why)) = &result {
            tracing::warn!(mail = %mail.id, error = %why, "an account mail was not sent");
        }
        store
            .finish_account_mail(&mail.id, result, Utc::now())
            .await?;
    }
    Ok(claimed.len())
}
