//! `compliance`: the reference server and its command-line verbs.

use std::process::ExitCode;

use adapters::cli;
use adapters::cli::args::{AuditVerb, Cli, ExportVerb, ReportVerb, Verb};
use adapters::config::Config;
use adapters::http::{router, AppState};
use adapters::storage::Store;
use adapters::workers::{relay, retention, Workers};
use clap::Parser;

/// The server's allocator: under load, glibc's malloc and free took a sixth of the
/// process's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn fail(message: impl std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("compliance: {message}");
    ExitCode::from(code)
}

/// Writes a line of an export; `Ok(false)` when the reader went away (`| head`), to
/// stop quietly.
fn write_line(out: &mut impl std::io::Write, line: &str) -> Result<bool, ExitCode> {
    match writeln!(out, "{line}") {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(fail(e, 1)),
    }
}

/// Writes a line to standard output. A reader that went away (`| head`) is not an
/// error: the verb ends quietly with the exit code it would have had.
fn print_out(text: &str) -> Result<(), ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(fail(format!("cannot write the output: {e}"), 1)),
    }
}

/// Colour only for a person at a terminal, and never when NO_COLOR is set.
fn colour_on_stdout() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Writes a file only its owner may read (a session's tokens).
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")
}

/// The development credentials `compliance provision --development` falls back on.
const DEV_IDENTIFIER: &str = "admin@localhost";
const DEV_PASSWORD: &str = "compliance-development-password";

/// `compliance provision`: the first super-admin account.
async fn provision(config: Config, development: bool) -> Result<ExitCode, ExitCode> {
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

fn config() -> Result<Config, ExitCode> {
    Config::from_env().map_err(|errors| {
        for e in &errors {
            eprintln!("compliance: configuration: {e}");
        }
        ExitCode::from(2)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) | Err(code) => code,
    }
}

fn run(cli: Cli) -> Result<ExitCode, ExitCode> {
    match cli.verb {
        Verb::Serve => {
            let config = config()?;
            runtime()?.block_on(serve(config))
        }
        Verb::Migrate => {
            let config = config()?;
            runtime()?.block_on(async {
                let store = Store::connect_primary(
                    config.database_url.expose(),
                    config.database_direct_url.as_ref().map(|d| d.expose()),
                )
                .await
                .map_err(|e| fail(e, 1))?;
                adapters::services::operations::migrate(&store)
                    .await
                    .map_err(|e| fail(e, 1))?;
                print_out(&format!(
                    "migrations applied to {}",
                    redact_url(config.database_url.expose())
                ))?;
                Ok(ExitCode::SUCCESS)
            })
        }
        Verb::Token {
            sub,
            email,
            service,
            ttl,
            step_up,
        } => {
            let config = config()?;
            let token = cli::token(
                &config,
                &sub,
                email.as_deref(),
                service.as_deref(),
                ttl.as_deref(),
                step_up,
            )
            .map_err(|f| fail(f.message, 2))?;
            print_out(&token)?;
            Ok(ExitCode::SUCCESS)
        }
        Verb::Eval {
            rules,
            target,
            attributes,
            format,
            limits,
        } => {
            let limits = limits.limits();
            let target: compliance_core::Target = target
                .parse()
                .map_err(|e: String| fail(format!("--target: {e}"), 2))?;
            let mut stdin_taken = false;
            let rules = cli::eval::Rules::load(&rules, &limits, &mut stdin_taken)
                .map_err(|f| fail(f.message, 2))?;
            let files = cli::source::expand(&attributes).map_err(|f| fail(f.message, 2))?;
            let report = cli::eval::check(&rules, target, &files, &limits, &mut stdin_taken)
                .map_err(|f| fail(f.message, 2))?;
            let style = cli::format::Style {
                colour: colour_on_stdout(),
            };
            print_out(&cli::format::render(&report, format, style))?;
            Ok(if report.blocked() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Verb::Test {
            path,
            fail_only,
            write,
            limits,
        } => {
            let options = cli::suite::Options { fail_only, write };
            let outcomes = cli::suite::run(&path, &limits.limits(), options)
                .map_err(|f| fail(f.message, 2))?;
            print_out(&outcomes.text)?;
            Ok(if outcomes.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Verb::Audit {
            verb: AuditVerb::Export { org, checkpoint },
        } => {
            let config = config()?;
            runtime()?.block_on(async {
                use std::io::Write;
                // Export reads what exists: it never creates (nor migrates) a database.
                let store = Store::open_existing(config.session_database_url())
                    .await
                    .map_err(|e| {
                        fail(
                            format!(
                                "cannot open the database {}: {e}",
                                redact_url(config.database_url.expose())
                            ),
                            1,
                        )
                    })?;
                let stdout = std::io::stdout();
                let mut out = std::io::BufWriter::new(stdout.lock());
                if checkpoint {
                    let (latest, _) = store
                        .checkpoints(&org, 1, 0)
                        .await
                        .map_err(|e| fail(e, 1))?;
                    let Some(latest) = latest.into_iter().next() else {
                        return Err(fail(
                            format!("organization `{org}` has no signed checkpoint"),
                            1,
                        ));
                    };
                    let line = serde_json::json!({"checkpoint": latest.note}).to_string();
                    if !write_line(&mut out, &line)? {
                        return Ok(ExitCode::SUCCESS);
                    }
                }
                let mut after = 0;
                loop {
                    let batch = store
                        .chain_batch(&org, after, 1000)
                        .await
                        .map_err(|e| fail(e, 1))?;
                    let Some(last) = batch.last() else { break };
                    after = last.seq;
                    for row in &batch {
                        let line = serde_json::to_string(row).map_err(|e| fail(e, 1))?;
                        if !write_line(&mut out, &line)? {
                            return Ok(ExitCode::SUCCESS);
                        }
                    }
                }
                match out.flush() {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                    Err(e) => return Err(fail(e, 1)),
                }
                if after == 0 {
                    return Err(fail(
                        format!(
                            "organization `{org}` has no audit events in {}",
                            redact_url(config.database_url.expose())
                        ),
                        1,
                    ));
                }
                Ok(ExitCode::SUCCESS)
            })
        }
        Verb::Audit {
            verb:
                AuditVerb::Verify {
                    file,
                    checkpoints,
                    key,
                },
        } => {
            let (report, ok) = cli::verify_export(&file, &checkpoints, key.as_deref())
                .map_err(|f| fail(f.message, u8::try_from(f.code).unwrap_or(2)))?;
            print_out(&serde_json::to_string_pretty(&report).unwrap_or_default())?;
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Verb::Export {
            verb: ExportVerb::Verify { file, key },
        } => {
            let (report, ok) = cli::verify_org_export(&file, key.as_deref())
                .map_err(|f| fail(f.message, u8::try_from(f.code).unwrap_or(2)))?;
            print_out(&serde_json::to_string_pretty(&report).unwrap_or_default())?;
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Verb::Report {
            verb:
                ReportVerb::Ingest {
                    file,
                    batch,
                    platform,
                },
        } => {
            let text = if file == "-" {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                    .map_err(|e| fail(format!("standard input: {e}"), 2))?;
                text
            } else {
                std::fs::read_to_string(&file).map_err(|e| fail(format!("{file}: {e}"), 2))?
            };
            let events = cli::platform::report_events(&text)
                .map_err(|f| fail(format!("{file}: {}", f.message), 2))?;
            runtime()?.block_on(async {
                let platform = cli::platform::Platform::from(platform);
                let totals = cli::platform::ingest_reports(&platform, &events, batch)
                    .await
                    .map_err(|f| fail(f.message, u8::try_from(f.code).unwrap_or(1)))?;
                print_out(&totals.to_string())?;
                Ok(ExitCode::SUCCESS)
            })
        }
        Verb::Provision { development } => {
            let config = config()?;
            runtime()?.block_on(provision(config, development))
        }
        Verb::Login {
            url,
            identifier,
            password_stdin,
            org,
            output,
        } => runtime()?.block_on(async {
            let password = if password_stdin {
                let mut line = String::new();
                std::io::stdin()
                    .read_line(&mut line)
                    .map_err(|e| fail(format!("cannot read the password: {e}"), 2))?;
                line.trim_end_matches(['\r', '\n']).to_owned()
            } else {
                std::env::var("PLATFORM_PASSWORD")
                    .map_err(|_| fail("set PLATFORM_PASSWORD, or pass --password-stdin", 2))?
            };
            let session = cli::platform::login(&url, (&identifier, &password), org.as_deref())
                .await
                .map_err(|f| fail(f.message, u8::try_from(f.code).unwrap_or(1)))?;
            match output {
                Some(path) => {
                    let text = serde_json::to_string_pretty(&session).unwrap_or_default();
                    write_private(&path, &text)
                        .map_err(|e| fail(format!("{}: {e}", path.display()), 1))?;
                    print_out(&format!("signed in; the session is in {}", path.display()))?;
                }
                None => print_out(
                    session
                        .get("accessToken")
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or_default(),
                )?,
            }
            Ok(ExitCode::SUCCESS)
        }),
        Verb::UploadPlugin {
            file,
            organization,
            name,
            version,
            access,
            platform,
        } => runtime()?.block_on(async {
            let platform = cli::platform::Platform::from(platform);
            let plugin = cli::platform::upload_plugin(
                &platform,
                (&file, &organization),
                (&name, &version),
                &access,
            )
            .await
            .map_err(|f| fail(f.message, u8::try_from(f.code).unwrap_or(1)))?;
            print_out(&serde_json::to_string_pretty(&plugin).unwrap_or_default())?;
            Ok(ExitCode::SUCCESS)
        }),
        Verb::CreatePipeline {
            file,
            project,
            organization,
            platform,
        } => runtime()?.block_on(async {
            let platform = cli::platform::Platform::from(platform);
            let pipeline =
                cli::platform::create_pipeline(&platform, &file, (&project, &organization))
                    .await
                    .map_err(|f| fail(f.message, u8::try_from(f.code).unwrap_or(1)))?;
            print_out(&serde_json::to_string_pretty(&pipeline).unwrap_or_default())?;
            Ok(ExitCode::SUCCESS)
        }),
        Verb::Generate {
            kind,
            prompt,
            repository,
            reference,
            provider,
            model,
            organization,
            platform,
        } => runtime()?.block_on(async {
            let platform = cli::platform::Platform::from(platform);
            let request = cli::generate::Request {
                kind,
                prompt,
                url: repository,
                reference,
                provider,
                model,
                organization,
            };
            let body = cli::generate::generate(&platform, &request)
                .await
                .map_err(|f| fail(f.message, u8::try_from(f.code).unwrap_or(1)))?;
            print_out(&serde_json::to_string_pretty(&body).unwrap_or_default())?;
            Ok(ExitCode::SUCCESS)
        }),
        Verb::LoadContent { url, token, org } => runtime()?.block_on(async {
            let loaded = cli::load_content(&url, &token, &org)
                .await
                .map_err(|f| fail(f.message, 1))?;
            print_out(&serde_json::to_string_pretty(&loaded).unwrap_or_default())?;
            Ok(ExitCode::SUCCESS)
        }),
        Verb::CheckpointKey { name } => {
            let mut seed = [0u8; 32];
            getrandom::fill(&mut seed).map_err(|e| fail(format!("no randomness: {e}"), 1))?;
            let signer = audit_chain::NoteSigner::from_seed(&name, seed)
                .map_err(|e| fail(format!("--name: {e}"), 2))?;
            eprintln!("verifier key: {}", signer.verifier_key());
            print_out(&signer.private_key())?;
            Ok(ExitCode::SUCCESS)
        }
        Verb::Entitlements { tier, bundles } => {
            let config = config()?;
            let result = cli::entitlements(&config.catalog, &tier, &bundles)
                .map_err(|f| fail(f.message, 2))?;
            print_out(&serde_json::to_string_pretty(&result).unwrap_or_default())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(format!("cannot start the runtime: {e}"), 1))
}

fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!(
            "{}://***{}",
            url.get(..scheme).unwrap_or(""),
            url.get(at..).unwrap_or("")
        ),
        _ => url.to_owned(),
    }
}

async fn serve(config: Config) -> Result<ExitCode, ExitCode> {
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

async fn shutdown() {
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
