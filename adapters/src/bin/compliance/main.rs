//! `compliance`: the reference server and its command-line verbs.

use std::process::ExitCode;

use adapters::cli;
use adapters::cli::args::{AuditVerb, Cli, ExportVerb, ReportVerb, Verb};
use adapters::config::Config;
use adapters::http::{router, AppState};
use adapters::storage::Store;
use adapters::workers::{relay, retention, Workers};
use clap::Parser;
mod serve;
use serve::*;
mod provision;
use provision::*;

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
