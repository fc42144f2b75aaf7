//! `compliance provision`: the first super-admin account, from the bootstrap list or
//! the development credentials.

use super::*;

/// The development credentials `compliance provision --development` falls back on.
pub(super) const DEV_IDENTIFIER: &str = "admin@localhost";
pub(super) const DEV_PASSWORD: &str = "compliance-development-password";

/// `compliance provision`: the first super-admin account.
pub(super) async fn provision(config: Config, development: bool) -> Result<ExitCode, ExitCode> {
    let (identifier, password) = config
        .platform_credentials
        .clone()
        .map(|(identifier, password)| (identifier, password.expose().to_owned()))
        .unwrap_or_else(|| (DEV_IDENTIFIER.to_owned(), DEV_PASSWORD.to_owned()));
    if !development && (identifier == DEV_IDENTIFIER || password == DEV_PASSWORD) {
        return Err(fail(
            "PLATFORM_IDENTIFIER and PLATFORM_PASSWORD are unset or the development defaults: set them, or pass --development outside any shared environment",
            2,
        ));
    }
    let store = Store::connect_primary(
        config.database_url.expose(),
        config.database_direct_url.as_ref().map(|d| d.expose()),
    )
    .await
    .map_err(|e| fail(e, 1))?;
    adapters::services::operations::migrate(&store)
        .await
        .map_err(|e| fail(e, 1))?;
    let state = AppState::new(config, store, std::sync::Arc::default());
    match adapters::services::accounts::provision(
        &state.infra.store,
        &state.config,
        &state.infra.passwords,
        (&identifier, password),
        chrono::Utc::now(),
    )
    .await
    {
        Ok(account) => {
            // The registration's audit event is in the outbox; sealed now, not at
            // the next start.
            let _ = adapters::workers::relay::drain(&state.infra.store).await;
            print_out(&format!(
                "super-admin account {} created for {}",
                account.user_id, account.email
            ))?;
            Ok(ExitCode::SUCCESS)
        }
        Err(adapters::services::ServiceError::Conflict(_)) => {
            print_out(&format!(
                "an account for {identifier} exists already: left as it is"
            ))?;
            Ok(ExitCode::SUCCESS)
        }
        Err(adapters::services::ServiceError::Tenancy(_)) => Err(fail(
            format!("{identifier} is not listed in BOOTSTRAP_SUPERADMIN_EMAILS"),
            2,
        )),
        Err(adapters::services::ServiceError::Invalid { field, message }) => {
            Err(fail(format!("{field}: {message}"), 2))
        }
        Err(error) => Err(fail(error, 1)),
    }
}
