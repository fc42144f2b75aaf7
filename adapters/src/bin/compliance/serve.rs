//! `compliance serve`: the server's logs, its listener, its workers and its graceful
//! stop.

use super::*;

pub(super) fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!(
            "{}://***{}",
            url.get(..scheme).unwrap_or(""),
            url.get(at..).unwrap_or("")
        ),
        _ => url.to_owned(),
    }
}

pub(super) async fn serve(config: Config) -> Result<ExitCode, ExitCode> {
    {
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        use tracing_subscriber::Layer as _;
        let audit = adapters::services::images::AUDIT_TARGET;
        // The server's lines as JSON, filtered by RUST_LOG; the registry's audit
        // lines (already JSON objects) written as they are, never filtered.
        let lines = tracing_subscriber::fmt::layer().json().with_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
                .add_directive(format!("{audit}=off").parse().unwrap_or_else(|_| {
                    tracing_subscriber::filter::Directive::from(tracing::Level::INFO)
                })),
        );
        let audit_lines = tracing_subscriber::fmt::layer()
            .event_format(adapters::logging::MessageOnly)
            .with_filter(
                tracing_subscriber::filter::Targets::new().with_target(audit, tracing::Level::INFO),
            );
        tracing_subscriber::registry()
            .with(lines)
            .with(audit_lines)
            .init();
    }
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    match &config.notifications.webhook_proxy {
        Some(proxy) => tracing::warn!(
            proxy = %proxy,
            "webhook deliveries go through WEBHOOK_PROXY_URL: the proxy, not the address check, decides where they connect"
        ),
        None => tracing::info!("webhook deliveries ignore HTTP_PROXY, HTTPS_PROXY and ALL_PROXY (set WEBHOOK_PROXY_URL to use a proxy)"),
    }
    if config.database_is_default {
        tracing::warn!("DATABASE_URL is unset: using the embedded SQLite file compliance.db in the working directory");
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
    let port = config.http.port;
    let counters = std::sync::Arc::new(adapters::audit::AuditCounters::default());
    // This process's name in the leases of singleton work.
    let holder = format!("{}-{}", std::process::id(), adapters::storage::new_id());
    let mut workers = Workers::new();
    if store.follows_primary() {
        let store = store.clone();
        workers.spawn("primary", move |shutdown| {
            adapters::workers::primary::run(store, shutdown)
        });
    }
    if store.dialect() == adapters::storage::Dialect::Postgres {
        let store = store.clone();
        workers.spawn("heartbeat", move |shutdown| {
            adapters::workers::heartbeat::run(store, shutdown)
        });
    }
    // The reports' standby answers at start (a wrong URL is seen at once); later,
    // while it does not answer or lags, the reports read the primary.
    let standby = match &config.reporting.url {
        Some(url) => match Store::connect_standby(url.expose()).await {
            Ok(standby) => Some(standby),
            Err(error) => return Err(fail(format!("REPORTING_DATABASE_URL: {error}"), 1)),
        },
        None => None,
    };
    {
        let (store, holder) = (store.clone(), holder.clone());
        workers.spawn("audit-relay", move |shutdown| {
            relay::run(store, holder, shutdown)
        });
    }
    {
        let (store, holder) = (store.clone(), holder.clone());
        let retention_days = config.audit_retention_days;
        let check_retention_days = config.compliance.audit_retention_days;
        let restore_days = config.org_restore_days;
        let report_days = config.report_retention_days;
        let message_days = config.messages.retention_days;
        workers.spawn("retention", move |shutdown| {
            retention::prune_daily(
                store,
                holder,
                (
                    retention_days,
                    check_retention_days,
                    restore_days,
                    report_days,
                    message_days,
                ),
                shutdown,
            )
        });
    }
    {
        let (store, settings) = (store.clone(), config.builds.clone());
        workers.spawn("plugin-builds", move |shutdown| {
            adapters::workers::builds::run(store, settings, shutdown)
        });
    }
    // Without AUDIT_CHECKPOINT_KEY the configuration's warnings say checkpoints are off.
    if let Some(settings) = config.checkpoints.clone() {
        tracing::info!(key = %settings.signer.verifier_key(), "signing audit checkpoints");
        let (store, holder) = (store.clone(), holder.clone());
        workers.spawn("audit-checkpoints", move |shutdown| {
            adapters::workers::checkpoints::run(store, holder, settings, shutdown)
        });
    }
    let database_url = config.database_url.expose().to_owned();
    let state = AppState::new(config, store.clone(), counters);
    let state = match standby {
        Some(standby) => state.with_reporting_standby(standby),
        None => state,
    };
    if store.dialect() == adapters::storage::Dialect::Postgres {
        let state = state.clone();
        workers.spawn("cache-sync", move |shutdown| {
            adapters::workers::cache_sync::run(database_url, state, shutdown)
        });
    }
    {
        let state = state.clone();
        workers.spawn("allowances", move |shutdown| {
            adapters::workers::allowances::run(state, shutdown)
        });
    }
    {
        let (state, settings) = (state.clone(), state.config.reevaluation.clone());
        workers.spawn("reevaluation", move |shutdown| {
            adapters::workers::reevaluation::run(state, settings, shutdown)
        });
    }
    {
        let (state, holder) = (state.clone(), holder.clone());
        workers.spawn("scans", move |shutdown| {
            adapters::workers::scans::run(state, holder, shutdown)
        });
    }
    {
        let (state, holder) = (state.clone(), holder.clone());
        workers.spawn("exports", move |shutdown| {
            adapters::workers::exports::run(state, holder, shutdown)
        });
    }
    {
        let (state, holder) = (state.clone(), holder.clone());
        workers.spawn("scan-scheduler", move |shutdown| {
            adapters::workers::schedules::run(state, holder, shutdown)
        });
    }
    {
        let state = state.clone();
        workers.spawn("notification-delivery", move |shutdown| {
            adapters::workers::delivery::run(state, shutdown)
        });
    }
    {
        let state = state.clone();
        workers.spawn("reports", move |shutdown| {
            adapters::workers::reports::run(state, shutdown)
        });
    }
    {
        // Records registry changes whose answer could not (REGISTRY_URL only).
        let state = state.clone();
        workers.spawn("registry-intents", move |shutdown| {
            adapters::workers::registry::run(state, shutdown)
        });
    }
    {
        let state = state.clone();
        workers.spawn("message-feed", move |shutdown| {
            adapters::workers::message_feed::run(state, shutdown)
        });
    }
    {
        let state = state.clone();
        workers.spawn("account-mail", move |shutdown| {
            adapters::workers::account_mail::run(state, shutdown)
        });
    }
    {
        let (state, holder) = (state.clone(), holder.clone());
        workers.spawn("notification-digests", move |shutdown| {
            adapters::workers::digests::run(state, holder, shutdown)
        });
    }
    {
        let (state, holder) = (state.clone(), holder.clone());
        workers.spawn("alert-evaluation", move |shutdown| {
            adapters::workers::alerts::run(state, holder, shutdown)
        });
    }
    {
        let (state, holder) = (state.clone(), holder.clone());
        workers.spawn("posture-snapshots", move |shutdown| {
            adapters::workers::posture::run(state, holder, shutdown)
        });
    }
    {
        let (state, holder) = (state.clone(), holder.clone());
        workers.spawn("kms-check", move |shutdown| {
            adapters::workers::keys::check(state, holder, shutdown)
        });
    }
    {
        let (state, holder) = (state.clone(), holder.clone());
        workers.spawn("secrets-rewrite", move |shutdown| {
            adapters::workers::keys::rewrite(state, holder, shutdown)
        });
    }
    {
        let (store, holder) = (state.infra.store.clone(), holder.clone());
        workers.spawn("judgement-move", move |shutdown| {
            adapters::workers::judgements::run(store, holder, shutdown)
        });
    }
    {
        let (state, holder) = (state.clone(), holder.clone());
        workers.spawn("quota-periods", move |shutdown| {
            adapters::workers::quotas::run(state, holder, shutdown)
        });
    }
    state.infra.keys.prefetch().await;
    let grace = state.config.http.shutdown_grace;
    let app = router(state.clone());
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", port))
        .await
        .map_err(|e| fail(format!("cannot listen on port {port}: {e}"), 1))?;
    tracing::info!(port, "listening");
    // SIGTERM: `/ready` fails at once and the listener takes no new connection;
    // requests in flight get SHUTDOWN_GRACE_SECONDS to finish.
    let (stopping, mut stopped) = tokio::sync::watch::channel(false);
    let signalled = {
        let state = state.clone();
        async move {
            shutdown().await;
            state.start_draining();
            tracing::info!(
                grace_seconds = grace.as_secs(),
                "stopping: requests in flight may finish"
            );
            let _ = stopping.send(true);
        }
    };
    let served = axum::serve(
        adapters::http::listener::EnvelopedListener(listener),
        app.into_make_service_with_connect_info::<adapters::http::listener::PeerAddr>(),
    )
    .with_graceful_shutdown(signalled);
    let deadline = async move {
        let _ = stopped.wait_for(|stopping| *stopping).await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        served = served => served.map_err(|e| fail(e, 1))?,
        () = deadline => tracing::warn!("requests still in flight after SHUTDOWN_GRACE_SECONDS: stopped anyway"),
    }
    // Requests are done; the workers get a deadline to finish (the relay drains the
    // outbox), then what this process held is handed back so that another replica
    // takes it over at once; whatever is left waits in the database.
    workers.drain(std::time::Duration::from_secs(10)).await;
    match adapters::workers::hand_back(&store, &holder).await {
        Ok(handed) => tracing::info!(handed, "leases handed back"),
        Err(error) => tracing::warn!(%error, "leases not handed back: they expire on their own"),
    }
    store.close().await;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn shutdown() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {},
            _ = terminate.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
