//! The command line's arguments: the verbs of `compliance` and their options (clap).

use clap::{Parser, Subcommand};

use crate::cli;

#[derive(Parser)]
#[command(
    name = "compliance",
    version,
    about = "The governance core of a multi-tenant CI/CD platform."
)]
pub struct Cli {
    #[command(subcommand)]
    pub verb: Verb,
}

const EVAL_EXIT_CODES: &str = "Exit codes:\n  0  nothing is blocked (warnings do not block)\n  1  a file is blocked: a rule of severity error or critical failed\n  2  bad input: a file that cannot be read or parsed, a bad rule, a document over a limit\n\nA closed pipe (`| head`) ends the output quietly with the same code.";

const TEST_EXIT_CODES: &str = "Exit codes:\n  0  every expected result holds (or --write recorded them)\n  1  an expected result differs\n  2  bad input: a test, rule or attribute file that cannot be read or parsed, a rule or file the test does not have";

/// The server's limits on attribute documents and rules, as flags.
#[derive(clap::Args)]
pub struct LimitArgs {
    /// The deepest attribute document accepted.
    #[arg(long, env = "COMPLIANCE_MAX_ATTRIBUTE_DEPTH", default_value_t = compliance_core::DEFAULT_MAX_DEPTH)]
    pub max_depth: usize,
    /// The most object keys an attribute document may have, over all its levels.
    #[arg(long, env = "COMPLIANCE_MAX_ATTRIBUTE_KEYS", default_value_t = compliance_core::DEFAULT_MAX_KEYS)]
    pub max_keys: usize,
    /// The longest regex a rule may have.
    #[arg(long, env = "COMPLIANCE_MAX_REGEX_LENGTH", default_value_t = compliance_core::DEFAULT_MAX_REGEX_LENGTH)]
    pub max_regex_length: usize,
}

impl LimitArgs {
    pub fn limits(&self) -> cli::eval::Limits {
        cli::eval::Limits {
            max_depth: self.max_depth,
            max_keys: self.max_keys,
            max_regex_length: self.max_regex_length,
        }
    }
}

/// Where the platform is, and the token to call it with.
#[derive(clap::Args)]
pub struct PlatformArgs {
    /// The platform's base URL.
    #[arg(long, env = "PLATFORM_URL", default_value = "http://localhost:3000")]
    pub url: String,
    /// The bearer token.
    #[arg(long, env = "PLATFORM_TOKEN", hide_env_values = true)]
    pub token: String,
}

impl From<PlatformArgs> for cli::platform::Platform {
    fn from(args: PlatformArgs) -> Self {
        cli::platform::Platform {
            url: args.url,
            token: args.token,
        }
    }
}

#[derive(Subcommand)]
pub enum Verb {
    /// Run the HTTP server (COMPLIANCE_SERVICE_PORT, default 3000; DATABASE_URL, default a SQLite file here).
    Serve,
    /// Apply the database migrations and exit.
    Migrate,
    /// Print a signed JWT (development and tests), using JWT_SECRET.
    Token {
        /// The subject (user id, or service name).
        #[arg(long)]
        sub: String,
        /// The user's e-mail.
        #[arg(long)]
        email: Option<String>,
        /// Make a service token for this service.
        #[arg(long)]
        service: Option<String>,
        /// Lifetime: 2h, 30m, 7200 (default JWT_EXPIRES_IN, at most 24h).
        #[arg(long)]
        ttl: Option<String>,
        /// Make a step-up token (send it in X-Step-Up-Token beside the access token).
        #[arg(long)]
        step_up: bool,
    },
    /// Evaluate rules against attribute files offline, as CI gates use it.
    #[command(after_help = EVAL_EXIT_CODES)]
    Eval {
        /// A rule file: a JSON or YAML array of rules in the API's form. Repeat for more.
        #[arg(long = "rules", value_name = "FILE", required = true)]
        rules: Vec<String>,
        /// plugin or pipeline.
        #[arg(long)]
        target: String,
        /// Attribute files (JSON or YAML), globs, or `-` for standard input.
        #[arg(value_name = "FILE", required = true)]
        attributes: Vec<String>,
        /// The report's format.
        #[arg(long, value_enum, default_value = "json")]
        format: cli::format::Format,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Check expected results: test files name rules, attribute files and what each
    /// rule should give for each file (pass, fail or skip).
    #[command(after_help = TEST_EXIT_CODES)]
    Test {
        /// A test file, or a directory searched for compliance-test.yaml (.yml, .json).
        path: std::path::PathBuf,
        /// Print only the checks that differ.
        #[arg(long)]
        fail_only: bool,
        /// Record today's results as the expected ones (rewrites the test files).
        #[arg(long)]
        write: bool,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Export an organization's audit chain as JSON lines, or verify an export offline.
    Audit {
        #[command(subcommand)]
        verb: AuditVerb,
    },
    /// Check an organization's export archive offline.
    Export {
        #[command(subcommand)]
        verb: ExportVerb,
    },
    /// Register the sample published rules and starter policies through the API, as the
    /// system organization (a super-admin token).
    LoadContent {
        /// The server, for example http://localhost:3000.
        #[arg(long)]
        url: String,
        /// A token of a member of the system organization with compliance:write.
        #[arg(long)]
        token: String,
        /// The system organization's id.
        #[arg(long, env = "SYSTEM_ORG_ID")]
        org: String,
    },
    /// Upload a plugin (a ZIP with plugin.json or plugin.yaml at its root) to the
    /// platform at PLATFORM_URL with the token of PLATFORM_TOKEN. Exit 1 with the
    /// error (for example 403 COMPLIANCE_VIOLATION or 503 COMPLIANCE_UNAVAILABLE) when
    /// refused, 2 when the file cannot be used. (`deploy` needs a cloud provider and
    /// is not offered here.)
    UploadPlugin {
        /// The ZIP.
        #[arg(long)]
        file: String,
        /// The organization's id (sent as x-org-id).
        #[arg(long)]
        organization: String,
        /// The plugin's name (the manifest must say the same).
        #[arg(long)]
        name: String,
        /// The plugin's version (the manifest must say the same).
        #[arg(long)]
        version: String,
        /// public or private.
        #[arg(long, default_value = "private")]
        access: String,
        #[command(flatten)]
        platform: PlatformArgs,
    },
    /// Create a pipeline on the platform at PLATFORM_URL with the token of
    /// PLATFORM_TOKEN, from a JSON or YAML file holding the create body
    /// (pipelineName, accessModifier, props). Exit codes as for upload-plugin.
    CreatePipeline {
        /// The pipeline file.
        #[arg(long)]
        file: String,
        /// The project (sets the body's `project`).
        #[arg(long)]
        project: String,
        /// The organization's id (sent as x-org-id; the body's `organization` when
        /// the file names none).
        #[arg(long)]
        organization: String,
        #[command(flatten)]
        platform: PlatformArgs,
    },
    /// Generate a pipeline or a plugin with an AI provider on the platform at
    /// PLATFORM_URL (PLATFORM_TOKEN), from a prompt or (pipelines) a Git repository. The
    /// model's text and each checked attempt stream to standard error as they come;
    /// the generated body (a create or deploy-generated body) is printed on standard
    /// output as JSON. Exit 1 when refused or when the generation fails, 2 on bad
    /// input.
    Generate {
        /// `pipeline` or `plugin`.
        kind: String,
        /// What to generate, in words.
        #[arg(long)]
        prompt: Option<String>,
        /// A Git repository's URL to generate a pipeline for, instead of a prompt.
        #[arg(long)]
        repository: Option<String>,
        /// The repository's branch or tag.
        #[arg(long = "ref")]
        reference: Option<String>,
        /// `openai`, `anthropic` or `ollama`.
        #[arg(long)]
        provider: String,
        /// One of the provider's models.
        #[arg(long)]
        model: String,
        /// The organization's id (sent as x-org-id).
        #[arg(long)]
        organization: String,
        #[command(flatten)]
        platform: PlatformArgs,
    },
    /// Create the first super-admin account from PLATFORM_IDENTIFIER and
    /// PLATFORM_PASSWORD (DATABASE_URL), only for an identifier listed in
    /// BOOTSTRAP_SUPERADMIN_EMAILS. Without them, the development defaults
    /// (admin@localhost, compliance-development-password) are used, and only with
    /// --development; the defaults are refused otherwise. An existing account is
    /// left as it is.
    Provision {
        /// Allow the built-in development credentials (never in a shared environment).
        #[arg(long)]
        development: bool,
    },
    /// Sign in at PLATFORM_URL with PLATFORM_IDENTIFIER and PLATFORM_PASSWORD (or
    /// the password on standard input with --password-stdin) and print the access
    /// token, for PLATFORM_TOKEN; nothing is stored unless --output names a file
    /// (written with mode 600). Exit 1 when refused.
    Login {
        /// The platform's base URL.
        #[arg(long, env = "PLATFORM_URL", default_value = "http://localhost:3000")]
        url: String,
        /// The account's e-mail.
        #[arg(long, env = "PLATFORM_IDENTIFIER")]
        identifier: String,
        /// Read the password from the first line of standard input instead of
        /// PLATFORM_PASSWORD.
        #[arg(long)]
        password_stdin: bool,
        /// The organization to sign into.
        #[arg(long)]
        org: Option<String>,
        /// Write the whole answer (access and refresh tokens) as JSON to this file
        /// instead of printing the access token.
        #[arg(long)]
        output: Option<std::path::PathBuf>,
    },
    /// Reporting from the command line.
    Report {
        #[command(subcommand)]
        verb: ReportVerb,
    },
    /// Make a signing key for audit checkpoints: the private key (for
    /// AUDIT_CHECKPOINT_KEY) on standard output, its verifier key on standard error.
    CheckpointKey {
        /// The key's name, shown in each signature line (no spaces, no `+`).
        #[arg(long)]
        name: String,
    },
    /// Print the effective limits of a tier with bundles.
    Entitlements {
        /// developer, pro, team or enterprise.
        #[arg(long)]
        tier: String,
        /// A bundle, ID[:QTY], repeatable.
        #[arg(long = "bundle")]
        bundles: Vec<String>,
    },
}

#[derive(Subcommand)]
pub enum ReportVerb {
    /// Send a file of execution events (a JSON array, one envelope, or one envelope
    /// per line) to PLATFORM_URL's `/api/reports/events` with the service token of
    /// PLATFORM_TOKEN, in batches, for backfills. Every event is checked first: a
    /// malformed one stops everything before anything is sent (exit 2). Redelivered
    /// events are stored once. Exit 1 when the server refuses a batch.
    Ingest {
        /// The events file (`-` for standard input).
        file: String,
        /// Events per request (1 to 1000).
        #[arg(long, default_value_t = 500)]
        batch: usize,
        #[command(flatten)]
        platform: PlatformArgs,
    },
}

#[derive(Subcommand)]
pub enum AuditVerb {
    /// Print the chain of an organization, one JSON row a line, in seq order (DATABASE_URL).
    Export {
        /// The organization (the chain key).
        #[arg(long)]
        org: String,
        /// Put the chain's latest signed checkpoint first, as a line
        /// `{"checkpoint": "<signed note>"}`, so that the file verifies alone.
        #[arg(long)]
        checkpoint: bool,
    },
    /// Verify an exported chain, and its signed checkpoints when there are (bundled in
    /// the export, or given with --checkpoint); exit 0 intact, 1 broken, 2 bad input.
    Verify {
        /// The JSON-lines export.
        file: std::path::PathBuf,
        /// A signed checkpoint note to check the chain against (repeatable).
        #[arg(long = "checkpoint")]
        checkpoints: Vec<std::path::PathBuf>,
        /// The checkpoints' verifier key (`<name>+<id>+<key>`, or a file holding it),
        /// as `GET /api/audit/checkpoints/key` gives it; needed when checkpoints are
        /// present.
        #[arg(long)]
        key: Option<String>,
    },
}

/// What `compliance export` does.
#[derive(Debug, Subcommand)]
pub enum ExportVerb {
    /// Verify an organization's export archive: every file against the manifest's
    /// SHA-256, size and lines, nothing else in it, and its audit chain (with its
    /// signed checkpoint when `--key` is given); exit 0 intact, 1 not, 2 bad input.
    Verify {
        /// The archive (`.zip`) as downloaded.
        file: std::path::PathBuf,
        /// The checkpoints' verifier key (`<name>+<id>+<key>`, or a file holding it),
        /// as `GET /api/audit/checkpoints/key` gives it; needed when the archive's
        /// chain carries a checkpoint.
        #[arg(long)]
        key: Option<String>,
    },
}
