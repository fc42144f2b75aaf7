//! The account-mail worker (every replica; a claim is exclusive and fenced by its
//! lease): sends the verification links ([`crate::services::account_mail`]).

use super::Shutdown;
use crate::services::context::AppState;

/// Runs until the server stops (at once without `SMTP_URL`).
pub async fn run(state: AppState, mut shutdown: Shutdown) {
    if state.config.notifications.smtp_url.is_none() {
        return;
    }
    let poll = state.config.notifications.poll;
    loop {
        if shutdown.is_set() {
            break;
        }
        match crate::services::account_mail::send_due(&state.infra.store, &state.config).await {
            Ok(0) => {}
            Ok(_) => continue,
            Err(error) => tracing::warn!(%error, "account mail failed; retried later"),
        }
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = shutdown.wait() => break,
        }
    }
}
